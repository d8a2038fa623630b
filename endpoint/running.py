"""Running a `/v1/responses` call: a deck through `run_deck`, or a provider model proxied
through the router.

The client's function tools become external tools of the deck for that call: when the model
calls them, the pass's other calls run, then the run stops, its state is saved, and every
client call of the pass goes back to the client as a `function_call` item; the client's
`function_call_output`s (with `previous_response_id`) resume the run. Text goes to the
caller as it is produced. The request's sampling parameters (`temperature`, `top_p`,
`max_output_tokens`, `tool_choice`, `parallel_tool_calls`) become the named deck's model
parameters for this call, over its own `[modelParams]`; its `instructions` reach this run's
model calls only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from decks_app.models import Session, Workspace
from decks_app.runs import deck_trees, providers, telemetry, worker
from decks_app.runs.ending import RunProgress
from decks_app.runs.state import session_state_dict
from decks_app.workspaces.served import DeckInfo, jailed_path, project_root
from endpoint.encoding import SPEC_ITEM_TYPES, is_namespaced
from endpoint.proxying import proxy_call
from endpoint.routing import run_mode, workspace_relative
from endpoint.schemas import (
    ApiError,
    CreateResponseBody,
    FunctionCallOutputParam,
    FunctionCallParam,
    Item,
    MessageParam,
    last_user_text,
)
from gambit.core import MISSING as _MISSING
from gambit.core import (
    TOOL_CALL_DEFERRED,
    DeckError,
    FunctionCallItem,
    FunctionCallOutputItem,
    GambitError,
    MessageItem,
    ModelParams,
    ProviderError,
    SavedState,
    ToolDecl,
    check_deck_tree,
    message_item,
    new_state,
    run_deck,
    schema_from_json,
    state_from_dict,
    state_items,
)
from gambit.core.provider import item_from_dict

log = logging.getLogger(__name__)


class UpstreamEvent(NamedTuple):
    """An event of a proxied provider model's stream, relayed as it comes."""

    event: dict[str, Any]


# What the runner hands the stream as the run goes: text (a delta), an extension or reasoning
# item (complete), a proxied model's stream event, and None at the end.
Delta = str | dict[str, Any] | UpstreamEvent | None


@dataclasses.dataclass
class PendingCall:
    """A call of one of the client's tools: the run stopped on it, the client answers it."""

    call_id: str
    name: str
    arguments: str


@dataclasses.dataclass
class Outcome:
    """How a run ended: its final text, the client tool calls it stopped on (every call of
    the pass), why it stopped short (`incomplete`), a proxied model's final output items,
    the error (the response's `error` plus its `type`), the status, and its last state and
    usage."""

    final_text: str = ""
    pending: list[PendingCall] = dataclasses.field(default_factory=list)
    incomplete: dict[str, Any] | None = None
    proxied_output: list[dict[str, Any]] | None = None
    error: dict[str, Any] | None = None
    status: str = "completed"
    error_text: str = ""
    latest: RunProgress = dataclasses.field(default_factory=RunProgress)


class Runner:
    """Runs the deck (or proxies the model) of one call, in its recorded session."""

    def __init__(
        self,
        workspace: Workspace,
        body: CreateResponseBody,
        items: list[Item],
        *,
        deck: DeckInfo | None,
        session: Session,
        run_id: str,
        sampling: dict[str, Any],
        references: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.workspace = workspace
        self.body = body
        self.items = items
        self.deck = deck
        self.session = session
        self.run_id = run_id
        # The response's reported sampling values, updated with the deck's effective ones.
        self.sampling = sampling
        self.references = references or {}
        self.outcome = Outcome()

    async def execute(
        self,
        deltas: asyncio.Queue[Delta],
        on_trace_event: Callable[[dict[str, Any]], None],
    ) -> Outcome:
        """Run to the end (or to the client's tool calls); `deltas` receives the text as it
        streams and the extension items as they complete. A failure ends in the outcome;
        cancellation propagates, with `self.outcome` as far as the run got."""
        outcome = self.outcome
        latest = outcome.latest
        # The server's run loop shares its routers (and their connections) with its runs.
        routers = worker.shared_routers()
        if routers is not None:
            router = await routers.acquire(self.workspace.root)
        else:
            router = providers.make_router(self.workspace.root)
        # OpenTelemetry spans, as for the simulator's own runs (None when no export is set).
        spans = telemetry.sink(self.session.id)

        def on_trace(event: dict[str, Any]) -> None:
            kind = event.get("type")
            if kind == "run.end":
                latest.usage = event.get("usage")
            # Which model answered, for the run's record: not the `deck/...` name asked for.
            latest.note_answer(event)
            if kind == "response.output_item.done":
                item = _surfaced_item(event)
                if item is not None:
                    deltas.put_nowait(item)
            elif (
                kind == "model.result"
                and self.deck is not None
                and not event.get("parentActionCallId")
            ):
                # Reasoning items of a pass that did not stream them (the encoder keeps each
                # id once).
                for item in event.get("output") or []:
                    if isinstance(item, dict) and item.get("type") == "reasoning":
                        deltas.put_nowait(item)
            elif kind == "log":
                deck_trees.report_warning(event)
            on_trace_event(event)
            if spans is not None:
                spans(event)

        try:
            if self.deck is not None:
                outcome.final_text = await self._run_deck(router, on_trace, deltas)
            else:
                outcome.final_text = await self._proxy(router, on_trace, deltas)
        except asyncio.CancelledError:
            outcome.status, outcome.error_text = "canceled", "the client disconnected"
            raise
        except (ApiError, GambitError, DeckError, ProviderError) as exc:
            message = workspace_relative(
                self.workspace, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            )
            outcome.status, outcome.error_text = "failed", message
            code = getattr(exc, "code", None) or "run_failed"
            kind = "model_error" if isinstance(exc, ProviderError) else "server_error"
            if isinstance(exc, ApiError):
                kind = exc.type
            outcome.error = {"type": kind, "code": str(code), "message": message}
        except Exception as exc:  # a bug: the response fails with the cause, the stream ends
            log.exception("run %s failed", self.run_id)
            message = workspace_relative(self.workspace, f"{type(exc).__name__}: {exc}")
            outcome.status, outcome.error_text = "failed", message
            outcome.error = {"type": "server_error", "code": "server_error", "message": message}
        finally:
            telemetry.close(spans)  # the spans a canceled or failed call left open
            if routers is not None:
                await routers.release(router)
            else:
                with contextlib.suppress(Exception):
                    await router.aclose()
        return outcome

    async def _run_deck(
        self,
        router: Any,
        on_trace: Callable[[dict[str, Any]], None],
        deltas: asyncio.Queue[Delta],
    ) -> str:
        assert self.deck is not None
        outcome = self.outcome
        latest = outcome.latest
        file = jailed_path(self.workspace, self.deck.path)
        tree, diag = await asyncio.to_thread(
            check_deck_tree,
            file,
            strict=deck_trees.strict_mode(),
            project_root=project_root(self.workspace),
        )
        latest.root = str(file)
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
        # gambit.toml's [context] applies here as in the simulator and the CLI
        # (docs/decks.md, "Context window and compaction").
        config = getattr(router, "config", None)
        if config is not None:
            options["compaction"] = config.compaction()

        def on_state(new_state: SavedState) -> None:
            latest.state = new_state

        async def on_tool(request: dict[str, Any]) -> Any:
            # The client's tools (and the deck's own external ones) are the client's to
            # answer: every call of the pass goes back to it, the run stops there.
            return TOOL_CALL_DEFERRED

        result = await run_deck(
            tree,
            provider=router,
            model_resolver=router,
            context=context,
            message=message,
            state=state,
            mode="chat" if run_mode() == "chat" else "responses",
            stream=True,
            on_stream_text=lambda text: deltas.put_nowait(text),
            on_trace=on_trace,
            on_state=on_state,
            on_tool=on_tool,
            run_id=self.run_id,
            instructions=self.body.instructions,
            **options,
        )
        latest.state = result.state or latest.state
        outcome.pending = [
            PendingCall(call.call_id, call.name, call.arguments)
            for call in result.pending_tool_calls
        ]
        outcome.incomplete = result.incomplete_details
        output = result.output
        if output is None and outcome.pending:
            return ""
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
        if body.parallel_tool_calls is not None:
            extra["parallel_tool_calls"] = body.parallel_tool_calls
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

    def _saved_state(self) -> SavedState | None:
        data = session_state_dict(self.session)
        return state_from_dict(data) if data else None

    def _item(self, item: Item) -> Any:
        """A request's input item as a conversation item: a message (system and developer
        ones as system messages, images and files kept), a function call or its output, or
        the stored item an `item_reference` names."""
        if isinstance(item, MessageParam):
            role = _ROLES[item.role]
            if not item.media():
                return message_item(role, item.text())
            assert not isinstance(item.content, str)
            return MessageItem.model_validate(
                {"role": role, "content": [p.to_item_part() for p in item.content]}
            )
        if isinstance(item, FunctionCallParam):
            return FunctionCallItem(call_id=item.call_id, name=item.name, arguments=item.arguments)
        if isinstance(item, FunctionCallOutputParam):
            return FunctionCallOutputItem(call_id=item.call_id, output=item.text())
        return _referenced(self.references[item.id])

    def _conversation(self, deck: Any) -> tuple[SavedState | None, Any, Any]:
        """(state to resume, context, message) from the session and the input items. The
        request's `instructions` are not part of it: they reach this run's model calls only
        (`run_deck(instructions=...)`)."""
        state = self._saved_state()
        conversation = [self._item(item) for item in self.items]
        if deck.kind == "compute":
            text = last_user_text(self.items)
            return None, text if text is not None else _MISSING, None
        message = None
        last = conversation[-1] if conversation else None
        if (
            isinstance(last, MessageItem)
            and last.role == "user"
            and all(part.type == "input_text" for part in last.content)
        ):
            message = _text_of(conversation.pop())
        if state is None and conversation:
            prompt = [message_item("system", deck.system_prompt)] if deck.system_prompt else []
            state = new_state("responses", run_id=self.session.state_run_id or None)
            state = state.model_copy(update={"items": prompt})
        if conversation:
            assert state is not None
            state = state.model_copy(update={"items": [*state_items(state), *conversation]})
        return state, _MISSING, message

    async def _proxy(
        self,
        router: Any,
        on_trace: Callable[[dict[str, Any]], None],
        deltas: asyncio.Queue[Delta],
    ) -> str:
        """A provider model: forward the request through the router and record it; its
        stream is relayed event by event (`UpstreamEvent`), every item type."""
        # A continued (or routed) conversation: the upstream gets what was said before, as
        # a deck's model does.
        state = self._saved_state()
        items: list[Any] = list(state_items(state)) if state is not None else []
        items += [self._item(item) for item in self.items]
        proxied = await proxy_call(
            self.body,
            items,
            router,
            on_trace,
            on_event=lambda event: deltas.put_nowait(UpstreamEvent(event)),
        )
        self.outcome.proxied_output = proxied.output
        self.outcome.incomplete = proxied.incomplete
        self.outcome.latest.state = proxied.state
        return proxied.text


# A conversation has no developer role: a developer message is a system message to the model.
_ROLES: dict[str, Literal["system", "user", "assistant"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def _referenced(stored: dict[str, Any]) -> Any:
    """A stored input or output item, as a conversation item (what the model is sent)."""
    data = {k: v for k, v in stored.items() if k != "status"}
    kind = data.get("type")
    if kind in ("message", "function_call", "function_call_output"):
        data.pop("id", None)
    if kind == "message":
        if data.get("role") == "developer":
            data["role"] = "system"
        data["content"] = [
            {k: v for k, v in part.items() if k not in ("annotations", "logprobs")}
            for part in data.get("content") or []
            if isinstance(part, dict)
        ]
    return item_from_dict(data)


def _surfaced_item(event: dict[str, Any]) -> dict[str, Any] | None:
    """The item a `response.output_item.done` trace event carries, when the response should
    show it: anything a deck emitted (`ctx.emit_output_item`, any depth), and the reasoning
    and namespaced items the named deck's own model produced. Items of the specification's
    types are the endpoint's own business (text, client tool calls), and a provider's bare
    non-standard types (a hosted tool's call) are not ours to namespace."""
    item = event.get("item")
    meta = event.get("_gambit") or {}
    if not isinstance(item, dict):
        return None
    if item.get("type") == "reasoning":  # the named deck's own model's reasoning, as received
        return item if "model" in meta and not meta.get("parent_action_call_id") else None
    if item.get("type") in SPEC_ITEM_TYPES:
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


def _text_of(item: MessageItem) -> str:
    return "".join(getattr(part, "text", "") or "" for part in item.content)
