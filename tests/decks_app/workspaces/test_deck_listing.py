"""Listing decks never runs a deck's Python in the web process (decks_app.workspaces.probe)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from decks_app.workspaces import served as workspaces
from decks_app.workspaces.served import list_decks
from gambit.core import DeckRunsCode, check_deck_tree

COMPUTE = """
import os, gambit
with open(os.environ["GAMBIT_PROBE_MARKS"], "a") as marks:
    marks.write(f"{os.getpid()}\\n")
{extra}
deck = gambit.define_deck(run=lambda ctx: "hi", label="Marked")
"""


def _deck(root: Path, name: str, extra: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "deck.py").write_text(COMPUTE.replace("{extra}", extra))
    return folder / "deck.py"


@pytest.fixture
def marked(tmp_path, monkeypatch, settings, db):
    marks = tmp_path / "marks.txt"
    marks.write_text("")
    monkeypatch.setenv("GAMBIT_PROBE_MARKS", str(marks))
    settings.GAMBIT_WORKSPACE = str(tmp_path / "ws")
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws", marks


def test_the_loader_can_refuse_to_import_code():
    with pytest.raises(DeckRunsCode) as raised:
        check_deck_tree("examples/hello/deck.py", import_modules=False)
    assert raised.value.file.endswith("hello/deck.py")
    tree, diag = check_deck_tree("examples/support/scenarios/late_delivery/PROMPT.md", import_modules=False)  # fmt: skip
    assert tree is not None and not diag.errors


def test_a_compute_deck_is_listed_from_a_child_process_and_kept_until_it_changes(marked):
    root, marks = marked
    deck = _deck(root, "marked")
    ws = workspaces.current_workspace()
    [info] = list_decks(ws)
    assert (info.path, info.label, info.kind, info.error) == ("marked/deck.py", "Marked", "compute", None)  # fmt: skip
    pids = marks.read_text().split()
    assert len(pids) == 1 and int(pids[0]) != os.getpid()  # imported elsewhere, not here
    assert not any(name.startswith("gambit_deck_module_") and getattr(m, "__file__", "") == str(deck) for name, m in sys.modules.items())  # fmt: skip
    list_decks(ws)
    assert len(marks.read_text().split()) == 1  # unchanged: not loaded again
    time.sleep(0.01)
    deck.write_text(deck.read_text().replace('"Marked"', '"Renamed"'))
    [info] = list_decks(ws)
    assert info.label == "Renamed" and len(marks.read_text().split()) == 2


def test_a_deck_that_exits_at_import_leaves_the_server_and_the_list_standing(marked):
    root, _ = marked
    _deck(root, "exits", extra="os._exit(3)")
    _deck(root, "fine")
    infos = {i.path: i for i in list_decks(workspaces.current_workspace())}
    assert infos["fine/deck.py"].error is None
    assert "loading the deck failed" in infos["exits/deck.py"].error


def test_a_worker_loads_a_deck_tree_once_until_a_file_of_it_changes(tmp_path):
    from decks_app.runs import deck_trees

    folder = tmp_path / "d"
    (folder / "schemas").mkdir(parents=True)
    (folder / "schemas" / "in.json").write_text('{"type": "string"}')
    deck = folder / "PROMPT.md"
    deck.write_text('+++\nlabel = "One"\ncontextSchema = "./schemas/in.json"\n+++\n\nHi.\n')
    first = deck_trees.load(deck)
    assert deck_trees.load(deck) is first
    time.sleep(0.01)
    (folder / "schemas" / "in.json").write_text('{"type": "number"}')  # not the deck file
    second = deck_trees.load(deck)
    assert second is not first and second.root.context_schema.to_json_schema()["type"] == "number"


def test_slots_that_find_a_deck_missing_at_once_wait_for_one_load_of_it(tmp_path, monkeypatch):
    """A new worker's slots all start on the same deck: one of them loads it, the others
    wait for that load instead of validating the same schemas again each."""
    import threading

    from decks_app.runs import deck_trees

    deck = tmp_path / "d" / "PROMPT.md"
    deck.parent.mkdir()
    deck.write_text('+++\nlabel = "One"\n+++\n\nHi.\n')
    loads = []
    real_load = deck_trees.load_deck_tree

    def slow_load(*args, **kwargs):
        loads.append(threading.current_thread().name)
        time.sleep(0.2)  # long enough for every slot to arrive while it loads
        return real_load(*args, **kwargs)

    monkeypatch.setattr(deck_trees, "load_deck_tree", slow_load)
    start = threading.Barrier(8)
    trees = []

    def slot():
        start.wait()
        trees.append(deck_trees.load(deck))

    threads = [threading.Thread(target=slot) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(trees) == 8 and all(tree is trees[0] for tree in trees)
    assert len(loads) == 1
