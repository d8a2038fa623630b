"""An LLM deck's execution: the model pass loop.

`execute_deck` makes one `_LlmExecution` per LLM deck it runs (root, action or handler).
`start` builds the conversation, then loops, at most `maxPasses` times:

1. `_model_pass` sends the conversation (Open Responses items; chat messages in chat mode)
   with the deck's tools to the provider, traces `model.call`/`model.result` and streams
   through a `_StreamTracer`;
2. when the model called tools, `_tool_batch` (in `_tool_calls`) dispatches them; a
   `gambit_respond` or `gambit_end` call finishes the deck, otherwise the loop goes on with
   the results;
3. when the model answered with text, that text is validated against the responseSchema
   and is the deck's output (a `respond` deck keeps looping until `gambit_respond`).

The root conversation is published to `on_state` after every pass. The class is assembled
from mixins: `_RequestParts` (`_request`: tools, output format, model), `_ToolCalls`
(`_tool_calls`) and `_Handlers` (`_handlers`: onIdle, onBusy, onError).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from .._deck import Deck
from .._ids import new_id
from .._messages import ChatMessage, items_to_messages
from .._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ResponseTextConfig,
    ResponseToolDefinition,
    ResponseUsage,
    construct,
    item_to_dict,
    message_item,
)
from .._permissions import EffectivePermissions
from .._provider import ChatProvider, ProviderError, ProviderResponse
from .._state import SavedState, state_items
from .._trace import (
    DeckEndEvent,
    DeckStartEvent,
    MessageUserEvent,
    ModelCallEvent,
    ModelResultEvent,
    MonologEvent,
    ToolCallEvent,
    ToolResultEvent,
    _TraceBase,
)
from ._common import _MISSING, CONTEXT_TOOL, RunError, _json, _Paused
from ._context import _ContextKeeper
from ._limits import DEFAULT_MAX_PASSES, _Limits, _with_deadline
from ._request import _RequestParts
from ._run import _RootState, _Run, _TracedItems
from ._stream import _StreamTracer
from ._tool_calls import _parse_args, _ToolCall, _ToolCalls
from ._validation import _validate_output, check_extension_item


@dataclass
class _PassOutput:
    """What one model pass produced: its items, its text, its tool calls, its usage, and why
    it stopped short (`incomplete_details`, e.g. `{"reason": "max_output_tokens"}`) if it
    did."""

    items: list[Any]
    text: str
    calls: list[_ToolCall]
    usage: ResponseUsage | None
    incomplete: dict[str, Any] | None = None


class _LlmExecution(_ToolCalls, _RequestParts):
    """One execution of an LLM deck (see the module docstring)."""

    def __init__(
        self,
        run: _Run,
        deck: Deck,
        depth: int,
        parent_action_call_id: str | None,
        limits: _Limits,
        root_state: _RootState | None,
        permissions: EffectivePermissions | None = None,
    ):
        self.run = run
        self.deck = deck
        self.permissions = permissions
        self.depth = depth
        self.parent = parent_action_call_id
        self.limits = limits
        self.root_state = root_state
        self.action_call_id = new_id("action")
        self.items: list[Any] = []
        # The trace dicts of `items`: the root conversation's are kept with its state.
        self.traced = root_state.traced if root_state is not None else _TracedItems()
        self._traced_tools: list[dict[str, Any]] | None = None
        self.last_activity = limits.clock.monotonic()
        self.last_child_result: Any = None
        self.compaction = _ContextKeeper(self)

    def _publish(self) -> None:
        if self.root_state is not None:
            self.root_state.publish(self.items)

    def trace_model_event(self, event: type[_TraceBase], /, **fields: Any) -> None:
        """A model.call, model.result or model.stream event of this deck's execution."""
        self.run.trace(
            event,
            action_call_id=self.action_call_id,
            deck_path=self.deck.path,
            parent_action_call_id=self.parent,
            **fields,
        )

    def _trace_deck_end(self) -> None:
        self.run.trace(
            DeckEndEvent,
            deck_path=self.deck.path,
            action_call_id=self.action_call_id,
            parent_action_call_id=self.parent,
        )

    async def start(self, context: Any, message: Any, resumed: bool) -> Any:
        deck = self.deck
        if resumed and self.root_state is not None:
            self.items = list(state_items(self.root_state.state))
        else:
            if deck.system_prompt:
                self.items.append(message_item("system", deck.system_prompt))
            if context is not _MISSING:
                self._inject_context(context)
        if message is not None:
            text = (
                message
                if isinstance(message, str)
                else json.dumps(message, indent=2, ensure_ascii=False)
            )
            self.items.append(message_item("user", text))
            self.run.trace(
                MessageUserEvent,
                action_call_id=self.action_call_id,
                deck_path=deck.path,
                message={"role": "user", "content": text},
                parent_action_call_id=self.parent,
            )
        tools = self._tools()
        text_config = self._text_config()
        self.run.trace(
            DeckStartEvent,
            deck_path=deck.path,
            action_call_id=self.action_call_id,
            parent_action_call_id=self.parent,
            permissions=self.permissions.to_json()
            if self.permissions is not None and self._builtin_tools()
            else None,
        )
        self._publish()
        max_passes = self.limits.guardrails.max_passes or DEFAULT_MAX_PASSES
        for _ in range(max_passes):
            self.limits.check(deck.path)
            output = await self._model_pass(tools, text_config)
            if self.depth == 0:  # the root's last pass says whether the run's answer is whole
                self.run.incomplete = output.incomplete
            self.limits.check(deck.path)
            if output.calls:
                if output.text:
                    self.items.append(message_item("assistant", output.text))
                self._append_supplemental(output.items)
                finished = await self._tool_batch(output.calls)
                self._publish()
                if isinstance(finished, _Paused):  # the host answers the calls later
                    return finished
                if finished is not _MISSING:
                    self._trace_deck_end()
                    return finished
                continue
            self._append_supplemental(output.items)
            if output.text:
                self.items.append(message_item("assistant", output.text))
            self._publish()
            if self.parent is not None and output.text:
                self.run.trace(
                    MonologEvent,
                    deck_path=deck.path,
                    action_call_id=self.action_call_id,
                    parent_action_call_id=self.parent,
                    content=output.text,
                )
            if deck.respond:
                continue  # only gambit_respond completes a respond deck
            result = _validate_output(
                deck.response_schema, output.text, deck_path=deck.path, is_root=self.depth == 0
            )
            self._trace_deck_end()
            return result
        raise RunError(
            f"Model did not complete within guardrails ({max_passes} passes) in {deck.path}",
            code="max_passes",
            deck_path=deck.path,
        )

    def _inject_context(self, context: Any) -> None:
        call_id = new_id("call")
        self.run.trace(
            ToolCallEvent,
            action_call_id=call_id,
            name=CONTEXT_TOOL,
            args={},
            tool_kind="internal",
            parent_action_call_id=self.action_call_id,
        )
        self.items.append(FunctionCallItem(call_id=call_id, name=CONTEXT_TOOL, arguments="{}"))
        self.items.append(FunctionCallOutputItem(call_id=call_id, output=_json(context)))
        self.run.trace(
            ToolResultEvent,
            action_call_id=call_id,
            name=CONTEXT_TOOL,
            result=context,
            tool_kind="internal",
            parent_action_call_id=self.action_call_id,
        )

    def _append_supplemental(self, output_items: list[Any]) -> None:
        """Keep reasoning and extension items the model produced (nothing is dropped); an item
        of a type the deck declares in `[[responseItemExtensions]]` must match its dataSchema."""
        for index, item in enumerate(output_items):
            if not isinstance(item, MessageItem | FunctionCallItem | FunctionCallOutputItem):
                check_extension_item(self.deck, item, f"response.output[{index}]")
                self.items.append(item)

    def _tool_dicts(self, tools: list[ResponseToolDefinition]) -> list[dict[str, Any]]:
        """The trace dicts of the tools, which are the same on every pass of the execution."""
        if self._traced_tools is None:
            self._traced_tools = [t.to_dict() for t in tools]
        return list(self._traced_tools)

    async def _model_pass(
        self, tools: list[ResponseToolDefinition], text: ResponseTextConfig | None
    ) -> _PassOutput:
        run = self.run
        resolved = self._resolve_model()
        provider = resolved.provider or run.provider
        # Everything here is already validated (items, tools, text): constructing without
        # validation keeps a pass flat as the conversation grows (validating 300 items again
        # cost 0.1 ms per call).
        request = construct(
            CreateResponseRequest,
            model=resolved.model,
            input=self.compaction.view(self.items),
            tools=tools or None,
            text=text,
            stream=run.stream or None,
            params=resolved.params,
            instructions=run.instructions if self.depth == 0 else None,
        )
        # Counted (and compacted) when the model's context window is known (`_context`).
        request = await self.compaction.fit(request, resolved, provider)
        counted = self.compaction.count
        budget = self.compaction.budget
        self.trace_model_event(
            ModelCallEvent,
            model=resolved.model,
            provider=getattr(provider, "name", None),
            offline=True if getattr(provider, "offline", False) else None,
            stream=run.stream,
            message_count=len(request.input),
            tool_count=len(tools),
            # Built only when a sink listens: serialising the whole conversation is the
            # costliest part of a pass at 50 turns.
            tools=self._tool_dicts(tools) if run.on_trace is not None else None,
            mode=run.mode,
            items=self.traced.of(request.input) if run.on_trace is not None else None,
            params=dict(resolved.params) if resolved.params else None,
            context_tokens=budget.to_json(counted) if budget and counted else None,
        )
        started = time.monotonic()
        streamer = _StreamTracer(self, resolved.model)
        state = self.root_state.state if self.root_state is not None else None
        if run.mode == "chat" and isinstance(provider, ChatProvider):
            coro = self._chat_call(provider, request, state, streamer)
        else:
            coro = provider.responses(
                request,
                state=state,
                deck_path=self.deck.path,
                on_stream_event=streamer.on_event
                if (run.stream or run.on_trace or run.on_stream_text)
                else None,
            )
        idle = self._idle_watcher()
        try:
            result: ProviderResponse = await _with_deadline(coro, self.limits, self.deck.path)
        finally:
            if idle is not None:
                idle.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await idle
        streamer.finish(result.response)
        if result.response.status == "failed":
            code, message = _error_fields(result.response.error)
            raise ProviderError(
                (message or "the response failed") + f" (model {resolved.model})",
                provider=getattr(provider, "name", "provider"),
                code=code,
                partial_text=streamer.text(),
            )
        if result.updated_state is not None and self.root_state is not None:
            self.root_state.state.meta = result.updated_state.meta or self.root_state.state.meta
        output_items = list(result.response.output)
        reply = "".join(
            part.text or ""  # an output_text part always has text; UnknownContent's is optional
            for item in output_items
            if isinstance(item, MessageItem) and item.role == "assistant"
            for part in item.content
            if getattr(part, "type", None) == "output_text"
        )
        calls = [
            _ToolCall(item.call_id, item.name, item.arguments, _parse_args(item.arguments))
            for item in output_items
            if isinstance(item, FunctionCallItem)
        ]
        run.usage.add(result.response.usage)
        incomplete = result.response.incomplete_details_or_none()
        if run.on_trace is not None:  # the dicts below are built for a sink only
            self._trace_result(provider, resolved.model, calls, reply, result, started, incomplete)
        self.last_activity = self.limits.clock.monotonic()
        return _PassOutput(output_items, reply, calls, result.response.usage, incomplete)

    def _trace_result(
        self,
        provider: Any,
        model: str,
        calls: list[_ToolCall],
        text: str,
        result: ProviderResponse,
        started: float,
        incomplete: dict[str, Any] | None,
    ) -> None:
        response = result.response
        self.trace_model_event(
            ModelResultEvent,
            model=model,
            provider=getattr(provider, "name", None),
            offline=True if getattr(provider, "offline", False) else None,
            finish_reason=_finish_reason(calls, incomplete),
            incomplete_details=incomplete,
            message={"role": "assistant", "content": text or None},
            tool_calls=[{"id": c.call_id, "name": c.name, "args": c.args} for c in calls] or None,
            usage=response.usage.to_dict() if response.usage else None,
            mode=self.run.mode,
            output=[item_to_dict(i) for i in response.output],
            response_id=response.id,
            duration_ms=int((time.monotonic() - started) * 1000),
            context_tokens=self.compaction.reported(response.usage),
        )

    async def _chat_call(
        self,
        provider: Any,
        request: CreateResponseRequest,
        state: SavedState | None,
        streamer: _StreamTracer,
    ) -> ProviderResponse:
        messages = items_to_messages(request.input, fold_into_text=True)
        if request.instructions:  # this request's only (the Responses API's `instructions`)
            messages.insert(0, ChatMessage(role="system", content=request.instructions))
        result = await provider.chat(
            model=request.model,
            messages=messages,
            tools=request.tools,
            stream=bool(request.stream),
            state=state,
            deck_path=self.deck.path,
            on_stream_text=streamer.on_chat_text,
            params=request.params,
        )
        if result.finish_reason == "tool_calls" and not result.tool_calls:
            raise RunError(
                "Model requested tool_calls but provided none",
                code="provider_protocol",
                deck_path=self.deck.path,
            )
        if (
            result.finish_reason == "length"
            and not result.message.content
            and not result.tool_calls
        ):
            raise RunError(
                "Model stopped early (length) with no content",
                code="provider_protocol",
                deck_path=self.deck.path,
            )
        items: list[Any] = []
        if result.message.content:
            items.append(message_item("assistant", result.message.content))
        for call in result.tool_calls:
            arguments = (
                call.arguments if call.arguments not in (None, "", "{}") else _json(call.args)
            )
            items.append(FunctionCallItem(call_id=call.id, name=call.name, arguments=arguments))
        # A completion cut short by its token limit is an incomplete response, as the
        # Responses API reports one.
        incomplete = {"reason": "max_output_tokens"} if result.finish_reason == "length" else None
        response = CreateResponseResponse(
            id=new_id("resp"),
            status="incomplete" if incomplete else "completed",
            output=items,
            usage=result.usage,
            incomplete_details=incomplete,
        )
        return ProviderResponse(response=response, updated_state=result.updated_state)


def _finish_reason(calls: list[_ToolCall], incomplete: dict[str, Any] | None) -> str:
    """The trace's `finishReason`: `length` for a pass cut at its token limit (another reason
    as the provider gave it), else `tool_calls` or `stop`."""
    if incomplete is not None:
        reason = incomplete["reason"]
        return "length" if reason == "max_output_tokens" else reason
    return "tool_calls" if calls else "stop"


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    """`(code, message)` of a response error, whether a model or a plain dict."""
    if isinstance(error, dict):
        return error.get("code"), error.get("message")
    return getattr(error, "code", None), getattr(error, "message", None)
