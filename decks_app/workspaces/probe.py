"""Load one deck tree in a child process and print what the deck list shows of it.

    python -m decks_app.workspaces.probe PATH WORKSPACE

The simulator's web process never imports a deck's Python (a compute deck, an `execute`
action, a `.py` schema) to list decks: a module that hangs, exits or crashes at import must
not take the server down. It runs this instead (decks_app.workspaces). Only
gambit.core is imported here, no Django. Prints one JSON object: label, kind, startMode,
models, errors, and `files`, the files the load read (the parent's cache key).

Every file the deck references must lie in the served WORKSPACE (`served_project_root`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from gambit.env import env_flag

ALLOW_PATHS_ENV = "GAMBIT_ALLOW_PATHS"


def served_project_root(workspace_root: str | os.PathLike[str]) -> Any:
    """Where the files of the served decks must lie (docs/simulator.md): the workspace, and
    the folders GAMBIT_ALLOW_PATHS lists (separated by `os.pathsep`, relative ones against
    the workspace); the loader adds the workspace gambit.toml's `[project] allow_paths`."""
    from gambit.core import ProjectRoot

    entries = os.environ.get(ALLOW_PATHS_ENV, "").split(os.pathsep)
    return ProjectRoot(Path(workspace_root).resolve(), [e.strip() for e in entries if e.strip()])


def probe(path: str, workspace_root: str) -> dict:
    from gambit.core import check_deck_tree

    # GAMBIT_STRICT=1: the list shows a deprecated deck as not loading, as its runs would
    tree, diag = check_deck_tree(
        path,
        strict=env_flag(os.environ, "GAMBIT_STRICT"),
        project_root=served_project_root(workspace_root),
    )
    files = {str(Path(path).resolve())}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and name.startswith("gambit_deck_module_"):
            files.add(file)
    out: dict = {"errors": [p.message for p in diag.errors]}
    if tree is None:
        out.update(label=None, kind="?", startMode="user", models=[])
    else:
        deck = tree.root
        files.update(entry.path for entry in tree.entries)
        models = list(deck.model_params.models or []) if deck.model_params else []
        out.update(
            label=deck.label, kind=deck.kind, startMode=deck.start_mode or "user", models=models
        )
    out["files"] = sorted(files)
    return out


def main() -> None:
    result = probe(sys.argv[1], sys.argv[2])
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    # A module whose import never ended is still running in a thread: leave without it.
    os._exit(0)


if __name__ == "__main__":
    main()
