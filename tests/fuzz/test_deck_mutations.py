"""A mutation fuzzer over the repository's real decks: the bundled examples and the ported
TypeScript decks in tests/core/fixtures. Each case copies nothing: it mutates one or two
files of a deck tree in place (bytes flipped, lines dropped, repeated or swapped, tokens
that amplify inserted: embeds, aliases, `$ref`, odd keys, huge numbers), runs what
`gambit check --json` runs (`check_report`), prints the report as strict JSON, and puts the
files back.

Every case must finish without raising and within the per-case budget of `budget.py`.
Python files are not mutated: the loader imports them, and a mutated module is code that
runs (its import has its own time limit, IMPORT_TIME_LIMIT). So examples/hello, a lone
deck.py, is not among the trees; the support example still imports its `execute` module
on every case.
"""

from __future__ import annotations

import json
import os
import reprlib
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gambit.cli._check import check_report

from .budget import within_budget

BUDGET = settings(
    max_examples=int(os.environ.get("GAMBIT_FUZZ_EXAMPLES", "60")),
    deadline=None,  # the time budget is measured by within_budget, per case
    suppress_health_check=list(HealthCheck),
)
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "core" / "fixtures" / "ts_gambit"
# (deck tree folder, its root deck)
TREES = [
    (REPO / "examples" / "support", "PROMPT.md"),
    (FIXTURES / "router", "router.deck.md"),
    (FIXTURES / "front_desk", "front_desk.deck.md"),
    (FIXTURES / "yaml_notes", "notes.deck.md"),
    (FIXTURES / "needs_porting", "clock.deck.md"),
]
TOKENS = [
    "![](./PROMPT.md)",
    "![](../x.md)",
    "![](gambit://snippets/respond.md)",
    "![](gambit://respond)",
    "![" * 2000,
    "![(" * 2000,
    "&a [1, 2]",
    "*a",
    "<<: *a",
    "x: &loop [*loop]",
    "1: x",
    "null: x",
    "true: x",
    "2020-01-01: x",
    "? [a]\n: b",
    '"$ref": "#"',
    '"$ref": "#/properties"',
    '"$schema": 5',
    '"$schema": []',
    "nan",
    "inf",
    "1e999",
    "9" * 5000,
    "+++",
    "---",
    "\x00",
    "\ufeff",
    '[[actions]]\nname = "x"\ndescription = "d"\npath = "./PROMPT.md"',
    'contextSchema = "./PROMPT.md"',
    'responseSchema = "gambit://schemas/nope.zod.ts"',
    "[modelParams]\ntemperature = nan",
    "z.object({",
    "z.lazy(() => x)",
    "})",
    "[" * 1000,
    "{" * 1000,
    'label = "',
]


def _mutable_files(tree: Path) -> list[str]:
    return sorted(
        p.relative_to(tree).as_posix()
        for p in tree.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    )


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, str, list[str]]]:
    """Each deck tree copied once: (copy, its root deck, the files a case may mutate)."""
    base = tmp_path_factory.mktemp("mutations")
    copies = []
    for index, (source, root) in enumerate(TREES):
        copy = base / f"{index}-{source.name}"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        copies.append((copy, root, _mutable_files(copy)))
    return copies


_SHORT = reprlib.Repr(maxstring=60, maxlist=10, maxtuple=10)  # a case, in a hang's message

MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("drop line"), st.floats(0, 1)),
    st.tuples(st.just("repeat line"), st.floats(0, 1), st.integers(2, 2000)),
    st.tuples(st.just("swap lines"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(TOKENS)),
    st.tuples(st.just("insert line"), st.floats(0, 1), st.sampled_from(TOKENS)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
)


def mutate(data: bytes, mutation: tuple) -> bytes:
    kind, where, *rest = mutation
    if kind == "flip":
        if not data:
            return bytes([rest[0]])
        at = min(int(where * len(data)), len(data) - 1)
        return data[:at] + bytes([rest[0]]) + data[at + 1 :]
    if kind == "insert":
        at = int(where * len(data))
        return data[:at] + rest[0].encode() + data[at:]
    if kind == "truncate":
        return data[: int(where * len(data))]
    lines = data.split(b"\n")
    at = min(int(where * len(lines)), len(lines) - 1)
    if kind == "drop line":
        del lines[at]
    elif kind == "repeat line":
        lines[at:at] = [lines[at]] * (rest[0] - 1)
    elif kind == "swap lines":
        other = min(int(rest[0] * len(lines)), len(lines) - 1)
        lines[at], lines[other] = lines[other], lines[at]
    else:  # insert line
        lines.insert(at, rest[0].encode())
    return b"\n".join(lines)


@BUDGET
@given(
    which=st.integers(0, len(TREES) - 1),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.lists(MUTATION, min_size=1, max_size=4)),
        min_size=1,
        max_size=2,
    ),
)
def test_mutated_real_decks_check_in_budget(
    trees: list[tuple[Path, str, list[str]]], which: int, edits: list
):
    tree, root, files = trees[which]
    originals: dict[Path, bytes] = {}
    case = []
    try:
        for pick, mutations in edits:
            path = tree / files[min(int(pick * len(files)), len(files) - 1)]
            originals.setdefault(path, path.read_bytes())
            data = path.read_bytes()  # as an earlier edit of this case left it
            for mutation in mutations:
                data = mutate(data, mutation)
            path.write_bytes(data)
            case.append(f"{path.relative_to(tree)}: {_SHORT.repr(mutations)}")
        report = within_budget(
            lambda: check_report(tree / root, strict=False),
            f"checking {tree.name} ({'; '.join(case)})",
        )
        report.pop("_problems")
        json.loads(json.dumps(report, allow_nan=False))  # what `check --json` prints
        assert report["ok"] == (report["errors"] == [])
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
