"""Serving decks as an Open Responses endpoint (`POST /v1/responses`, seeds 003 and 004).

`model` names a deck of the served workspace (`deck/<folder>`, listed by `GET /v1/models`)
or a provider model, proxied through the router. Either way the call is recorded as a
session (origin "api") with one run per request, its trace and its usage, so it can be
inspected, rated and graded in the Test tab like any other conversation.

A deck runs through `run_deck`. The client's function tools become external tools of the
deck for that call: when the model calls one, the run stops there, its state is saved, and
the call goes back to the client as a `function_call` item; the client's
`function_call_output` (with `previous_response_id`) resumes the run. Text streams as it is
produced; the stream is the spec's sequence (created, in_progress, output_item.added,
content_part.added, output_text.delta..., output_text.done, content_part.done,
output_item.done, completed | failed | incomplete), every event numbered.

Extension items a run produces (a deck's `ctx.emit_output_item`, a provider's namespaced
items) are output items of the response, streamed with output_item.added / done; their type
is namespaced (`gambit:<type>` unless it already is, as `[[responseItemExtensions]]` types
are). The request's sampling parameters (`temperature`, `top_p`, `max_output_tokens`,
`tool_choice`) become the named deck's model parameters for this call, over its own
`[modelParams]`.

What a call stores (its resource and input items, per key), how the state endpoints read it,
and how a `Gambit-Session` header (or `user`) routes calls into one session: see
`response_store.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from decks_app.api.responses_schemas import (
    ApiError,
    CreateResponseBody,
    FunctionCallOutputParam,
    FunctionCallParam,
    Item,
    ItemReferenceParam,
    MessageParam,
)
from decks_app.models import ApiKey, Run, Session, Workspace
from decks_app.services import api_keys, deck_trees, execution, providers, response_store
from decks_app.services import sessions as session_service
from decks_app.services.workspaces import (
    DeckInfo,
    current_workspace,
    find_deck,
    jailed_path,
    list_decks,
    project_root,
)
from gambit.core import (
    DeckError,
    GambitError,
    ProviderError,
    RunError,
    check_deck_tree,
    new_id,
    run_deck,
    state_from_dict,
)
from gambit.core._deck import ModelParams, ToolDecl
from gambit.core._openresponses import (
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ResponseToolDefinition,
    item_to_dict,
    message_item,
)
from gambit.core._runtime import _MISSING
from gambit.core._schema import schema_from_json
from gambit.core._state import SavedState, new_state, state_items

DECK_PREFIX = "deck/"
log = logging.getLogger(__name__)

# Item types the specification defines; any other type is an extension item and must be
# namespaced with a slug (`slug:name`, the specification's "Items are extensible").
SPEC_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "compaction"}
)
EXTENSION_NAMESPACE = "gambit"
_NAMESPACED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:[A-Za-z0-9][A-Za-z0-9_.:-]*$")
# Sampling values a response reports when neither the request nor the deck set them (the
# values the Responses API documents as its defaults).
DEFAULT_SAMPLING = {
    "temperature": 1.0,
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


def is_namespaced(kind: Any) -> bool:
    return isinstance(kind, str) and bool(_NAMESPACED.match(kind))


def extension_item(raw: dict[str, Any]) -> dict[str, Any]:
    """An extension item as the response carries it: a namespaced type (`gambit:<type>` for a
    bare one), an id, and a status of the item state machine."""
    item = dict(raw)
    kind = item.get("type")
    if not is_namespaced(kind):
        item["type"] = f"{EXTENSION_NAMESPACE}:{kind}"
    if not isinstance(item.get("id"), str) or not item["id"]:
        item["id"] = new_id("item")
    if item.get("status") not in ("completed", "incomplete"):
        item["status"] = "completed"
    return item


# ---------------------------------------------------------------- models


def deck_name(info: DeckInfo) -> str:
    """`support/PROMPT.md` -> `support`; `hello/deck.py` -> `hello`; `x.deck.md` -> `x`."""
    path = Path(info.path)
    if path.name in ("PROMPT.md", "deck.py"):
        return str(path.parent) if str(path.parent) != "." else path.stem
    return str(path.with_suffix("")).removesuffix(".deck")


def served_decks(workspace: Workspace) -> dict[str, DeckInfo]:
    return {DECK_PREFIX + deck_name(d): d for d in list_decks(workspace) if not d.error}


def find_served_deck(workspace: Workspace, model: str) -> DeckInfo | None:
    """The deck `deck/<name>` names, checking only that deck (not the whole workspace)."""
    name = model.removeprefix(DECK_PREFIX)
    if not name or name.startswith("/") or ".." in name.split("/"):
        return None
    for candidate in (f"{name}/PROMPT.md", f"{name}/deck.py", f"{name}.deck.md", f"{name}.md"):
        info = find_deck(workspace, candidate)
        if info is not None and not info.error and deck_name(info) == name:
            return info
    return None


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


# ---------------------------------------------------------------- the call


@dataclasses.dataclass
class _Pause(Exception):
    """The deck called one of the client's tools: the run stops and hands it the call."""

    call_id: str
    name: str
    arguments: str


class ResponseCall:
    """One `POST /v1/responses`: resolves the model, runs it, yields the stream events."""

    def __init__(
        self,
        workspace: Workspace,
        body: CreateResponseBody,
        items: list[Item],
        *,
        key: ApiKey | None = None,
        owner: str | None = None,
        route: tuple[str, str] | None = None,
    ):
        # An unsaved `Workspace` (its root only, see `served_workspace`) is resolved to its
        # row when the call is recorded.
        self.workspace = workspace
        self.key = key
        # Who the call belongs to (`api_keys.owner`), and the conversation it is routed into
        # (`response_store.route_of`: the value and the parameter it came from), if any.
        self.owner = owner
        self.route = route
        self.body = body
        self.items = items
        self.store = body.store is not False
        self.response_id = new_id("resp")
        # The session the call is recorded in, known before the first byte (the
        # `Gambit-Session-Id` response header): a new one, the previous response's, or the
        # routed one (`prepare`).
        self.session_id = new_id("session")
        self._session_exists = False
        self.input_items: list[dict[str, Any]] = []
        self.created_at = int(time.time())
        self.completed_at: int | None = None  # set once: the stored resource is the answered one
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None
        self.session: Session | None = None
        self.run: Run | None = None
        self.deck: DeckInfo | None = None
        self._previous: Run | None = None
        # What the response reports as used: the request's values until the deck's own
        # `[modelParams]` are known (after it loads), then the effective ones.
        self.sampling: dict[str, Any] = {
            "temperature": body.temperature,
            "top_p": body.top_p,
            "presence_penalty": None,
            "frequency_penalty": None,
            "reasoning": None,
            "max_output_tokens": body.max_output_tokens,
        }
        self._seen_items: set[str] = set()

    # -- setup (synchronous, in a thread) ---------------------------------------------------

    def prepare_reads_tables(self) -> bool:
        """Whether `prepare` touches the database or deck files (then it runs in the request's
        sync thread); for a provider model without `previous_response_id` or routing it
        reads neither."""
        return (
            bool(self.body.previous_response_id)
            or self.route is not None
            or self.body.model.startswith(DECK_PREFIX)
        )

    def prepare(self) -> None:
        """Find the deck (or provider model), the previous response's run and the routed
        session, if any."""
        model = self.body.model
        previous = None
        if self.body.previous_response_id:
            previous = response_store.find_call(
                self.body.previous_response_id,
                self.owner,
                code="previous_response_not_found",
                param="previous_response_id",
                purpose="; it cannot be continued",
            )
            self.session_id = previous.session_id
            self._session_exists = True
        if self.route is not None:
            self._resolve_route(previous)
        if (
            self._session_exists
            and Run.objects.filter(session_id=self.session_id, status__in=Run.ACTIVE).exists()
        ):
            raise self._busy()
        if model.startswith(DECK_PREFIX):
            self.deck = find_served_deck(self.workspace, model)
            if self.deck is None:
                raise ApiError(
                    404,
                    f"model {model!r} is not a deck of this workspace (GET /v1/models lists them)",
                    code="model_not_found",
                    param="model",
                )
        else:
            router = providers.make_router(self.workspace.root)
            reason = router.unavailable_reason(model, probe=False)
            if reason is not None:
                raise ApiError(
                    404,
                    f"model {model!r} is not available: {reason}",
                    code="model_not_found",
                    param="model",
                )
        self._previous = previous

    def _busy(self) -> ApiError:
        return ApiError(
            409,
            "the conversation is still running (one call at a time per session)",
            code="conversation_busy",
            param="previous_response_id" if self.body.previous_response_id else self._route_param,
        )

    @property
    def _route_param(self) -> str | None:
        return self.route[1] if self.route is not None else None

    def _resolve_route(self, previous: Run | None) -> None:
        """The session a `Gambit-Session` header (or `user`) names: a session id continues
        that API session (of this key and model); a name, the session of this key, model
        and name (created by the first call)."""
        assert self.route is not None
        value, param = self.route
        model = self.body.model
        if param == response_store.SESSION_HEADER and response_store.is_session_id(value):
            session = Session.objects.filter(pk=value, origin="api").first()
            if session is None or not response_store.may_use(session, self.owner):
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
            routed = response_store.routed_session_id(self.owner, self.workspace.root, model, value)
            exists = Session.objects.filter(pk=routed).exists()
        if previous is not None and previous.session_id != routed:
            raise ApiError(
                400,
                f"previous_response_id belongs to another conversation than the one {param} "
                "names; send one of the two",
                code="invalid_value",
                param="previous_response_id",
            )
        self.session_id, self._session_exists = routed, exists

    def record(self) -> None:
        """Create this call's session (or continue the previous one) and run. Done after the
        first bytes are sent, so recording adds nothing to the time to first byte."""
        previous = self._previous
        model = self.body.model
        if self.workspace._state.adding:  # the root only (`served_workspace`)
            self.workspace = current_workspace()
        if self.key is not None:
            api_keys.touch(self.key)
        fields = {
            "workspace": self.workspace,
            "deck_path": self.deck.path if self.deck else "",
            "deck_label": (self.deck.label if self.deck else model)[:200],
            "model": "" if self.deck else model[:200],
            "origin": "api",
            "format": "responses",
            "state_run_id": new_id("run"),
            "meta": {
                "deckPath": self.deck.path if self.deck else None,
                "api": {
                    "model": model,
                    "metadata": self.body.metadata or {},
                    "owner": self.owner,
                    "route": self.route[0] if self.route is not None else None,
                },
            },
        }
        with transaction.atomic():
            if previous is not None or self.route is not None:
                # Continued, or routed: the first call of a routed name creates its session
                # (two racing first calls meet at the one row its derived id allows).
                Session.objects.get_or_create(pk=self.session_id, defaults=fields)
                self.session = Session.objects.select_for_update().get(pk=self.session_id)
                if self.session.runs.filter(status__in=Run.ACTIVE).exists():
                    raise self._busy()
            else:
                self.session = Session.objects.create(pk=self.session_id, **fields)
            conversation = execution.session_state_dict(self.session) or {}
            self.input_items = response_store.input_items(
                self.items, [i for i in conversation.get("items") or [] if isinstance(i, dict)]
            )
            try:
                self.run = self._create_run(model)
            except session_service.SessionBusy:
                raise self._busy() from None

    def _create_run(self, model: str) -> Run:
        return session_service.create_run(
            session=self.session,
            kind="api",
            status="running",
            message=_last_user_text(self.items),
            model=model[:200],
            worker_id="api",
            started_at=timezone.now(),
            heartbeat_at=timezone.now(),
            output=self._record_of(self.resource("in_progress")),
        )

    def _record_of(self, resource: dict[str, Any]) -> dict[str, Any]:
        """The run's `output`: this call's record (`response_store.call_record`)."""
        return response_store.call_record(self.response_id, self.store, resource, self.input_items)

    # -- events -----------------------------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> dict[str, Any]:
        self.sequence += 1
        return {"type": type_, "sequence_number": self.sequence, **fields}

    def resource(self, status: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `ResponseResource`, with every field the specification requires."""
        done = status in ("completed", "failed", "incomplete")
        if done and self.completed_at is None:
            self.completed_at = int(time.time())
        sampling = {
            key: float(self.sampling[key]) if self.sampling[key] is not None else default
            for key, default in DEFAULT_SAMPLING.items()
        }
        reasoning = self.sampling["reasoning"]
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": self.completed_at if done else None,
            "status": status,
            "incomplete_details": None,
            "model": self.body.model,
            "previous_response_id": self.body.previous_response_id,
            "instructions": self.body.instructions,
            "output": [dict(item) for item in self.output],
            "error": error,
            "tools": [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": t.strict,
                }
                for t in self.body.tools or []
            ],
            "tool_choice": self.body.tool_choice if self.body.tool_choice is not None else "auto",
            "truncation": "disabled",
            "parallel_tool_calls": False,
            "text": {"format": {"type": "text"}},
            **sampling,
            "top_logprobs": 0,
            "reasoning": {
                "effort": reasoning.get("effort"),
                "summary": reasoning.get("summary"),
            }
            if isinstance(reasoning, dict)
            else None,
            "usage": self.usage,
            "max_output_tokens": self.sampling["max_output_tokens"],
            "max_tool_calls": None,
            "store": self.store,
            "background": False,
            "service_tier": "default",
            "metadata": self.body.metadata or {},
            "safety_identifier": self.body.safety_identifier,
            "prompt_cache_key": self.body.prompt_cache_key,
            "user": self.body.user,
        }

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The whole stream; cancelling the iteration cancels the run and records it."""
        yield self._event("response.created", response=self.resource("in_progress"))
        yield self._event("response.in_progress", response=self.resource("in_progress"))
        # Recording starts after the first bytes, and is never abandoned half-way: a client
        # that leaves meanwhile still gets its call recorded (as canceled).
        recording = asyncio.ensure_future(asyncio.to_thread(self.record))
        try:
            await asyncio.shield(recording)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await recording
                await self._record_cancel()
            raise
        except ApiError as exc:  # lost a race for the conversation: fail this response
            error = {"code": exc.code or "conversation_busy", "message": exc.message}
            yield self._error_event(exc.type, error, exc.param)
            yield self._event("response.failed", response=self.resource("failed", error))
            return
        queue: asyncio.Queue[str | dict[str, Any] | None] = asyncio.Queue()
        runner = asyncio.create_task(self._execute(queue))
        message: dict[str, Any] | None = None
        text = ""
        try:
            while True:
                got = await queue.get()
                if got is None:
                    break
                if isinstance(got, dict):  # an extension item, complete
                    for event in self._extension(got):
                        yield event
                    continue
                if message is None:
                    message, opening = self._open_message()
                    for event in opening:
                        yield event
                text += got
                message["content"][0]["text"] = text
                yield self._event(
                    "response.output_text.delta",
                    item_id=message["id"],
                    output_index=self.output.index(message),
                    content_index=0,
                    delta=got,
                    logprobs=[],
                )
            outcome = await runner
        except BaseException:
            runner.cancel()
            with contextlib.suppress(BaseException):
                await runner
            raise
        final_text, pause, error, status = outcome
        if final_text and message is None and pause is None:
            message, opening = self._open_message()
            for event in opening:
                yield event
        if message is not None:
            if final_text and final_text.startswith(text) and final_text != text:
                rest = final_text[len(text) :]
                text = final_text
                message["content"][0]["text"] = text
                yield self._event(
                    "response.output_text.delta",
                    item_id=message["id"],
                    output_index=self.output.index(message),
                    content_index=0,
                    delta=rest,
                    logprobs=[],
                )
            # The text produced so far is whole even when the run then failed: an item ends
            # `incomplete` only in an incomplete response (the specification's item rule).
            for event in self._close_message(message, "completed"):
                yield event
        if pause is not None:
            for event in self._function_call(pause):
                yield event
        if status == "failed":
            assert error is not None
            yield self._error_event(error.pop("type", "server_error"), error, None)
            final = self.resource("failed", error)
        else:
            final = self.resource("completed")
        # Stored before it is sent: a client that leaves on the terminal event, or asks for
        # the response the moment it has it, finds it as it was answered.
        await asyncio.to_thread(self._store_resource, final)
        yield self._event(f"response.{final['status']}", response=final)

    def _error_event(self, type_: str, error: dict[str, Any], param: str | None) -> dict[str, Any]:
        """The specification's `error` event; "any error incurred while streaming will be
        followed by a response.failed event"."""
        return self._event(
            "error",
            error={
                "type": type_,
                "code": error.get("code"),
                "message": error.get("message") or "the response failed",
                "param": param,
            },
        )

    def _extension(self, raw: dict[str, Any]) -> list[dict[str, Any]]:
        item = extension_item(raw)
        if item["id"] in self._seen_items:
            return []
        self._seen_items.add(item["id"])
        self.output.append(item)
        index = len(self.output) - 1
        return [
            self._event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress"},
            ),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _open_message(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        message = {
            "type": "message",
            "id": new_id("msg"),
            "role": "assistant",
            "status": "in_progress",
            "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}],
        }
        self.output.append(message)
        index = len(self.output) - 1
        return message, [
            self._event(
                "response.output_item.added",
                output_index=index,
                item={**message, "content": []},
            ),
            self._event(
                "response.content_part.added",
                item_id=message["id"],
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            ),
        ]

    def _close_message(self, message: dict[str, Any], status: str) -> list[dict[str, Any]]:
        message["status"] = status
        index = self.output.index(message)
        part = message["content"][0]
        return [
            self._event(
                "response.output_text.done",
                item_id=message["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event(
                "response.content_part.done",
                item_id=message["id"],
                output_index=index,
                content_index=0,
                part=part,
            ),
            self._event("response.output_item.done", output_index=index, item=message),
        ]

    def _function_call(self, pause: _Pause) -> list[dict[str, Any]]:
        item = {
            "type": "function_call",
            "id": new_id("fc"),
            "call_id": pause.call_id,
            "name": pause.name,
            "arguments": "",
            "status": "in_progress",
        }
        self.output.append(item)
        index = len(self.output) - 1
        events = [self._event("response.output_item.added", output_index=index, item=dict(item))]
        events.append(
            self._event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=pause.arguments,
            )
        )
        item["arguments"] = pause.arguments
        events.append(
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=pause.arguments,
            )
        )
        item["status"] = "completed"
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    # -- running ----------------------------------------------------------------------------

    async def _record_cancel(self) -> None:
        """The client left before the run started: the recorded run ends canceled."""
        if self.run is None:
            return
        await execution.db(
            execution._finish,
            self.run.id,
            "canceled",
            "the client disconnected",
            self._record_of(self.resource("incomplete")),
            {"state": None, "usage": None},
            [],
            time.monotonic(),
        )

    async def _execute(
        self, deltas: asyncio.Queue[str | dict[str, Any] | None]
    ) -> tuple[str, Any, Any, str]:
        """Run the deck (or proxy the model); returns (final text, pause, error, status).

        `deltas` receives the text as it streams and the extension items as they complete,
        then None."""
        assert self.run is not None and self.session is not None
        writer = execution.EventWriter(self.run.id, self.session.id, 1)
        latest: dict[str, Any] = {"state": None, "usage": None}
        started = time.monotonic()
        status, error_text, final_text = "completed", "", ""
        pause: _Pause | None = None
        error: dict[str, Any] | None = None
        paused = asyncio.Event()
        router = providers.make_router(self.workspace.root)

        def on_trace(event: dict[str, Any]) -> None:
            kind = event.get("type")
            if kind == "run.end":
                latest["usage"] = event.get("usage")
            elif kind == "response.output_item.done":
                item = _surfaced_item(event)
                if item is not None:
                    deltas.put_nowait(item)
            elif kind == "log":
                deck_trees.report_warning(event)
            writer.add(event)

        async def on_tool(request: dict[str, Any]) -> Any:
            nonlocal pause
            pause = _Pause(
                request["actionCallId"], request["name"], json.dumps(request.get("args") or {})
            )
            paused.set()
            await asyncio.Event().wait()  # the run is stopped here and resumed by the client

        try:
            if self.deck is not None:
                task = asyncio.create_task(
                    self._run_deck(router, on_trace, on_tool, latest, deltas)
                )
            else:
                task = asyncio.create_task(self._proxy(router, on_trace, latest, deltas))
            waiter = asyncio.create_task(paused.wait())
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:  # a client tool was called: stop the run, keep its state
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                status = "completed"
                state = latest.get("state")
                if state is not None and pause is not None:
                    # The pass that made the call was not published yet: keep the call in the
                    # conversation, so the client's function_call_output answers it.
                    call = FunctionCallItem(
                        call_id=pause.call_id, name=pause.name, arguments=pause.arguments
                    )
                    latest["state"] = state.model_copy(
                        update={"items": [*state_items(state), call]}
                    )
            else:
                waiter.cancel()
                final_text = task.result()
        except asyncio.CancelledError:
            status, error_text = "canceled", "the client disconnected"
            await writer.close()
            await execution.db(
                execution._finish,
                self.run.id,
                "canceled",
                error_text,
                self._record_of(self.resource("incomplete")),
                latest,
                [],
                started,
            )
            await deltas.put(None)
            raise
        except (ApiError, GambitError, DeckError, ProviderError) as exc:
            status, error_text = "failed", str(exc).splitlines()[0]
            code = getattr(exc, "code", None) or "run_failed"
            kind = "model_error" if isinstance(exc, ProviderError) else "server_error"
            if isinstance(exc, ApiError):
                kind = exc.type
            error = {"type": kind, "code": str(code), "message": error_text}
        except Exception as exc:  # a bug: the response fails with the cause, the stream ends
            log.exception("response %s failed", self.response_id)
            status, error_text = "failed", f"{type(exc).__name__}: {exc}"
            error = {"type": "server_error", "code": "server_error", "message": error_text}
        finally:
            with contextlib.suppress(Exception):
                await router.aclose()
        await writer.close()
        usage = latest.get("usage") or {}
        self.usage = {
            "input_tokens": int(usage.get("promptTokens") or 0),
            "output_tokens": int(usage.get("completionTokens") or 0),
            "total_tokens": int(usage.get("totalTokens") or 0),
            "input_tokens_details": {
                "cached_tokens": int(usage.get("cachedTokens") or 0),
                "cache_write_tokens": 0,  # not counted; the openai SDK's type requires it
            },
            "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoningTokens") or 0)},
        }
        await execution.db(
            execution._finish,
            self.run.id,
            "failed" if status == "failed" else "completed",
            error_text,
            self._record_of(self.resource("in_progress")),
            latest,
            [],
            started,
        )
        await deltas.put(None)
        return final_text, pause, error, status

    async def _run_deck(self, router, on_trace, on_tool, latest, deltas) -> str:
        assert self.deck is not None and self.session is not None
        file = jailed_path(self.workspace, self.deck.path)
        tree, diag = await asyncio.to_thread(
            check_deck_tree,
            file,
            strict=deck_trees.strict_mode(),
            project_root=project_root(self.workspace),
        )
        if tree is None or diag.errors:
            raise ApiError(
                500,
                f"the deck {self.deck.path} does not load; run gambit check on it",
                type="server_error",
                code="deck_error",
            )
        if self.body.tools:
            tools = [
                ToolDecl(
                    name=t.name,
                    description=t.description,
                    input_schema=schema_from_json(t.parameters, source=f"tools[{t.name}]")
                    if t.parameters
                    else None,
                )
                for t in self.body.tools
            ]
            root = dataclasses.replace(tree.root, tools=[*tree.root.tools, *tools])
            tree = dataclasses.replace(tree, root=root, decks={**tree.decks, root.path: root})
        params = self._model_params(tree.root.model_params)
        root = dataclasses.replace(tree.root, model_params=params)
        tree = dataclasses.replace(tree, root=root, decks={**tree.decks, root.path: root})
        override, _, _ = providers.effective_model("", self.deck.models, router)
        state, context, message = self._conversation(tree.root)
        options: dict[str, Any] = {}
        if override:
            options["model_override"] = override

        def on_state(new_state: SavedState) -> None:
            latest["state"] = new_state

        result = await run_deck(
            tree,
            provider=router,
            model_resolver=router,
            context=context,
            message=message,
            state=state,
            stream=True,
            on_stream_text=lambda text: deltas.put_nowait(text),
            on_trace=on_trace,
            on_state=on_state,
            on_tool=on_tool,
            run_id=self.run.id if self.run else None,
            **options,
        )
        latest["state"] = result.state or latest["state"]
        output = result.output
        if isinstance(output, dict) and "payload" in output:
            output = output["payload"]
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)

    def _model_params(self, own: ModelParams) -> ModelParams:
        """The deck's `[modelParams]` with the request's sampling parameters over them: they
        reach every model call the named deck makes (its action decks keep their own)."""
        body = self.body
        extra = dict(own.additional_params)
        if body.tool_choice is not None:
            extra["tool_choice"] = body.tool_choice
        if body.max_output_tokens is not None:
            extra.pop("max_output_tokens", None)
        params = dataclasses.replace(
            own,
            temperature=_first(body.temperature, own.temperature),
            top_p=_first(body.top_p, own.top_p),
            max_tokens=_first(body.max_output_tokens, own.max_tokens),
            additional_params=extra,
        )
        self.sampling.update(
            temperature=params.temperature,
            top_p=params.top_p,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            reasoning=params.reasoning,
            max_output_tokens=params.max_tokens,
        )
        return params

    def _conversation(self, deck: Any) -> tuple[SavedState | None, Any, Any]:
        """(state to resume, context, message) from the session and the input items."""
        assert self.session is not None
        data = execution.session_state_dict(self.session)
        state = state_from_dict(data) if data else None
        instructions = [self.body.instructions] if self.body.instructions else []
        conversation: list[Any] = []
        for item in self.items:
            if isinstance(item, MessageParam):
                if item.role == "system" or item.role == "developer":
                    instructions.append(item.text())
                else:
                    conversation.append(message_item(item.role, item.text()))
            elif isinstance(item, FunctionCallParam):
                conversation.append(
                    FunctionCallItem(call_id=item.call_id, name=item.name, arguments=item.arguments)
                )
            elif isinstance(item, FunctionCallOutputParam):
                conversation.append(
                    FunctionCallOutputItem(call_id=item.call_id, output=item.text())
                )
            elif isinstance(item, ItemReferenceParam):
                conversation.append(self._reference(item.id, state))
        if deck.kind == "compute":
            text = _last_user_text(self.items)
            return None, text if text is not None else _MISSING, None
        message = None
        if (
            conversation
            and isinstance(conversation[-1], MessageItem)
            and conversation[-1].role == "user"
        ):
            message = _text_of(conversation.pop())
        if state is None and (conversation or instructions):
            system = "\n\n".join(p for p in [deck.system_prompt, *instructions] if p)
            state = new_state("responses", run_id=self.session.state_run_id or None)
            state = state.model_copy(update={"items": [message_item("system", system)]})
        elif instructions and state is not None:
            conversation.insert(0, message_item("system", "\n\n".join(instructions)))
        if conversation:
            assert state is not None
            state = state.model_copy(update={"items": [*state_items(state), *conversation]})
        return state, _MISSING, message

    def _reference(self, item_id: str, state: SavedState | None) -> Any:
        for item in state_items(state) if state is not None else []:
            if getattr(item, "id", None) == item_id:
                return item
        raise ApiError(
            400,
            f"item_reference {item_id!r} names no item of the previous response's conversation",
            code="item_not_found",
            param="input",
        )

    async def _proxy(self, router, on_trace, latest, deltas) -> str:
        """A provider model: forward the request through the router and record it."""
        instructions = "\n\n".join(
            [self.body.instructions or ""]
            + [
                i.text()
                for i in self.items
                if isinstance(i, MessageParam) and i.role in ("system", "developer")
            ]
        ).strip()
        # A continued (or routed) conversation: the upstream gets what was said before, as
        # a deck's model does.
        assert self.session is not None
        data = execution.session_state_dict(self.session)
        state = state_from_dict(data) if data else None
        items: list[Any] = list(state_items(state)) if state is not None else []
        for item in self.items:
            if isinstance(item, MessageParam) and item.role in ("user", "assistant"):
                items.append(message_item(item.role, item.text()))
            elif isinstance(item, FunctionCallParam):
                items.append(
                    FunctionCallItem(call_id=item.call_id, name=item.name, arguments=item.arguments)
                )
            elif isinstance(item, FunctionCallOutputParam):
                items.append(FunctionCallOutputItem(call_id=item.call_id, output=item.text()))
            elif isinstance(item, ItemReferenceParam):
                items.append(self._reference(item.id, state))
        request = CreateResponseRequest(
            model=self.body.model,
            input=items,
            instructions=instructions or None,
            tools=[
                ResponseToolDefinition.model_validate(
                    {
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters or {"type": "object"},
                        },
                    }
                )
                for t in self.body.tools or []
            ]
            or None,
            tool_choice=self.body.tool_choice,
            max_output_tokens=self.body.max_output_tokens,
            params={
                key: value
                for key, value in (
                    ("temperature", self.body.temperature),
                    ("top_p", self.body.top_p),
                )
                if value is not None
            }
            or None,
            stream=True,
        )
        resolved = router.resolve_model(self.body.model, params=None, deck_path=None)
        provider = resolved.provider or router
        on_trace(
            {
                "type": "model.call",
                "model": resolved.model,
                "items": [item_to_dict(i) for i in items],
            }
        )

        streamed = 0

        def on_event(event: dict[str, Any]) -> None:
            nonlocal streamed
            kind = event.get("type")
            if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
                deltas.put_nowait(event["delta"])
            elif kind == "response.output_item.done":
                item = event.get("item")
                if isinstance(item, dict) and is_namespaced(item.get("type")):
                    streamed += 1
                    deltas.put_nowait(item)

        result = await provider.responses(
            request.model_copy(update={"model": resolved.model}), on_stream_event=on_event
        )
        response = result.response
        if not streamed:  # namespaced items an upstream returned without streaming them
            for item in response.output:
                data = item_to_dict(item)
                if is_namespaced(data.get("type")):
                    deltas.put_nowait(data)
        usage = response.usage.to_dict() if response.usage is not None else None
        on_trace(
            {
                "type": "model.result",
                "model": resolved.model,
                "output": [item_to_dict(i) for i in response.output],
                "usage": usage,
            }
        )
        on_trace({"type": "run.end", "status": "completed", "usage": usage})
        latest["state"] = new_state("responses").model_copy(
            update={"items": [*items, *response.output]}
        )
        texts = [
            part.text
            for item in response.output
            if isinstance(item, MessageItem)
            for part in item.content
            if part.text  # every content part has a text (optional on UnknownContent)
        ]
        return "".join(texts)

    def _store_resource(self, final: dict[str, Any]) -> None:
        if self.run is None:
            return
        try:
            Run.objects.filter(pk=self.run.pk).update(output=self._record_of(final))
        except Exception:  # the answer still goes out; the record keeps its last state
            log.exception("response %s: storing the final resource failed", self.response_id)


def _surfaced_item(event: dict[str, Any]) -> dict[str, Any] | None:
    """The extension item a `response.output_item.done` trace event carries, when the
    response should show it: anything a deck emitted (`ctx.emit_output_item`, any depth), and
    the namespaced items the named deck's own model produced. Items of the specification's
    types are the endpoint's own business (text, client tool calls), and a provider's bare
    non-standard types (a hosted tool's call) are not ours to namespace."""
    item = event.get("item")
    meta = event.get("_gambit") or {}
    if not isinstance(item, dict) or item.get("type") in SPEC_ITEM_TYPES:
        return None
    if not isinstance(item.get("type"), str) or not item["type"]:
        return None
    if "model" not in meta:  # emitted by a deck (ctx.emit_output_item)
        return item
    if is_namespaced(item["type"]) and not meta.get("parent_action_call_id"):
        return item
    return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _last_user_text(items: list[Item]) -> str | None:
    for item in reversed(items):
        if isinstance(item, MessageParam) and item.role == "user":
            return item.text()
        if isinstance(item, FunctionCallOutputParam):
            return None
    return None


def _text_of(item: MessageItem) -> str:
    return "".join(getattr(part, "text", "") or "" for part in item.content)


def run_error_status(exc: Exception) -> int:
    if isinstance(exc, RunError) and exc.code in ("invalid_input",):
        return 400
    return 500


def start_call(data: dict[str, Any], *, owner: str | None = None) -> ResponseCall:
    """Parse an Open Responses body, prepare its call (synchronous; run it with `events()`)."""
    from decks_app.api.responses_schemas import parse_body
    from decks_app.services.workspaces import current_workspace

    body, items = parse_body(data)
    call = ResponseCall(current_workspace(), body, items, owner=owner)
    call.prepare()
    return call
