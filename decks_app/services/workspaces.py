"""The workspace served (a deck folder on disk) and the root decks in it.

Paths from requests are always relative to the workspace root and jailed inside it: no
absolute paths, no `..`, no symlink that escapes (DESIGN §8).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from decks_app.models import Workspace
from gambit.core import check_deck_tree, find_workspace_decks

MAX_PATH_CHARS = 1024


class PathOutsideWorkspace(ValueError):
    pass


log = logging.getLogger(__name__)


def current_workspace() -> Workspace:
    root = str(Path(settings.GAMBIT_WORKSPACE).resolve())
    workspace, _ = Workspace.objects.get_or_create(root=root, defaults={"label": Path(root).name})
    return workspace


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
    tree, diag = check_deck_tree(entry)
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
    )


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
    return [deck_info(workspace, entry) for entry in workspace_decks(root)]


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
