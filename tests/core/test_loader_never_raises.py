"""The deck loader reports, it never raises or hangs: paths the system refuses, nesting past
Python's recursion limit, and compute modules whose import never ends."""

from __future__ import annotations

import json
import sys
import threading
from types import SimpleNamespace

import pytest

from gambit.core import check_deck_tree
from gambit.core._loader import imports

from .conftest import DeckFolder


def test_a_schema_path_too_long_for_the_system_is_an_error(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", f'contextSchema = "./{"x" * 300}.json"')
    tree, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert "File name too long" in error.message and error.file == str(path)
    assert len(error.message) < 300  # the path is shortened in the message


def test_a_schema_nested_thousands_deep_is_an_error(decks: DeckFolder):
    text = '{"type":"object","properties":{"x":' * 3000 + "{}" + "}}" * 3000
    decks.write("d/s.json", text)
    path = decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"')
    _, diag = check_deck_tree(path)
    assert diag.errors and "nested more than" in diag.errors[0].message


def test_a_module_whose_import_never_ends_is_reported_in_time(decks: DeckFolder, monkeypatch):
    # The module blocks until the test releases it; the clock is the stand-in for `_join`:
    # the limit passes at once while the gate is shut, and the import is waited for to its
    # end once it is open. No assertion depends on how long anything takes.
    gate = threading.Event()
    monkeypatch.setitem(sys.modules, "deck_gate", SimpleNamespace(gate=gate))
    waits: list[float] = []

    def join(thread: threading.Thread, limit: float) -> None:
        waits.append(limit)
        if gate.is_set():
            thread.join()

    monkeypatch.setattr(imports, "IMPORT_TIME_LIMIT", 0.5)
    monkeypatch.setattr(imports, "_join", join)
    path = decks.write("slow/deck.py", "import deck_gate\n\ndeck_gate.gate.wait()\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.message == "deck.py did not finish importing within 0.5 s"
    assert "inside run(ctx)" in error.hint
    assert waits == [0.5]  # waited for once, with the limit
    stuck = imports._STUCK_IMPORTS[str(path.resolve())]
    assert stuck.is_alive()
    # Asked again while that import still runs: the same error at once, no second thread.
    _, diag = check_deck_tree(path)
    assert diag.errors[0].message == error.message
    assert waits == [0.5]
    assert [t for t in threading.enumerate() if t.name == "import deck.py"] == [stuck]
    # Once that import has ended, the module is imported again (and now finishes).
    gate.set()
    stuck.join()
    _, diag = check_deck_tree(path)
    assert waits == [0.5, 0.5]
    assert [e.message for e in diag.errors] == ["did not export a valid deck definition"]


def test_a_module_that_imports_in_time_still_loads(decks: DeckFolder):
    path = decks.write(
        "ok/deck.py",
        """
        import time
        import gambit
        time.sleep(0.05)
        deck = gambit.define_deck(run=lambda ctx: "ok", label="ok")
        """,
    )
    tree, diag = check_deck_tree(path)
    assert not diag.errors and tree is not None and tree.root.label == "ok"


def test_an_import_error_in_the_thread_keeps_its_line(decks: DeckFolder):
    path = decks.write("bad/deck.py", "import gambit\n\nraise ValueError('boom')\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.message == "importing the module failed: ValueError: boom" and error.line == 3


@pytest.mark.parametrize("depth", [500, 5000])
def test_deep_json_front_matter_values_never_raise(decks: DeckFolder, depth: int):
    value = "[" * depth + "]" * depth
    path = decks.deck("d/PROMPT.md", f"label = 'x'\n[modelParams]\nextra = {json.dumps(value)}")
    check_deck_tree(path)  # a string, whatever it holds: no exception


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_legacy_front_matter_nested_past_the_limit_names_it(decks: DeckFolder, fmt: str):
    deep = "[" * 3000 + "]" * 3000
    text = f'{{"label": "x", "modelParams": {{"extra": {deep}}}}}' if fmt == "json" else ""
    text = f"---json\n{text}\n---\nHi\n" if fmt == "json" else f"---\nlabel: {deep}\n---\nHi\n"
    path = decks.write("legacy.deck.md", text)
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.file == str(path)
    assert f"invalid {fmt.upper()} front matter: arrays or tables nested more than 400" in (
        error.message
    )
    assert "flatten the nesting" in error.hint


def test_a_json_schema_too_deep_to_parse_names_the_limit(decks: DeckFolder):
    schema = decks.write("d/s.json", "[" * 200_000 + "]" * 200_000)
    path = decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"')
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.file == str(schema)
    assert error.message == "the schema is nested more than 128 levels deep"


def test_a_compute_decks_schema_dict_nested_past_the_limit_names_the_key(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        schema = {"type": "string"}
        for _ in range(1000):
            schema = {"type": "object", "properties": {"a": schema}}
        deck = gambit.define_deck(run=lambda ctx: "x", context_schema=schema)
        """,
    )
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.key) == (str(path.resolve()), "context_schema")
    assert error.message == "the schema is nested more than 128 levels deep"
