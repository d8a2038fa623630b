"""The project root the CLI gives the loader: where every file a deck references must lie.

For a deck named on the command line (docs/decks.md, "Trust and limits"):

1. the nearest folder at or above it holding gambit.toml, else holding a repository or a
   package manifest (`.git`, `pyproject.toml`, `package.json`, `deno.json`...);
2. else the current directory, when the deck lies inside it and it is neither / nor the home
   folder (a folder that holds everything would jail nothing);
3. else the folder holding the deck's folder (the engine's default).

Folders allowed besides it: `[project] allow_paths` in its gambit.toml (read by the loader),
each `--allow-path` and the entries of GAMBIT_ALLOW_PATHS (separated by `os.pathsep`),
relative ones against the current directory. /proc, /sys, /dev and .gambit folders are never read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gambit.core import ProjectRoot, default_project_root, project_top

ALLOW_PATHS_ENV = "GAMBIT_ALLOW_PATHS"
_META_KEY = "gambit.allow_paths"  # where --allow-path keeps its values on the click context


def allowed_paths() -> list[Path]:
    """The running command's --allow-path values, then GAMBIT_ALLOW_PATHS entries, absolute."""
    ctx = click.get_current_context(silent=True)
    given: list[Path] = list(ctx.meta.get(_META_KEY, ())) if ctx is not None else []
    from_env = [e for e in os.environ.get(ALLOW_PATHS_ENV, "").split(os.pathsep) if e.strip()]
    return [*given, *(Path(e.strip()).absolute() for e in from_env)]


def project_root_for(deck: str | os.PathLike[str]) -> ProjectRoot:
    """The project root of a deck named on the command line, with the allowed folders."""
    root = project_top(deck)
    if root is None:
        root = default_project_root(deck)
        cwd = Path.cwd().resolve()
        try:
            home: Path | None = Path.home().resolve()
        except RuntimeError:  # no home folder known
            home = None
        if cwd not in (home, Path(cwd.anchor)) and (root == cwd or cwd in root.parents):
            root = cwd
    return ProjectRoot(root, allowed_paths())


def _remember(ctx: click.Context, param: click.Parameter, values: tuple[Path, ...]) -> None:
    ctx.meta[_META_KEY] = [Path(v).absolute() for v in values]


ALLOW_PATH_HELP = (
    "Also let decks read files in this folder, outside their project root (repeatable; also "
    f"{ALLOW_PATHS_ENV}, or [project] allow_paths in gambit.toml). /proc, /sys and /dev are "
    "never read."
)


def allow_path_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--allow-path DIR`, for every command that loads decks."""
    return click.option(
        "--allow-path",
        "allow_paths",
        multiple=True,
        type=click.Path(path_type=Path),
        expose_value=False,
        callback=_remember,
        help=ALLOW_PATH_HELP,
    )(func)
