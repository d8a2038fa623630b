"""Property tests of the deck loader on the shapes that amplify a small input into a large
amount of work (docs/decks.md, "Bounds"): embeds that fan out, `$ref`s that fan out, YAML
aliases, long lines of unclosed embeds, keys that are not strings and odd `$schema` values.

Every case must load without raising, within the per-case budget of `budget.py`, and a case
past a bound must report that bound. `./dev test` runs each target with a small budget (60
examples); `./dev fuzz` with GAMBIT_FUZZ_EXAMPLES (10,000 by default).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gambit.core import check_deck_tree
from gambit.core._errors import Diagnostics
from gambit.core._loader.embeds import MAX_PROMPT_CHARS, find_embeds
from gambit.core._schema import MAX_SCHEMA_VALUES

from .budget import within_budget

BUDGET = settings(
    max_examples=int(os.environ.get("GAMBIT_FUZZ_EXAMPLES", "60")),
    deadline=None,  # the time budget is measured by within_budget, per case
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("amplifiers")


def fresh(folder: Path) -> Path:
    """An empty deck folder for one case."""
    deck = folder / "deck"
    shutil.rmtree(deck, ignore_errors=True)
    deck.mkdir()
    return deck


def check(root: Path, case: str) -> Diagnostics:
    _, diag = within_budget(lambda: check_deck_tree(root), case)
    return diag


def messages(diag: Diagnostics) -> list[str]:
    return [p.message for p in diag.errors]


@BUDGET
@given(
    levels=st.integers(1, 40),
    fan_out=st.integers(1, 4),
    leaf=st.integers(1, 300),
    cycle=st.booleans(),
)
def test_embed_fan_out(folder: Path, levels: int, fan_out: int, leaf: int, cycle: bool):
    deck = fresh(folder)
    for i in range(levels):
        embeds = " ".join([f"![](./s{i + 1}.md)"] * fan_out)
        (deck / f"s{i}.md").write_text(f"{i} {embeds}\n", encoding="utf-8")
    last = "![](./s0.md)" if cycle else "x" * leaf
    (deck / f"s{levels}.md").write_text(f"{last}\n", encoding="utf-8")
    (deck / "PROMPT.md").write_text("+++\n+++\n![](./s0.md)\n", encoding="utf-8")
    found = messages(check(deck / "PROMPT.md", f"embed fan-out {fan_out}^{levels}, leaf {leaf}"))
    size = leaf  # the prompt's length once expanded: s{i} is "i " and fan_out copies of s{i+1}
    for i in reversed(range(levels)):
        size = len(f"{i} ") + fan_out * size + fan_out - 1
    too_long = f"longer than {MAX_PROMPT_CHARS:,} characters"
    if cycle:  # found as a cycle, or past the depth limit on the way round it
        assert any("cycle detected" in m or "levels deep" in m for m in found), found
    elif size > MAX_PROMPT_CHARS + 100:
        assert any(too_long in m for m in found), found
    elif size < MAX_PROMPT_CHARS - 100 and levels < 32:  # 32: MAX_EMBED_DEPTH
        assert found == []


@BUDGET
@given(
    levels=st.integers(1, 60),
    fan_out=st.integers(1, 4),
    recursive=st.booleans(),
    dialect=st.sampled_from([None, "https://json-schema.org/draft/2020-12/schema", 5, [], {}]),
)
def test_ref_fan_out(folder: Path, levels: int, fan_out: int, recursive: bool, dialect: object):
    defs: dict = {"d0": {"$ref": f"#/$defs/d{levels}"} if recursive else {"type": "string"}}
    for i in range(1, levels + 1):
        properties = {f"p{j}": {"$ref": f"#/$defs/d{i - 1}"} for j in range(fan_out)}
        defs[f"d{i}"] = {"type": "object", "properties": properties}
    schema: dict = {"$defs": defs, "$ref": f"#/$defs/d{levels}"}
    if dialect is not None:
        schema["$schema"] = dialect
    deck = fresh(folder)
    (deck / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    (deck / "PROMPT.md").write_text('+++\ncontextSchema = "./s.json"\n+++\nHi\n', encoding="utf-8")
    found = messages(check(deck / "PROMPT.md", f"$ref fan-out {fan_out}^{levels}"))
    size = 2  # values once inlined: d0 is {"type": "string"}; d{i} an object of fan_out d{i-1}
    for _ in range(levels):
        size = 3 + fan_out * size
    too_big = f"more than {MAX_SCHEMA_VALUES:,} values"
    if dialect is not None and not isinstance(dialect, str):
        assert any("$schema must be a string" in m for m in found), found
    elif recursive:
        assert any("recursive $ref" in m for m in found), found
    elif size > MAX_SCHEMA_VALUES:
        assert any(too_big in m for m in found), found
    elif 2 * size < MAX_SCHEMA_VALUES:  # the count may add one value per $ref
        assert found == [], found


@BUDGET
@given(
    levels=st.integers(0, 12),
    width=st.integers(1, 12),
    recursive=st.booleans(),
    merge=st.booleans(),
)
def test_yaml_aliases(folder: Path, levels: int, width: int, recursive: bool, merge: bool):
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    if recursive:
        lines.append("loop: &loop [1, *loop]")
    if merge:
        lines.append("base: &base {label: x}\nmerged:\n  <<: *base")
    deck = fresh(folder)
    (deck / "d.deck.md").write_text("---\n" + "\n".join(lines) + "\n---\nHi\n", encoding="utf-8")
    found = messages(check(deck / "d.deck.md", f"YAML aliases {width}^{levels}"))
    if levels or recursive or merge:
        assert len(found) == 1 and "YAML aliases are not allowed" in found[0], found


YAML_KEYS = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.dates(min_value=datetime.date(1, 1, 1)),
)
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(YAML_KEYS, inner, max_size=3),
    max_leaves=10,
)
PLACES = st.sampled_from(
    [(), ("modelParams",), ("modelParams", "additionalParams"), ("actions", 0), ("guardrails",)]
)


@BUDGET
@given(table=st.dictionaries(YAML_KEYS, YAML_VALUES, max_size=4), place=PLACES)
def test_odd_yaml_keys(folder: Path, table: dict, place: tuple):
    attrs: object = table
    for step in reversed(place):
        attrs = [attrs] if step == 0 else {step: attrs}
    text = yaml.safe_dump(attrs, allow_unicode=True, sort_keys=False)
    deck = fresh(folder)
    (deck / "d.deck.md").write_text(f"---\n{text}---\nHi\n", encoding="utf-8")
    diag = check(deck / "d.deck.md", f"odd YAML keys at {place}")
    key_errors = [p for p in diag.errors if re.match(r"key .* must be a string", p.message)]
    closes_early = any(line.strip() == "---" for line in text.splitlines())
    if _has_odd_key(attrs) and not closes_early:
        assert len(key_errors) == 1, diag.errors
    else:
        assert key_errors == []


def _has_odd_key(value: object) -> bool:
    if isinstance(value, dict):
        return any(not isinstance(k, str) or _has_odd_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_odd_key(v) for v in value)
    return False


@BUDGET
@given(
    dialect=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=6,
    ),
    nested=st.booleans(),
)
def test_odd_dollar_schema(folder: Path, dialect: object, nested: bool):
    schema: dict = {"type": "object", "properties": {"a": {"type": "string"}}}
    (schema["properties"]["a"] if nested else schema)["$schema"] = dialect
    deck = fresh(folder)
    (deck / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    (deck / "PROMPT.md").write_text('+++\ncontextSchema = "./s.json"\n+++\nHi\n', encoding="utf-8")
    found = messages(check(deck / "PROMPT.md", f"$schema {dialect!r:.50}"))
    if not isinstance(dialect, str | None):
        assert len(found) == 1 and "$schema" in found[0], found


EMBED_UNITS = st.sampled_from(["![", "![(", "![a](", "](", "]", "(", ")", "x.md", " ", "\n", "!"])
EMBED_RE = re.compile(r"!\[([^\]\n]*)\]\(([^)\s]+)\)")  # the syntax find_embeds scans


@BUDGET
@given(units=st.lists(st.tuples(EMBED_UNITS, st.integers(1, 40_000)), min_size=1, max_size=4))
def test_long_lines_of_embed_syntax(folder: Path, units: list[tuple[str, int]]):
    body = "".join(unit * count for unit, count in units)
    deck = fresh(folder)
    (deck / "x.md").write_text("X\n", encoding="utf-8")
    (deck / "PROMPT.md").write_text(f"+++\n+++\n{body}\n", encoding="utf-8")
    check(deck / "PROMPT.md", "embed syntax " + ", ".join(f"{u!r}*{n}" for u, n in units))
    if len(body) <= 2_000:  # the regex is quadratic: compare on short bodies only
        expected = [(m.start(), m.end(), m.group(2)) for m in EMBED_RE.finditer(body)]
        assert list(find_embeds(body)) == expected
