"""Importing a deck's Python files: compute decks, `execute` actions and `.py` schemas.

Each file is imported once per load, under a time limit, with its folder on `sys.path`
while it imports; a failure is a problem at the line that raised. With
`import_modules=False` nothing is imported: `DeckRunsCode` is raised instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from .load import Load

# A compute deck's module is imported with this time limit (seconds): a module whose import
# never ends must not hang `gambit check`, a run or the simulator's deck listing.
IMPORT_TIME_LIMIT = 10.0

# Files whose import is still running past the limit. Python cannot stop a thread, and its
# import lock for that module stays taken, so they are not imported again until it ends.
_STUCK_IMPORTS: dict[str, threading.Thread] = {}


class DeckRunsCode(Exception):
    """Loading this deck tree would import `file` (raised only with `import_modules=False`)."""

    def __init__(self, file: str):
        super().__init__(f"loading this deck imports {file}")
        self.file = file


class _ImportTimedOut(Exception):
    pass


def _exec_with_time_limit(loader: Any, module: Any, file: str) -> None:
    """`loader.exec_module(module)` in a daemon thread, waiting at most IMPORT_TIME_LIMIT."""
    stuck = _STUCK_IMPORTS.get(file)
    if stuck is not None:
        if stuck.is_alive():
            raise _ImportTimedOut
        del _STUCK_IMPORTS[file]
    outcome: list[BaseException] = []

    def target() -> None:
        try:
            loader.exec_module(module)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append(exc)

    thread = threading.Thread(target=target, name=f"import {Path(file).name}", daemon=True)
    thread.start()
    _join(thread, IMPORT_TIME_LIMIT)
    if thread.is_alive():
        _STUCK_IMPORTS[file] = thread
        raise _ImportTimedOut
    if outcome:
        raise outcome[0]


def _join(thread: threading.Thread, limit: float) -> None:
    """Wait for an import thread at most `limit` seconds. (A function of its own so that a
    test can stand in for the clock and check the limit applied, without waiting.)"""
    thread.join(limit)


def import_module(load: Load, file: str) -> Any | None:
    """The module `file` defines, or None (with a problem) if importing it failed."""
    if file in load.modules:
        return load.modules[file]
    if not load.import_modules:
        raise DeckRunsCode(file)
    digest = hashlib.sha256(file.encode()).hexdigest()[:16]
    name = f"gambit_deck_module_{digest}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        load.diag.error("cannot import this file as a Python module", file=file)
        load.modules[file] = None
        return None
    module = importlib.util.module_from_spec(spec)
    loaded: ModuleType | None = module
    folder = str(Path(file).parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        sys.modules[name] = module
        _exec_with_time_limit(spec.loader, module, file)
    except _ImportTimedOut:
        sys.modules.pop(name, None)
        load.diag.error(
            f"{Path(file).name} did not finish importing within {IMPORT_TIME_LIMIT:g} s",
            file=file,
            hint="do the slow work inside run(ctx), not when the module is imported",
        )
        loaded = None
    except BaseException as exc:  # a user module may raise anything, SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        sys.modules.pop(name, None)
        line = _traceback_line(exc, file)
        load.diag.error(
            f"importing the module failed: {type(exc).__name__}: {exc}",
            file=file,
            line=line,
            hint="fix the error in the module",
        )
        loaded = None
    finally:
        if added:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass
    load.modules[file] = loaded
    return loaded


def _traceback_line(exc: BaseException, file: str) -> int | None:
    if isinstance(exc, SyntaxError) and exc.lineno and (exc.filename or "") == file:
        return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == file:
            line = frame.lineno
    return line
