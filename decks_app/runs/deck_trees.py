"""Deck trees as the worker runs them: loaded once per process, kept until a file changes.

Loading a deck tree validates every schema (jsonschema's `check_schema` was most of a
one-turn run's CPU), so a worker that runs the same deck hundreds of times loads it once.
A tree is kept until a file of the deck's folder, or a file the load read outside it,
changes (`workspaces.stat_key`). Trees are only read by the runtime, so concurrent runs
share one, and runs that find the same deck missing at once wait for one load of it (a new
worker's slots all start on the same deck: each validated it, 8 loads where 1 does).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from decks_app.workspaces.served import project_root, stat_key
from gambit.core import DeckTree, ProjectRoot, deck_warning, load_deck_tree
from gambit.env import env_flag

_trees: dict[str, tuple[tuple, list[str], DeckTree]] = {}
_lock = threading.Lock()
_loading: dict[str, threading.Lock] = {}  # one per tree name: its loads happen one at a time
_warned: set[str] = set()
log = logging.getLogger("decks_app.decks")


def strict_mode() -> bool:
    """GAMBIT_STRICT=1: deprecated deck forms are errors in the simulator's runs, as they are
    in the CLI (gambit.core reads no environment: each load here is told)."""
    return env_flag(os.environ, "GAMBIT_STRICT")


def load(
    path: str | Path, role: Any = "root", *, root: str | Path | ProjectRoot | None = None
) -> DeckTree:
    """The deck tree at `path`, loaded as `role` with its files inside `root` (the served
    workspace, a folder or a `ProjectRoot`; None: the engine's default); raises
    `DeckLoadError` like `load_deck_tree`."""
    entry = Path(path)
    strict = strict_mode()
    jail = root if isinstance(root, ProjectRoot) or root is None else project_root(root)
    name = f"{role}:{'strict:' if strict else ''}{entry.resolve()}:{jail!r}"
    hit = _fresh(name, entry)
    if hit is not None:
        return hit
    with _lock:
        loading = _loading.setdefault(name, threading.Lock())
    with loading:
        hit = _fresh(name, entry)  # loaded by the thread this one waited for
        if hit is not None:
            return hit
        tree = load_deck_tree(entry, role=role, strict=strict, project_root=jail)
        files = sorted({str(entry.resolve()), *(e.path for e in tree.entries)})
        with _lock:
            _trees[name] = (stat_key(entry, files), files, tree)
        return tree


def _fresh(name: str, entry: Path) -> DeckTree | None:
    """The tree kept under `name`, if no file of it changed since it was loaded."""
    hit = _trees.get(name)
    if hit is not None and stat_key(entry, hit[1]) == hit[0]:
        return hit[2]
    return None


def report_warning(event: Mapping[str, Any]) -> None:
    """A run's deck warning (every run traces the warnings of the decks it loads, those
    loaded while it runs too) on the server's stderr, through the `decks_app` logger, once
    per process, as the CLI prints them. The session page shows it in the run's trace."""
    line = deck_warning(event)
    if line is None:
        return
    with _lock:
        if line in _warned:
            return
        _warned.add(line)
    log.warning("warning: %s", line)
