"""Property: the loader returns a deck or raises our DeckError carrying a file; nothing else."""

from __future__ import annotations

import string
from pathlib import Path

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gambit.core import DeckError, load_deck_tree

KEYS = [
    "label",
    "startMode",
    "contextSchema",
    "responseSchema",
    "respond",
    "allowEnd",
    "modelParams",
    "guardrails",
    "permissions",
    "handlers",
    "actions",
    "scenarios",
    "graders",
    "tools",
    "mcpServers",
    "execute",
    "actionDecks",
    "testDecks",
    "graderDecks",
    "inputSchema",
    "outputSchema",
    "deck",
    "model",
    "temperature",
    "reasoning",
    "effort",
    "additionalParams",
    "maxDepth",
    "timeoutMs",
    "read",
    "run",
    "paths",
    "commands",
    "onBusy",
    "onError",
    "path",
    "name",
    "description",
    "inputSchema",
    "x",
]
SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(
        [
            "./PROMPT.md",
            "../x/PROMPT.md",
            "gambit://schemas/graders/respond.zod.ts",
            "./",
            "a.py",
            "gambit://snippets/x.md",
        ]
    ),
    st.datetimes(),
)
TOML_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    ),
    max_leaves=12,
)
TABLES = st.dictionaries(st.sampled_from(KEYS), TOML_VALUES, max_size=6)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _load(path: Path) -> None:
    try:
        load_deck_tree(path)
    except DeckError as exc:
        assert exc.file, "a deck error must name a file"


@FUZZ
@given(text=st.text(alphabet=string.printable + "+-=![]()ÿ\ufeff", max_size=300))
def test_arbitrary_text_loads_or_raises_a_deck_error(tmp_path: Path, text: str):
    path = tmp_path / "PROMPT.md"
    path.write_text(text, encoding="utf-8")
    _load(path)


@FUZZ
@given(
    table=TABLES,
    body=st.sampled_from(["", "x ![](./a.md)", "![](gambit://snippets/respond.md)", "![i](i.png)"]),
)
def test_arbitrary_toml_loads_or_raises_a_deck_error(tmp_path: Path, table: dict, body: str):
    path = tmp_path / "PROMPT.md"
    try:
        front = tomli_w.dumps(table)
    except (TypeError, ValueError):
        return  # not representable as TOML
    path.write_text(f"+++\n{front}+++\n{body}\n", encoding="utf-8")
    _load(path)
