"""The Build assistant: a bundled deck, in a chat beside the Build tab's editor, that reads a
deck's INTENT.md and policy/ and edits its files through the built-in tools.

It runs like any session (a `Run` of kind "assistant" in a session of origin "assistant"
whose `deck_path` is the deck being built), so it streams and is traced. What it may touch is
what the user grants, as session permissions: read, or read and write, inside the deck's
folder only; `exec` and the network are never granted. Every run snapshots the deck's files
first (its params' `before`) and after (its result's `after`), so each change shows as a diff
and can be undone.

It writes through its own tool, `edit_file` (`edit_tool`, the deck's external tool), not the
built-in `apply_patch`: the edit is the same, but a Python file (or anything else Python's
import system loads) is never written. The Build tab re-checks a deck whenever its files
change, and checking imports the deck's Python: a grant to write must not become a grant to
run code (docs/simulator.md, "The Build assistant").
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Awaitable, Callable
from importlib.machinery import all_suffixes
from pathlib import Path
from typing import Any, Literal

from django.db import transaction

from decks_app.models import Run, Session, Workspace
from decks_app.runs.registry import Payload, TurnParams
from decks_app.sessions import actions as session_service
from decks_app.workspaces.served import find_deck, jailed_path
from gambit.core import PermissionSet, call_builtin_tool, grants

ASSISTANT_DECK = Path(__file__).resolve().parent / "assistant_deck" / "PROMPT.md"
MAX_SNAPSHOT_BYTES = 2_000_000
GRANTS = ("read", "write")
EDIT_TOOL = "edit_file"  # the assistant deck's [[tools]] entry
PROJECT_SETTINGS = "gambit.toml"  # providers, and the folders decks may read beside the root
# What Python's import system loads (sources, bytecode, extension modules) and .pth files.
CODE_SUFFIXES = (*all_suffixes(), ".pyw", ".pyd", ".pth")


class AssistantError(ValueError):
    pass


class AssistantParams(TurnParams):
    """An assistant turn: the user's message, what it may touch (`grant`), and the deck
    folder's text files when it was sent (`before`, what an undo restores)."""

    grant: Literal["read", "write"] = "read"
    before: dict[str, str] = {}


class AssistantResult(Payload):
    """The deck folder's text files after the turn, and whether its change was undone since
    (the change is the run's result; undoing it marks the result, it is not a new run)."""

    after: dict[str, str] = {}
    undone: bool = False


def deck_folder(workspace: Workspace, deck_rel: str) -> Path:
    return jailed_path(workspace, deck_rel).parent


def permissions(workspace: Workspace, deck_rel: str, grant: str) -> PermissionSet:
    """The session permissions of an assistant run: read inside the deck's folder, whatever
    the grant (a write grant is carried out by `edit_tool`)."""
    folder = deck_folder(workspace, deck_rel)
    return grants(folder, read=[str(folder)])


def is_code(path: Path) -> bool:
    """Whether Python could import `path` (or it is bytecode under __pycache__)."""
    name = path.name.lower()
    return name.endswith(CODE_SUFFIXES) or "__pycache__" in path.parts


def edit_tool(
    workspace: Workspace, deck_rel: str, grant: str
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """The `on_tool` handler of an assistant run: `edit_file` is the built-in `apply_patch`
    on the deck's folder when the user granted write, refused for a Python file and for
    gambit.toml (named so, or a link to one)."""
    folder = deck_folder(workspace, deck_rel)
    write = grants(folder, read=[str(folder)], write=[str(folder)])

    async def on_tool(request: dict[str, Any]) -> dict[str, Any]:
        name = request.get("name")
        if name != EDIT_TOOL:
            return _refused(404, "unknown_tool", f"{name} is not a tool of the Build assistant")
        if grant != "write":
            return _refused(403, "permission_denied", f"{EDIT_TOOL} denied: the grant is read only")
        args = request.get("args")
        raw = args.get("path") if isinstance(args, dict) else None
        if isinstance(raw, str) and "\x00" not in raw:
            target = Path(os.path.normpath(folder / raw))
            real = Path(os.path.realpath(target))
            if is_code(target) or is_code(real):
                return _refused(
                    403,
                    "permission_denied",
                    f"{EDIT_TOOL} denied for {raw}: it is Python code, which checking the deck "
                    "runs; the Build assistant never writes code (show it to the engineer)",
                )
            if PROJECT_SETTINGS in (target.name, real.name):
                # [project] allow_paths there would widen what every deck may read.
                return _refused(
                    403,
                    "permission_denied",
                    f"{EDIT_TOOL} denied for {raw}: the Build assistant never changes the "
                    "project's settings",
                )
        return await call_builtin_tool("apply_patch", args, write)

    return on_tool


def _refused(status: int, code: str, message: str) -> dict[str, Any]:
    return {"status": status, "code": code, "message": message}


def snapshot(folder: Path) -> dict[str, str]:
    """The deck folder's text files (what an undo restores). A link is not followed out
    of the folder: a link to /proc/self/environ or to the simulator's .gambit would copy
    what it points at into the run's record and its diff."""
    files: dict[str, str] = {}
    total = 0
    real_folder = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or any(p.startswith(".") for p in path.relative_to(folder).parts):
            continue
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(real_folder) or any(
                p.startswith(".") for p in target.relative_to(real_folder).parts
            ):
                continue  # out of the folder, or into a hidden part of it (.gambit)
        data = path.read_bytes()
        total += len(data)
        if total > MAX_SNAPSHOT_BYTES:
            break
        try:
            files[str(path.relative_to(folder))] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return files


def send(workspace: Workspace, deck_rel: str, message: str, grant: str, model: str = "") -> Run:
    """Queue one assistant turn about the deck (a new session per deck, continued after)."""
    message = (message or "").strip()
    if not message:
        raise AssistantError("write a message for the assistant")
    if len(message) > 20_000:
        raise AssistantError("the message is longer than 20000 characters")
    if grant not in GRANTS:
        raise AssistantError("grant read, or read and write")
    model = (model or "").strip()
    if len(model) > 200:
        raise AssistantError("the model name is too long")
    deck = find_deck(workspace, deck_rel)
    if deck is None:
        raise AssistantError(f"no deck at {deck_rel!r}")
    folder = deck_folder(workspace, deck.path)
    with transaction.atomic():
        session = (
            Session.objects.select_for_update()
            .filter(workspace=workspace, origin="assistant", deck_path=deck.path)
            .order_by("-created_at")
            .first()
        )
        if session is None:
            session = Session.objects.create(
                workspace=workspace,
                deck_path=deck.path,
                deck_label=f"Build assistant: {deck.label}"[:200],
                origin="assistant",
                format="responses",
                meta={"deckPath": deck.path, "assistant": True},
            )
        if session.runs.filter(status__in=Run.ACTIVE).exists():
            raise AssistantError("the assistant is still working on the last message")
        if session.model != model:  # any model: a provider's, or a bridge (codex-cli/default)
            session.model = model
            session.save(update_fields=["model", "updated_at"])
        try:
            run = session_service.create_run(
                session=session,
                kind="assistant",
                params=AssistantParams(
                    message=message,
                    grant="write" if grant == "write" else "read",
                    before=snapshot(folder),
                ),
            )
        except session_service.SessionBusy:
            raise AssistantError("the assistant is still working on the last message") from None
    return run


def changes(workspace: Workspace, run: Run) -> list[dict[str, Any]]:
    """What a finished assistant run changed in the deck's folder, as unified diffs."""
    before = run.read_params(AssistantParams).before
    result = run.read_result(AssistantResult)
    after = result.after if result else {}
    out = []
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        diff = "".join(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                fromfile=f"a/{rel}",
                tofile=f"b/{rel}",
            )
        )
        out.append({"path": rel, "diff": diff, "created": old is None, "deleted": new is None})
    return out


def undo(workspace: Workspace, run: Run) -> list[str]:
    """Put the files a run changed back as they were before it (only if untouched since)."""
    before = run.read_params(AssistantParams).before
    result = run.read_result(AssistantResult) or AssistantResult()
    if result.undone:
        raise AssistantError("this change was already undone")
    folder = deck_folder(workspace, run.session.deck_path)
    current = snapshot(folder)
    restored = []
    for change in changes(workspace, run):
        rel = change["path"]
        if current.get(rel) != result.after.get(rel):
            raise AssistantError(f"{rel} changed again since; undo it by hand")
    for change in changes(workspace, run):
        rel = change["path"]
        path = folder / rel
        old = before.get(rel)
        if old is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(old, encoding="utf-8")
        restored.append(rel)
    result.undone = True
    Run.objects.filter(pk=run.pk).update(result=result.to_json())
    return restored


def assistant_session(workspace: Workspace, deck_rel: str) -> Session | None:
    return (
        Session.objects.filter(workspace=workspace, origin="assistant", deck_path=deck_rel)
        .order_by("-created_at")
        .first()
    )
