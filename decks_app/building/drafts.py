"""Checking a draft in the Build editor before it is saved (`POST /build/validate`): the
deck's folder is copied, with the draft in place, into a mirror of the workspace, so that the
draft check says what the check after saving will say, paths included."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from decks_app.building.files import HIDDEN, _jailed, _root, problems
from decks_app.models import Workspace
from decks_app.workspaces.served import project_root
from gambit.core import ProjectRoot, check_deck_tree


def validate_draft(workspace: Workspace, deck_rel: str, file_rel: str, text: str) -> list[dict]:
    """Check the deck tree as it would be with `file_rel` holding `text` (not saved): the
    deck's folder is copied, with the draft in place, into a mirror of the workspace (see
    `_mirror`), so that the draft check says what the check after saving will say."""
    deck = _jailed(workspace, deck_rel)
    target = _jailed(workspace, file_rel)
    folder = deck.parent
    served = project_root(workspace)
    if not target.is_relative_to(folder):
        return problems(workspace, check_deck_tree(deck, project_root=served)[1])
    with tempfile.TemporaryDirectory(prefix="gambit-draft-") as made:
        scratch = Path(made).resolve()
        root = _root(workspace)
        mirrored_root = scratch / root.relative_to(root.anchor)
        copy = _mirror(root, folder, mirrored_root)
        (copy / target.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
        (copy / target.relative_to(folder)).write_text(text, encoding="utf-8")
        # The mirror stands for the workspace: what lies outside it is outside the jail, as
        # from the real folder.
        draft_root = ProjectRoot(served.path, [*served.allow, mirrored_root])
        _, diag = check_deck_tree(copy / deck.relative_to(folder), project_root=draft_root)
        return problems(workspace, diag, remap=(scratch, Path(root.anchor)))


def _mirror(root: Path, folder: Path, mirrored_root: Path) -> Path:
    """A scratch tree at `mirrored_root` (the workspace's own absolute path under a scratch
    folder) in which every relative path from the deck's folder reaches what it reaches from
    the real one: the folder is a copy, and in each folder above it, up to the root, every
    other entry is a link to the real one. A path that leaves the workspace leaves the
    mirror the same way, so its message names the same place once the scratch prefix is cut
    (before, the copy sat alone in a scratch folder, and `../other/schema.json` "did not
    exist" while typing, then loaded once saved)."""
    real, mirror = root, mirrored_root
    mirror.mkdir(parents=True)
    for part in folder.relative_to(root).parts:
        for entry in real.iterdir():
            if entry.name != part and entry.name not in HIDDEN:
                (mirror / entry.name).symlink_to(entry)
        real, mirror = real / part, mirror / part
        mirror.mkdir()
    shutil.copytree(
        folder, mirror, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*HIDDEN)
    )
    return mirror
