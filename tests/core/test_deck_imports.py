"""How a deck's Python is imported (docs/decks.md, "Trust and limits" / "What runs"): each
deck gets its own sibling modules, no bytecode is written into or read from deck folders, and
whatever a module raises at import, KeyboardInterrupt included, is one load error."""

from __future__ import annotations

import os
import py_compile
import sys
import threading
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from gambit.core import check_deck_tree, load_deck_tree
from gambit.core._loader import imports

from .conftest import DeckFolder

COMPUTE = (
    "import gambit\n{imports}\ndeck = gambit.define_deck(run=lambda ctx: {value}, label={value})\n"
)


def compute_deck(decks: DeckFolder, folder: str, imports_: str, value: str) -> Path:
    return decks.write(f"{folder}/deck.py", COMPUTE.format(imports=imports_, value=value))


def label(path: Path) -> str | None:
    tree, diag = check_deck_tree(path)
    assert diag.errors == [], [p.render() for p in diag.errors]
    assert tree is not None
    return tree.root.label


def test_two_decks_each_get_their_own_helper(decks: DeckFolder):
    for name in ("a", "b"):
        decks.write(f"{name}/helper.py", f"VALUE = 'helper of {name}'\n")
        compute_deck(decks, name, "import helper", "helper.VALUE")
    assert label(decks.root / "a/deck.py") == "helper of a"
    assert label(decks.root / "b/deck.py") == "helper of b"
    assert "helper" not in sys.modules
    # A Markdown deck's execute action gets its own folder's helper too.
    decks.write("c/tools/helper.py", "VALUE = 'helper of c'\n")
    decks.write(
        "c/tools/act.py",
        "import gambit, helper\n"
        "deck = gambit.define_deck(run=lambda ctx: helper.VALUE, context_schema={}, "
        "response_schema={}, label=helper.VALUE)\n",
    )
    deck = decks.deck(
        "c/PROMPT.md",
        'modelParams.model = "m"\n[[actions]]\nname = "act"\ndescription = "d"\n'
        'execute = "./tools/act.py"',
    )
    tree = load_deck_tree(deck)
    assert tree.decks[str((decks.root / "c/tools/act.py").resolve())].label == "helper of c"


def test_a_package_beside_the_deck_is_the_decks_own(decks: DeckFolder):
    for name in ("a", "b"):
        decks.write(f"{name}/lib/__init__.py", "")
        decks.write(f"{name}/lib/words.py", f"WORD = 'word of {name}'\n")
        compute_deck(decks, name, "from lib import words", "words.WORD")
    assert label(decks.root / "a/deck.py") == "word of a"
    assert label(decks.root / "b/deck.py") == "word of b"
    assert "lib" not in sys.modules and "lib.words" not in sys.modules


def test_decks_checked_side_by_side_in_threads_each_get_their_own_helper(decks: DeckFolder):
    for name in ("a", "b"):
        # The helper sleeps while it imports, so both imports would overlap without the lock.
        decks.write(f"{name}/helper.py", f"import time\ntime.sleep(0.2)\nVALUE = '{name}'\n")
        compute_deck(decks, name, "import helper", "helper.VALUE")
    labels: dict[str, str | None] = {}

    def check(name: str) -> None:
        labels[name] = label(decks.root / name / "deck.py")

    threads = [threading.Thread(target=check, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert labels == {"a": "a", "b": "b"}


def test_no_pycache_is_written_into_a_deck_folder(decks: DeckFolder):
    decks.write("a/helper.py", "VALUE = 1\n")
    decks.write("a/lib/__init__.py", "X = 2\n")
    decks.write("a/lib/more.py", "Y = 3\n")
    compute_deck(decks, "a", "import helper\nfrom lib import more", "str(helper.VALUE + more.Y)")
    decks.write("a/schema.py", "schema = {'type': 'object'}\n")
    deck = decks.deck(
        "b/PROMPT.md",
        'modelParams.model = "m"\ncontextSchema = "../a/schema.py"\n'
        '[[actions]]\nname = "x"\ndescription = "d"\nexecute = "../a/deck.py"\n'
        'contextSchema = "../a/schema.py"\nresponseSchema = "../a/schema.py"',
    )
    assert label(decks.root / "a/deck.py") == "4"
    assert check_deck_tree(deck)[1].errors == []
    assert list(decks.root.rglob("__pycache__")) == []
    assert list(decks.root.rglob("*.pyc")) == []


def test_bytecode_found_in_a_deck_folder_is_not_used(decks: DeckFolder):
    helper = decks.write("a/helper.py", "VALUE = 'from the source'\n")
    # Bytecode of other code, stamped with the source's size and time, where Python looks
    # for the helper's cache: the standard loader would run it instead of the source.
    other = decks.write("elsewhere/helper.py", "VALUE = 'from bytecode'  \n")
    assert other.stat().st_size == helper.stat().st_size
    os.utime(other, ns=(helper.stat().st_atime_ns, helper.stat().st_mtime_ns))
    py_compile.compile(str(other), cfile=cache_from_source(str(helper)), doraise=True)
    compute_deck(decks, "a", "import helper", "helper.VALUE")
    assert label(decks.root / "a/deck.py") == "from the source"
    # A compiled module without its source is not imported from a deck folder at all.
    py_compile.compile(str(other), cfile=str(decks.root / "b/compiled.pyc"), doraise=True)
    compute_deck(decks, "b", "import compiled", "compiled.VALUE")
    tree, diag = check_deck_tree(decks.root / "b/deck.py")
    assert "No module named 'compiled'" in diag.errors[0].message


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "SystemExit(3)", "GeneratorExit"])
def test_whatever_a_module_raises_at_import_is_one_load_error(decks: DeckFolder, raised: str):
    path = decks.write("a/deck.py", f"x = 1\nraise {raised}\n")
    tree, diag = check_deck_tree(path)
    assert tree is None
    (error,) = diag.errors
    assert error.message.startswith(f"importing the module failed: {raised.split('(')[0]}")
    assert error.line == 2


def test_a_ctrl_c_while_waiting_for_an_import_still_stops(decks: DeckFolder, monkeypatch):
    path = decks.write("a/deck.py", "import gambit\ndeck = gambit.define_deck(run=print)\n")

    def interrupted(thread: threading.Thread, limit: float) -> None:
        thread.join(limit)
        raise KeyboardInterrupt  # the user pressed Ctrl-C in the main thread

    monkeypatch.setattr(imports, "_join", interrupted)
    with pytest.raises(KeyboardInterrupt):
        check_deck_tree(path)
    assert str(path.parent) not in sys.path
