"""`gambit.core`'s public names: each loads from its private module on first use (PEP 562)."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import gambit.core

INIT = Path(gambit.core.__file__)


def _type_checking_imports() -> dict[str, str]:
    """name -> module, as the `if TYPE_CHECKING:` block of gambit/core/__init__.py imports them."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module or ""
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_lazy_table_and_the_type_checking_imports_name_the_same_things():
    table = {name: module for module, names in gambit.core._SOURCES.items() for name in names}
    assert table == _type_checking_imports()
    assert sorted(table) == sorted(gambit.core.__all__)


@pytest.mark.parametrize("name", gambit.core.__all__)
def test_every_public_name_resolves_to_its_definition(name):
    defined = getattr(importlib.import_module(f"gambit.core.{gambit.core._MODULE_OF[name]}"), name)
    assert getattr(gambit.core, name) is defined
    assert name in dir(gambit.core)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'run_deckk'"):
        gambit.core.run_deckk  # noqa: B018
    with pytest.raises(ImportError):
        exec("from gambit.core import run_deckk", {})


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_importing_the_runtime_leaves_grading_scenarios_and_verify_unloaded():
    loaded = _modules_after("from gambit.core import run_deck, load_deck_tree")
    assert "gambit.core._runtime" in loaded
    unused = {
        "gambit.core._grading",
        "gambit.core._scenario",
        "gambit.core._verify",
        "gambit.core._verify_run",
        "gambit.core._calibration",
        "gambit.core._statistics",
        "numpy",
        "scipy",
        "krippendorff",
        "gambit.core.verify",
        "gambit.core._zod",
        "statistics",
        "importlib.resources",  # only for gambit:// snippets and stdlib decks
    }
    assert not unused & loaded


def test_the_package_namespace_still_offers_everything():
    loaded = _modules_after("import gambit; gambit.run_scenario; gambit.grade_state")
    assert {"gambit.core._scenario", "gambit.core._grading"} <= loaded


def test_the_verify_module_offers_what_gambit_verify_and_the_verify_pages_use():
    import gambit.core.verify as verify

    for name in verify.__all__:
        value = getattr(verify, name)
        assert value.__module__.startswith("gambit.core._"), name
    loaded = _modules_after("import gambit.core.verify")
    assert {"gambit.core._verify", "gambit.core._verify_run", "gambit.core._calibration"} <= loaded


def test_missing_is_the_runtime_s_own_sentinel():
    from gambit.core._runtime import _MISSING

    assert gambit.core.MISSING is _MISSING
    assert inspect.signature(gambit.core.run_deck).parameters["context"].default is _MISSING
