"""The workspace served (a deck folder on disk) and the root decks in it.

Paths from requests are always relative to the workspace root and jailed inside it: no
absolute paths, no `..`, no symlink that escapes. Every file a served deck references is
held to the workspace as well (`project_root`, given to every load; docs/simulator.md).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from decks_app.models import Workspace
from decks_app.workspaces.probe import served_project_root
from gambit.core import (
    IMPORT_TIME_LIMIT,
    DeckRunsCode,
    ProjectRoot,
    check_deck_tree,
    find_workspace_decks,
)

MAX_PATH_CHARS = 1024


class PathOutsideWorkspace(ValueError):
    pass


log = logging.getLogger(__name__)


def current_workspace() -> Workspace:
    root = str(Path(settings.GAMBIT_WORKSPACE).resolve())
    workspace, _ = Workspace.objects.get_or_create(root=root, defaults={"label": Path(root).name})
    return workspace


def project_root(workspace: Workspace | str | os.PathLike[str]) -> ProjectRoot:
    """The project root every load of a served deck gets: the workspace (with the folders
    GAMBIT_ALLOW_PATHS and its gambit.toml's `[project] allow_paths` allow)."""
    return served_project_root(workspace.root if isinstance(workspace, Workspace) else workspace)


def jailed_path(workspace: Workspace, relative: str) -> Path:
    """The absolute path of `relative` inside the workspace, or `PathOutsideWorkspace`."""
    root = Path(workspace.root).resolve()
    if not relative or "\x00" in relative or len(relative) > MAX_PATH_CHARS:
        raise PathOutsideWorkspace(relative[:200])
    if Path(relative).is_absolute() or any(part == ".." for part in Path(relative).parts):
        raise PathOutsideWorkspace(relative)
    try:
        target = (root / relative).resolve()
    except (OSError, RuntimeError):  # a name too long for the filesystem, a symlink loop
        raise PathOutsideWorkspace(relative[:200]) from None
    if target != root and root not in target.parents:
        raise PathOutsideWorkspace(relative)
    return target


@dataclass
class DeckInfo:
    path: str  # relative to the workspace root
    label: str
    kind: str  # "llm" | "compute" | "?"
    start_mode: str  # "user" | "assistant"
    models: list[str]
    error: str | None = None
    # The deck's own sampling parameters ([modelParams] temperature, top_p, max_tokens,
    # presence_penalty, frequency_penalty, reasoning), those set.
    sampling: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "label": self.label,
            "kind": self.kind,
            "startMode": self.start_mode,
            "models": self.models,
            "error": self.error,
        }


def deck_info(workspace: Workspace, entry: Path) -> DeckInfo:
    root = Path(workspace.root).resolve()
    rel = str(entry.resolve().relative_to(root))
    try:
        tree, diag = check_deck_tree(
            entry, import_modules=False, project_root=project_root(workspace)
        )
    except DeckRunsCode:
        return _probed_info(rel, entry, root)
    if tree is None:
        message = "; ".join(p.message for p in diag.errors) or "could not load"
        return DeckInfo(rel, rel, "?", "user", [], error=message)
    deck = tree.root
    models = list(deck.model_params.models or []) if deck.model_params else []
    return DeckInfo(
        path=rel,
        label=deck.label or Path(rel).parent.name or rel,
        kind=deck.kind,
        start_mode=deck.start_mode or "user",
        models=models,
        error="; ".join(p.message for p in diag.errors) or None,
        sampling=_sampling(deck.model_params),
    )


def _sampling(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    keys = ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty")
    values = {key: getattr(params, key) for key in (*keys, "reasoning")}
    return {key: value for key, value in values.items() if value is not None}


# ---------------------------------------------------------------- decks that run Python

# Decks whose load imports Python are loaded by `decks_app.workspaces.probe` in a child process:
# listing decks must not run a deck's code in the web process, where a module that hangs,
# exits or crashes at import would take the server down. Results are kept until a file of
# the deck's folder (or a file outside it that the load read) changes.
_probed: dict[str, tuple[tuple, list[str], DeckInfo]] = {}
_probe_lock = threading.Lock()
MAX_KEY_FILES = 2000


def stat_key(entry: Path, files: list[str]) -> tuple:
    """What changes when a deck changes: size and mtime of each file of its folder and of
    `files` (files the load read elsewhere)."""
    paths: set[str] = set(files)
    folder = entry.resolve().parent
    for count, found in enumerate(folder.rglob("*")):
        if count >= MAX_KEY_FILES:
            break
        paths.add(str(found))
    key: list[tuple[str, int | None, int | None]] = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
            key.append((path, st.st_mtime_ns, st.st_size))
        except OSError:
            key.append((path, None, None))
    return tuple(key)


def _probed_info(rel: str, entry: Path, workspace_root: Path) -> DeckInfo:
    name = str(entry.resolve())
    cached = _probed.get(name)
    if cached is not None and stat_key(entry, cached[1]) == cached[0]:
        return cached[2]
    files = [name]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "decks_app.workspaces.probe", name, str(workspace_root)],
            capture_output=True,
            text=True,
            timeout=IMPORT_TIME_LIMIT + 20,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(done.stdout) if done.stdout.startswith("{") else None
        if data is None:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            info = DeckInfo(rel, rel, "?", "user", [], error=f"loading the deck failed: {last}")
        else:
            files = [str(f) for f in data.get("files") or [name]]
            info = DeckInfo(
                path=rel,
                label=data.get("label") or Path(rel).parent.name or rel,
                kind=str(data.get("kind") or "?"),
                start_mode=str(data.get("startMode") or "user"),
                models=[str(m) for m in data.get("models") or []],
                error="; ".join(data.get("errors") or []) or None,
            )
    except subprocess.TimeoutExpired:
        info = DeckInfo(
            rel, rel, "?", "user", [],
            error=f"loading the deck did not finish within {IMPORT_TIME_LIMIT + 20:g} s",
        )  # fmt: skip
    with _probe_lock:
        _probed[name] = (stat_key(entry, files), files, info)
    return info


_warned_links: set[str] = set()


def workspace_decks(root: Path) -> list[Path]:
    """The workspace's root decks, leaving out any reached through a link that points
    outside the workspace (warned about once: decks run code, so the jail holds)."""
    resolved_root = root.resolve()
    inside = []
    for entry in find_workspace_decks(root):
        target = entry.resolve()
        if target.is_relative_to(resolved_root):
            inside.append(entry)
        elif str(entry) not in _warned_links:
            _warned_links.add(str(entry))
            log.warning(
                "skipped %s: it links to %s, outside the workspace %s",
                entry.parent.name,
                target.parent,
                resolved_root,
            )
    return inside


def list_decks(workspace: Workspace) -> list[DeckInfo]:
    root = Path(workspace.root)
    if not root.is_dir():
        return []
    entries = workspace_decks(root)
    if len(entries) < 2:
        return [deck_info(workspace, entry) for entry in entries]
    # Decks that run Python load in child processes: list them side by side.
    with ThreadPoolExecutor(max_workers=min(4, len(entries))) as pool:
        return list(pool.map(lambda entry: deck_info(workspace, entry), entries))


def is_listed_deck(workspace: Workspace, relative: str) -> bool:
    """Whether `relative` is one of the workspace's root decks, found without loading any
    (so choosing a deck never imports a file that is not a deck of the listing)."""
    root = Path(workspace.root).resolve()
    try:
        target = jailed_path(workspace, relative)
    except PathOutsideWorkspace:
        return False
    return any(entry.resolve() == target for entry in workspace_decks(root))


def find_deck(workspace: Workspace, relative: str) -> DeckInfo | None:
    try:
        path = jailed_path(workspace, relative)
    except PathOutsideWorkspace:
        return None
    if not path.is_file():
        return None
    return deck_info(workspace, path)
