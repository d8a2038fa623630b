"""Importing a deck's Python files: compute decks, `execute` actions and `.py` schemas.

Each file is imported once per load, under a time limit, with its folder on `sys.path`
while it imports; a failure is a problem at the line that raised (whatever it raised,
`KeyboardInterrupt` and `SystemExit` included). With `import_modules=False` nothing is
imported: `DeckRunsCode` is raised instead.

Decks do not share modules: a file is imported under a name unique to its path
(`gambit_deck_module_<hash>`), and the modules it imports from its own folder (a sibling
`helper.py`) are dropped from `sys.modules` once it has imported, so the next deck's
`import helper` finds its own. Deck imports take turns (`_IMPORT_LOCK`): two decks'
folders are never on `sys.path` at once. Deck folders get no `__pycache__`: their modules
are compiled from source each time, by a loader that neither reads nor writes bytecode
(`_SourceOnlyLoader`), and only `.py` sources are imported from them (no compiled `.pyc`
or extension module a deck folder might hold).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import traceback
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader
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


MODULE_PREFIX = "gambit_deck_module_"
# One deck import at a time: a deck's folder is on sys.path only while it imports.
_IMPORT_LOCK = threading.Lock()


class _SourceOnlyLoader(SourceFileLoader):
    """Compiles a deck's module from its source every time: no `__pycache__` is written into
    a deck's folder, and none found there is trusted. (`SourceLoader.get_code` skips the
    bytecode cache, reading and writing, when the source's stats are unavailable.)"""

    def path_stats(self, path: str) -> Any:
        raise OSError("deck modules are compiled from source")

    def exec_module(self, module: ModuleType) -> None:
        _LOADED.add(module.__name__)  # before it runs: a module that fails is forgotten too
        super().exec_module(module)


# Names of the modules `_SourceOnlyLoader` has loaded and `_forget_deck_siblings` has not
# dropped yet: the few to look at, instead of all of sys.modules (thousands in a server,
# where a walk of them on every deck import was a tenth of a page load's time).
_LOADED: set[str] = set()


class _DeckFolderFinders:
    """While a deck imports, its folder and the package folders inside it are searched by
    finders that load `.py` sources only, through `_SourceOnlyLoader` (a path hook, first
    among `sys.path_hooks`, that claims nothing outside the importing deck's folder)."""

    def __init__(self) -> None:
        self.folder: str | None = None
        self.created: list[str] = []

    def __call__(self, path: str) -> FileFinder:
        folder = self.folder
        real = os.path.realpath(path or ".")
        if folder is None or not (real == folder or real.startswith(folder + os.sep)):
            raise ImportError("not a deck folder")
        if path in sys.path and real != folder:
            raise ImportError("a folder of its own on sys.path (a virtualenv inside the deck)")
        self.created.append(path)
        return FileFinder(path, (_SourceOnlyLoader, SOURCE_SUFFIXES))

    def start(self, folder: str) -> None:
        self.folder = os.path.realpath(folder)
        self.created = []
        if self not in sys.path_hooks:
            sys.path_hooks.insert(0, self)
        # Finders cached for the folder (or packages in it) by an earlier import are replaced.
        # (Deck files are resolved paths, so their folders are cached under these names.)
        inside = folder + os.sep
        for cached in list(sys.path_importer_cache):
            if cached == folder or (cached.startswith(inside) and cached not in sys.path):
                del sys.path_importer_cache[cached]
        sys.path_importer_cache[folder] = self(folder)

    def stop(self) -> None:
        for path in self.created:
            sys.path_importer_cache.pop(path, None)
        self.folder = None
        self.created = []


_FINDERS = _DeckFolderFinders()


def _forget_deck_siblings() -> None:
    """Drop from sys.modules what deck modules imported from their folders under plain names
    (a `helper`), so that no deck gets another's. The modules that imported them keep them."""
    for name in list(_LOADED):
        _LOADED.discard(name)
        if name.startswith(MODULE_PREFIX):
            continue
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if isinstance(getattr(spec, "loader", None), _SourceOnlyLoader):
            sys.modules.pop(name, None)


class DeckRunsCode(Exception):
    """Loading this deck tree would import `file` (raised only with `import_modules=False`)."""

    def __init__(self, file: str):
        super().__init__(f"loading this deck imports {file}")
        self.file = file


class _ImportTimedOut(Exception):
    pass


class _ModuleRaised(Exception):
    """What the module itself raised while importing (in the import thread), as opposed to
    a Ctrl-C the user pressed while waiting for it, which stops the command."""

    def __init__(self, raised: BaseException):
        super().__init__(raised)
        self.raised = raised


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
        raise _ModuleRaised(outcome[0])


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
    name = f"{MODULE_PREFIX}{digest}"
    spec = importlib.util.spec_from_file_location(name, file, loader=_SourceOnlyLoader(name, file))
    if spec is None or spec.loader is None:
        load.diag.error("cannot import this file as a Python module", file=file)
        load.modules[file] = None
        return None
    module = importlib.util.module_from_spec(spec)
    loaded: ModuleType | None = module
    folder = str(Path(file).parent)
    with _IMPORT_LOCK:
        _forget_deck_siblings()  # left by an import that outlived its time limit
        _FINDERS.start(folder)
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
        except _ModuleRaised as failure:  # anything, KeyboardInterrupt and SystemExit included
            exc = failure.raised
            sys.modules.pop(name, None)
            load.diag.error(
                f"importing the module failed: {type(exc).__name__}: {exc}",
                file=file,
                line=_traceback_line(exc, file),
                hint="fix the error in the module",
            )
            loaded = None
        finally:
            if added:
                try:
                    sys.path.remove(folder)
                except ValueError:
                    pass
            _FINDERS.stop()
            _forget_deck_siblings()
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
