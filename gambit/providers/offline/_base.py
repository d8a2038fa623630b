"""The machinery the offline providers share: recording, event rendering, chat mode.

An offline provider subclasses `OfflineBase` and implements one method, `_resolve(request,
*, state, deck_path)`, which returns a `Plan` (the output items, how their text is split into
deltas, the pause before each delta, usage) or a failure (`scripted.Fail`). The base class
does the rest, identically for every offline provider:

- records every call (`records`, `requests`, `last_request`) for tests to assert on;
- `responses(...)`: aggregates the plan into a `CreateResponseResponse` (usage estimated
  from word counts when the plan has none) and, when `on_stream_event` is given, emits the
  Open Responses event sequence with `sequence_number` 1..n:

      response.created
      for each output item, in order:
          response.output_item.added
          [message items: per output_text part, response.output_text.delta per chunk,
           then response.output_text.done]
          response.output_item.done
      response.completed

  A failure with `after_deltas` streams those deltas and `response.failed` before raising.
- `chat(...)`: the same plan as a chat-mode `ChatResult`, text deltas to `on_stream_text`.

Streaming (and only streaming) pauses before each delta. The pause goes through `sleep`
(`asyncio.sleep` unless the constructor was given another coroutine function), so a test can
record the pauses instead of waiting them out.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gambit.core.provider import (
    BaseChatProvider,
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputTextContent,
    ProviderCall,
    ProviderResponse,
    ResponseError,
    ResponseEventEncoder,
    ResponseUsage,
    SavedState,
    StreamEventCallback,
    item_text,
    new_id,
    text_forwarder,
)

from .replies import Fail

__all__ = [
    "OfflineBase",
    "Plan",
    "RecordedRequest",
    "Sleep",
    "deck_label",
    "last_user_text",
]

Sleep = Callable[[float], Awaitable[None]]
"""How a provider pauses between streamed deltas (`asyncio.sleep` by default)."""


@dataclass
class RecordedRequest:
    """One call a provider received: the request (chat calls are converted to one), the
    state and deck path it came with, the mode, and whether it was streamed."""

    request: CreateResponseRequest
    state: SavedState | None = None
    deck_path: str | None = None
    mode: Literal["responses", "chat"] = "responses"
    streamed: bool = False


def last_user_text(items: Iterable[Any]) -> str | None:
    """The text of the last user message among `items`, or None when there is none."""
    last: str | None = None
    for item in items:
        if isinstance(item, MessageItem) and item.role == "user":
            last = item_text(item)
    return last


@dataclass
class Plan:
    """A resolved reply, what `_resolve` returns for a call that succeeds: the output items,
    how the text of each (item, content part) is split into deltas, the pause before each
    delta, usage (None: estimated), and whether the response is `incomplete`."""

    output: list[Any]
    chunks: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    delay: float = 0.0
    usage: ResponseUsage | None = None
    incomplete: bool = False


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _item_words(item: Any) -> int:
    if isinstance(item, MessageItem):
        return _words(item_text(item))
    if isinstance(item, FunctionCallItem):
        return _words(item.name) + _words(item.arguments)
    if isinstance(item, FunctionCallOutputItem):
        return _words(item.output)
    return 0


def _estimate_usage(request: CreateResponseRequest, output: Sequence[Any]) -> ResponseUsage:
    prompt = _words(request.instructions) + sum(_item_words(item) for item in request.input)
    completion = sum(_item_words(item) for item in output)
    return ResponseUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


async def _call(callback: Callable[[Any], Any], value: Any) -> None:
    result = callback(value)
    if inspect.isawaitable(result):
        await result


async def _send(emit: Callable[[Any], Any], events: list[dict[str, Any]]) -> None:
    """Hand a stream's events (numbered by their encoder) to the callback, in order."""
    for event in events:
        await _call(emit, event)


def _coerce_request(request: Any) -> CreateResponseRequest:
    if isinstance(request, CreateResponseRequest):
        return request
    return CreateResponseRequest.model_validate(request)


def deck_label(deck_path: str | None) -> str:
    """A deck path for an error message (`<none>` for a call made without one)."""
    return deck_path if deck_path is not None else "<none>"


class OfflineBase(BaseChatProvider):
    """Shared machinery: recording, streaming, aggregation, chat mode (see the module doc).

    `chunk_delay` is the default pause before each streamed delta; `sleep` is how the pause
    is taken (`asyncio.sleep` when None; tests pass a recorder).
    """

    name: str
    offline: bool = True

    def __init__(self, name: str, *, chunk_delay: float = 0.0, sleep: Sleep | None = None):
        self.name = name
        self.offline = True
        self.chunk_delay = chunk_delay
        self.records: list[RecordedRequest] = []
        self._sleep: Sleep = sleep if sleep is not None else asyncio.sleep

    # -- recording

    @property
    def requests(self) -> list[CreateResponseRequest]:
        """Every request received, in order (chat calls appear as equivalent requests)."""
        return [record.request for record in self.records]

    @property
    def last_request(self) -> CreateResponseRequest | None:
        return self.records[-1].request if self.records else None

    # -- to be provided by subclasses

    async def _resolve(
        self, request: CreateResponseRequest, *, state: SavedState | None, deck_path: str | None
    ) -> Plan | Fail:
        raise NotImplementedError

    # -- ModelProvider, ChatProvider (through BaseChatProvider)

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        """Resolve the reply and stream it: the caller's callback means "stream"
        (`request.stream` is not consulted), its events in responses mode, its text deltas in
        chat mode."""
        request = _coerce_request(call.request)
        emit: StreamEventCallback | None = call.on_stream_event
        if call.mode == "chat":
            emit = text_forwarder(call.on_stream_text) if call.on_stream_text else None
        self.records.append(
            RecordedRequest(
                request=request,
                state=call.state,
                deck_path=call.deck_path,
                mode=call.mode,
                streamed=emit is not None,
            )
        )
        outcome = await self._resolve(request, state=call.state, deck_path=call.deck_path)
        response_id = new_id("resp")
        if not isinstance(outcome, Plan):
            if emit is not None and outcome.after_deltas is not None:
                await self._stream_failure(outcome, request, response_id, emit)
            raise outcome.error(self.name)
        response = self._aggregate(outcome, request, response_id)
        if emit is not None:
            await self._stream(outcome, request, response, emit)
        return ProviderResponse(response=response)

    # -- rendering

    def _aggregate(
        self, plan: Plan, request: CreateResponseRequest, response_id: str
    ) -> CreateResponseResponse:
        extra: dict[str, Any] = {}
        if plan.incomplete:
            extra["incomplete_details"] = {"reason": "max_output_tokens"}
        return CreateResponseResponse(
            id=response_id,
            model=request.model,
            created=int(time.time()),
            status="incomplete" if plan.incomplete else "completed",
            output=list(plan.output),
            usage=plan.usage or _estimate_usage(request, plan.output),
            **extra,
        )

    async def _pause(self, delay: float) -> None:
        if delay > 0:
            await self._sleep(delay)

    async def _stream(
        self,
        plan: Plan,
        request: CreateResponseRequest,
        response: CreateResponseResponse,
        emit: StreamEventCallback,
    ) -> None:
        encoder = ResponseEventEncoder(full=False)
        created = CreateResponseResponse(
            id=response.id,
            model=response.model,
            created=response.created,
            status="in_progress",
            output=[],
        )
        await _send(emit, encoder.created(created.to_dict()))
        for index, item in enumerate(plan.output):
            if not isinstance(item, MessageItem):
                await _send(emit, encoder.item(item.to_dict()))
                continue
            final = item.to_dict()
            _, opened = encoder.open_message(final)
            await _send(emit, opened)
            last_text = ""
            for part_index, part in enumerate(item.content):
                if not isinstance(part, OutputTextContent):
                    continue
                if part_index:
                    await _send(emit, encoder.start_part(index, part_index))
                for chunk in plan.chunks.get((index, part_index), [part.text]):
                    if chunk:
                        await self._pause(plan.delay)
                        await _send(
                            emit, encoder.text_delta(index, chunk, content_index=part_index)
                        )
                last_text = part.text
            await _send(emit, encoder.close(index, text=last_text, item=final))
        await _send(emit, [encoder.terminal(response.to_dict())])

    async def _stream_failure(
        self,
        fail: Fail,
        request: CreateResponseRequest,
        response_id: str,
        emit: StreamEventCallback,
    ) -> None:
        encoder = ResponseEventEncoder(full=False)
        created = int(time.time())
        started = CreateResponseResponse(
            id=response_id, model=request.model, created=created, status="in_progress"
        )
        await _send(emit, encoder.created(started.to_dict()))
        index, opened = encoder.open_message()
        await _send(emit, opened)
        for chunk in fail.after_deltas or []:
            await self._pause(self.chunk_delay)
            await _send(emit, encoder.text_delta(index, chunk))
        error = ResponseError(code=fail.code, message=fail.message)
        failed = CreateResponseResponse(
            id=response_id, model=request.model, created=created, status="failed", error=error
        )
        await _send(emit, [encoder.terminal(failed.to_dict(), error=error.to_dict())])
