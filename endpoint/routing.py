"""Where a `/v1/responses` call goes: the deck or provider model it names, and the session it
continues (docs/endpoint.md, "Sessions").

`model` names a deck of the served workspace (`deck/<folder>`, listed by `GET /v1/models`)
or a provider model, proxied through the router. A call continues the session of its
`previous_response_id`, or the one a `Gambit-Session` header (or `user`) routes it into
(`store.route_of`); otherwise it starts a new session. `resolve` finds all of it before the
first byte, and answers the API's errors (404 for an unknown model or session, 409 while the
conversation is still running, 400 for an `item_reference` that names no stored item, for
images or files the model's provider does not take, and for parameters a deck cannot
honour).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from django.conf import settings

from decks_app.models import Run, Session, Workspace
from decks_app.runs import providers
from decks_app.workspaces.served import DeckInfo, deck_info, list_decks, workspace_decks
from endpoint import store as response_store
from endpoint.schemas import (
    ApiError,
    CreateResponseBody,
    Item,
    ItemReferenceParam,
    MessageParam,
    has_media,
)
from gambit.core import new_id

DECK_PREFIX = "deck/"


# ---------------------------------------------------------------- models


def deck_name(relative: str) -> str:
    """`support/PROMPT.md` -> `support`; `hello/deck.py` -> `hello`; `x.deck.md` -> `x`."""
    path = Path(relative)
    if path.name in ("PROMPT.md", "deck.py"):
        return str(path.parent) if str(path.parent) != "." else path.stem
    return str(path.with_suffix("")).removesuffix(".deck")


def served_decks(workspace: Workspace) -> dict[str, DeckInfo]:
    return {DECK_PREFIX + deck_name(d.path): d for d in list_decks(workspace) if not d.error}


def find_served_deck(workspace: Workspace, model: str) -> DeckInfo | None:
    """The deck of the workspace listing (what `GET /v1/models` lists) that `deck/<name>`
    names, loading only that deck; one that does not load comes back with its `error` (the
    caller says so). Anything else is None, as an unknown name is: an action deck of a listed
    deck (run as a root, it would escape its parent's narrowing), a folder the listing skips
    (`.hidden/`, `node_modules/`: their Python would be imported), a plain Markdown file."""
    name = model.removeprefix(DECK_PREFIX)
    root = Path(workspace.root)
    if not name or not root.is_dir():
        return None
    resolved_root = root.resolve()
    for entry in workspace_decks(root):
        # Named as `deck_info` (so the listing) names it: its path without links.
        if deck_name(str(entry.resolve().relative_to(resolved_root))) == name:
            return deck_info(workspace, entry)
    return None


def workspace_relative(workspace: Workspace, message: str) -> str:
    """A message for the API client: paths inside the workspace relative to it (the server's
    own paths are none of the client's business)."""
    root = str(Path(workspace.root).resolve())
    return message.replace(root + os.sep, "").replace(root, ".")


def served_workspace() -> Workspace:
    """The served workspace by its root alone, without reading its row (unsaved; a call
    resolves it to the row when it is recorded, `current_workspace`)."""
    return Workspace(root=str(Path(settings.GAMBIT_WORKSPACE).resolve()))


def list_models(workspace: Workspace) -> dict[str, Any]:
    created = int(workspace.created_at.timestamp()) if workspace.created_at else 0
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "gambit",
                "label": d.label,
            }
            for name, d in sorted(served_decks(workspace).items())
        ],
    }


# ---------------------------------------------------------------- the call's target


@dataclasses.dataclass
class Target:
    """What a call runs and where it is recorded: the deck (None for a provider model), the
    session (its id is known before the first byte: the `Gambit-Session-Id` header) and
    whether that session exists already, and the previous response's run, if any."""

    deck: DeckInfo | None = None
    session_id: str = dataclasses.field(default_factory=lambda: new_id("session"))
    session_exists: bool = False
    previous: Run | None = None
    # The stored items the request's `item_reference`s name, by id.
    references: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def reads_tables(
    body: CreateResponseBody, items: list[Item], route: tuple[str, str] | None
) -> bool:
    """Whether `resolve` touches the database or deck files (then it runs in the request's
    sync thread); for a provider model without `previous_response_id`, routing or item
    references it reads neither."""
    return (
        bool(body.previous_response_id)
        or route is not None
        or body.model.startswith(DECK_PREFIX)
        or any(isinstance(item, ItemReferenceParam) for item in items)
    )


def run_mode() -> str:
    """`chat` when the server runs in chat mode (`GAMBIT_CHAT_FALLBACK=1`, as the CLI's
    runs do), else `responses`."""
    return "chat" if getattr(settings, "GAMBIT_CHAT_FALLBACK", False) else "responses"


def busy(body: CreateResponseBody, route: tuple[str, str] | None) -> ApiError:
    """The 409 of a conversation that is still running."""
    return ApiError(
        409,
        "the conversation is still running (one call at a time per session)",
        code="conversation_busy",
        param="previous_response_id"
        if body.previous_response_id
        else (route[1] if route is not None else None),
    )


def resolve(
    workspace: Workspace,
    body: CreateResponseBody,
    *,
    owner: str | None,
    route: tuple[str, str] | None,
    items: list[Item] | None = None,
) -> Target:
    """The deck (or provider model), the previous response's run, the routed session and
    the items the input references."""
    items = items or []
    model = body.model
    target = Target()
    if body.previous_response_id:
        target.previous = response_store.find_call(
            body.previous_response_id,
            owner,
            code="previous_response_not_found",
            param="previous_response_id",
            purpose="; it cannot be continued",
        )
        target.session_id, target.session_exists = target.previous.session_id, True
    if route is not None:
        _route(target, workspace, model, owner, route)
    if (
        target.session_exists
        and Run.objects.filter(session_id=target.session_id, status__in=Run.ACTIVE).exists()
    ):
        raise busy(body, route)
    if model.startswith(DECK_PREFIX):
        target.deck = find_served_deck(workspace, model)
        if target.deck is None:
            raise ApiError(
                404,
                f"model {model!r} is not a deck of this workspace (GET /v1/models lists them)",
                code="model_not_found",
                param="model",
            )
        if target.deck.error:
            # It is there but does not load (before: "not a deck of this workspace").
            raise ApiError(
                500,
                f"the deck {target.deck.path} does not load: "
                f"{workspace_relative(workspace, target.deck.error)} (fix it; gambit check "
                "shows every problem)",
                type="server_error",
                code="deck_error",
            )
        if body.max_tool_calls is not None:
            raise ApiError(
                400,
                "max_tool_calls: a deck's own tools and actions run inside the deck and cannot "
                "be held to a count; it is passed on for a provider model only",
                code="unsupported_value",
                param="max_tool_calls",
            )
    else:
        router = providers.make_router(workspace.root)
        reason = router.unavailable_reason(model, probe=False)
        if reason is not None:
            raise ApiError(
                404,
                f"model {model!r} is not available: {reason}",
                code="model_not_found",
                param="model",
            )
    if has_media(items):
        _check_media(workspace, target, model, items)
    references = [item.id for item in items if isinstance(item, ItemReferenceParam)]
    if references:
        session = target.session_id if target.session_exists else None
        target.references = response_store.referenced_items(references, owner, session)
        for index, item in enumerate(items):
            if isinstance(item, ItemReferenceParam) and item.id not in target.references:
                raise ApiError(
                    400,
                    f"input[{index}]: item_reference {item.id[:100]!r} names no input or output "
                    "item of a stored response of this key",
                    code="item_not_found",
                    param=f"input[{index}].id",
                )
    return target


def _check_media(workspace: Workspace, target: Target, model: str, items: list[Item]) -> None:
    """Images and files reach the model when its provider passes them on (over the
    Responses API); otherwise the request is refused, naming the first such part."""
    router = providers.make_router(workspace.root)
    if target.deck is not None:
        _, used, _ = providers.effective_model("", target.deck.models, router)
    else:
        used = model
    accepted = router.input_content(used) if used and run_mode() == "responses" else frozenset()
    if target.deck is not None and target.deck.kind == "compute":
        accepted, used = frozenset(), ""  # a compute deck's input is the message's text
    for index, item in enumerate(items):
        if not isinstance(item, MessageParam) or isinstance(item.content, str):
            continue
        for number, part in enumerate(item.content):
            if part.type in ("input_image", "input_file") and part.type not in accepted:
                whose = f"the deck's model {used!r}" if target.deck is not None else repr(model)
                raise ApiError(
                    400,
                    f"input[{index}].content[{number}]: {part.type} is not supported by "
                    f"{whose or 'the deck (it has no model)'}: its provider takes text only "
                    'here (docs/endpoint.md, "Images and files")',
                    code="unsupported_content",
                    param=f"input[{index}].content[{number}].type",
                )


def _route(
    target: Target,
    workspace: Workspace,
    model: str,
    owner: str | None,
    route: tuple[str, str],
) -> None:
    """The session a `Gambit-Session` header (or `user`) names: a session id continues
    that API session (of this key and model); a name, the session of this key, model
    and name (created by the first call)."""
    value, param = route
    if param == response_store.SESSION_HEADER and response_store.is_session_id(value):
        session = Session.objects.filter(pk=value, origin="api").first()
        if session is None or not response_store.may_use(session, owner):
            raise ApiError(
                404,
                f"no API session {value!r} ({param} holds a session name or the id of a "
                "session made through this endpoint with this key)",
                code="session_not_found",
                param=param,
            )
        used = ((session.meta or {}).get("api") or {}).get("model")
        if used != model:
            raise ApiError(
                400,
                f"session {value!r} is a conversation with {used!r}, not {model!r}",
                code="invalid_value",
                param="model",
            )
        routed, exists = value, True
    else:
        routed = response_store.routed_session_id(owner, workspace.root, model, value)
        exists = Session.objects.filter(pk=routed).exists()
    if target.previous is not None and target.previous.session_id != routed:
        raise ApiError(
            400,
            f"previous_response_id belongs to another conversation than the one {param} "
            "names; send one of the two",
            code="invalid_value",
            param="previous_response_id",
        )
    target.session_id, target.session_exists = routed, exists
