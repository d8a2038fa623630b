"""Running a `/v1/responses` call: a deck through `run_deck`, or a provider model proxied
through the router.

The client's function tools become external tools of the deck for that call: when the model
calls one, the run stops there, its state is saved, and the call goes back to the client as
a `function_call` item; the client's `function_call_output` (with `previous_response_id`)
resumes the run. Text goes to the caller as it is produced. The request's sampling
parameters (`temperature`, `top_p`, `max_output_tokens`, `tool_choice`) become the named
deck's model parameters for this call, over its own `[modelParams]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

from decks_app.models import Session, Workspace
from decks_app.runs import deck_trees, providers
from decks_app.runs.executor import RunProgress
from decks_app.runs.state import session_state_dict
from decks_app.workspaces.served import DeckInfo, jailed_path, project_root
from endpoint.encoding import SPEC_ITEM_TYPES, is_namespaced
from endpoint.schemas import (
    ApiError,
    CreateResponseBody,
    FunctionCallOutputParam,
    FunctionCallParam,
    Item,
    ItemReferenceParam,
    MessageParam,
    last_user_text,
)
from gambit.core import MISSING as _MISSING
from gambit.core import (
    CreateResponseRequest,
    DeckError,
    FunctionCallItem,
    FunctionCallOutputItem,
    GambitError,
    MessageItem,
    ModelParams,
    ProviderError,
    ResponseToolDefinition,
    SavedState,
    ToolDecl,
    check_deck_tree,
    item_to_dict,
    message_item,
    new_state,
    run_deck,
    schema_from_json,
    state_from_dict,
    state_items,
)

log = logging.getLogger(__name__)

# What the runner hands the stream as the run goes: text (a delta), an extension item
# (complete), and None at the end.
Delta = str | dict[str, Any] | None


@dataclasses.dataclass
class Pause(Exception):
    """The deck called one of the client's tools: the run stops and hands it the call."""

    call_id: str
    name: str
    arguments: str


@dataclasses.dataclass
class Outcome:
    """How a run ended: its final text, the client tool call it stopped at, the error (the
    response's `error` plus its `type`), the status, and its last state and usage."""

    final_text: str = ""
    pause: Pause | None = None
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
    ) -> None:
        self.workspace = workspace
        self.body = body
        self.items = items
        self.deck = deck
        self.session = session
        self.run_id = run_id
        # The response's reported sampling values, updated with the deck's effective ones.
        self.sampling = sampling
        self.outcome = Outcome()

    async def execute(
        self,
        deltas: asyncio.Queue[Delta],
        on_trace_event: Callable[[dict[str, Any]], None],
    ) -> Outcome:
        """Run to the end (or to a client tool call); `deltas` receives the text as it
        streams and the extension items as they complete. A failure ends in the outcome;
        cancellation propagates, with `self.outcome` as far as the run got."""
        outcome = self.outcome
        latest = outcome.latest
        paused = asyncio.Event()
        router = providers.make_router(self.workspace.root)

        def on_trace(event: dict[str, Any]) -> None:
            kind = event.get("type")
            if kind == "run.end":
                latest.usage = event.get("usage")
            elif kind == "response.output_item.done":
                item = _surfaced_item(event)
                if item is not None:
                    deltas.put_nowait(item)
            elif kind == "log":
                deck_trees.report_warning(event)
            on_trace_event(event)

        async def on_tool(request: dict[str, Any]) -> Any:
            outcome.pause = Pause(
                request["actionCallId"], request["name"], json.dumps(request.get("args") or {})
            )
            paused.set()
            await asyncio.Event().wait()  # the run is stopped here and resumed by the client

        try:
            if self.deck is not None:
                work = self._run_deck(router, on_trace, on_tool, deltas)
            else:
                work = self._proxy(router, on_trace, deltas)
            task = asyncio.create_task(work)
            waiter = asyncio.create_task(paused.wait())
            try:
                done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the client left: the run stops with the call
                waiter.cancel()
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                raise
            if task not in done:  # a client tool was called: stop the run, keep its state
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                state, pause = latest.state, outcome.pause
                if state is not None and pause is not None:
                    # The pass that made the call was not published yet: keep the call in the
                    # conversation, so the client's function_call_output answers it.
                    call = FunctionCallItem(
                        call_id=pause.call_id, name=pause.name, arguments=pause.arguments
                    )
                    latest.state = state.model_copy(update={"items": [*state_items(state), call]})
            else:
                waiter.cancel()
                outcome.final_text = task.result()
        except asyncio.CancelledError:
            outcome.status, outcome.error_text = "canceled", "the client disconnected"
            raise
        except (ApiError, GambitError, DeckError, ProviderError) as exc:
            outcome.status, outcome.error_text = "failed", str(exc).splitlines()[0]
            code = getattr(exc, "code", None) or "run_failed"
            kind = "model_error" if isinstance(exc, ProviderError) else "server_error"
            if isinstance(exc, ApiError):
                kind = exc.type
            outcome.error = {"type": kind, "code": str(code), "message": outcome.error_text}
        except Exception as exc:  # a bug: the response fails with the cause, the stream ends
            log.exception("run %s failed", self.run_id)
            outcome.status, outcome.error_text = "failed", f"{type(exc).__name__}: {exc}"
            outcome.error = {
                "type": "server_error",
                "code": "server_error",
                "message": outcome.error_text,
            }
        finally:
            with contextlib.suppress(Exception):
                await router.aclose()
        return outcome

    async def _run_deck(
        self,
        router: Any,
        on_trace: Callable[[dict[str, Any]], None],
        on_tool: Callable[[dict[str, Any]], Any],
        deltas: asyncio.Queue[Delta],
    ) -> str:
        assert self.deck is not None
        latest = self.outcome.latest
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
            latest.state = new_state

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
            run_id=self.run_id,
            **options,
        )
        latest.state = result.state or latest.state
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

    def _saved_state(self) -> SavedState | None:
        data = session_state_dict(self.session)
        return state_from_dict(data) if data else None

    def _item(self, item: Item, state: SavedState | None) -> Any:
        """A request's input item as a conversation item (None: a message, the caller's)."""
        if isinstance(item, FunctionCallParam):
            return FunctionCallItem(call_id=item.call_id, name=item.name, arguments=item.arguments)
        if isinstance(item, FunctionCallOutputParam):
            return FunctionCallOutputItem(call_id=item.call_id, output=item.text())
        if isinstance(item, ItemReferenceParam):
            return _reference(item.id, state)
        return None

    def _conversation(self, deck: Any) -> tuple[SavedState | None, Any, Any]:
        """(state to resume, context, message) from the session and the input items."""
        state = self._saved_state()
        instructions = [self.body.instructions] if self.body.instructions else []
        conversation: list[Any] = []
        for item in self.items:
            if isinstance(item, MessageParam):
                if item.role == "system" or item.role == "developer":
                    instructions.append(item.text())
                else:
                    conversation.append(message_item(item.role, item.text()))
            elif (converted := self._item(item, state)) is not None:
                conversation.append(converted)
        if deck.kind == "compute":
            text = last_user_text(self.items)
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

    async def _proxy(
        self,
        router: Any,
        on_trace: Callable[[dict[str, Any]], None],
        deltas: asyncio.Queue[Delta],
    ) -> str:
        """A provider model: forward the request through the router and record it."""
        body = self.body
        instructions = "\n\n".join(
            [body.instructions or ""]
            + [
                i.text()
                for i in self.items
                if isinstance(i, MessageParam) and i.role in ("system", "developer")
            ]
        ).strip()
        # A continued (or routed) conversation: the upstream gets what was said before, as
        # a deck's model does.
        state = self._saved_state()
        items: list[Any] = list(state_items(state)) if state is not None else []
        for item in self.items:
            if isinstance(item, MessageParam):
                if item.role in ("user", "assistant"):
                    items.append(message_item(item.role, item.text()))
            elif (converted := self._item(item, state)) is not None:
                items.append(converted)
        request = CreateResponseRequest(
            model=body.model,
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
                for t in body.tools or []
            ]
            or None,
            tool_choice=body.tool_choice,
            max_output_tokens=body.max_output_tokens,
            params={
                key: value
                for key, value in (("temperature", body.temperature), ("top_p", body.top_p))
                if value is not None
            }
            or None,
            stream=True,
        )
        resolved = router.resolve_model(body.model, params=None, deck_path=None)
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
            for output in response.output:
                data = item_to_dict(output)
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
        self.outcome.latest.state = new_state("responses").model_copy(
            update={"items": [*items, *response.output]}
        )
        texts = [
            part.text
            for output in response.output
            if isinstance(output, MessageItem)
            for part in output.content
            if part.text  # every content part has a text (optional on UnknownContent)
        ]
        return "".join(texts)


def _reference(item_id: str, state: SavedState | None) -> Any:
    for item in state_items(state) if state is not None else []:
        if getattr(item, "id", None) == item_id:
            return item
    raise ApiError(
        400,
        f"item_reference {item_id!r} names no item of the previous response's conversation",
        code="item_not_found",
        param="input",
    )


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


def _text_of(item: MessageItem) -> str:
    return "".join(getattr(part, "text", "") or "" for part in item.content)
