"""Offline model providers: scripted replies, built-in demo models, and trace replay.

Nothing here touches the network or reads the environment. Every provider in this module
sets `offline = True`, so callers can label runs that used it (DESIGN §5).

- `ScriptedProvider` is a first-class fake (like inspect_ai's mockllm or llm's MockModel):
  queue replies with `enqueue(...)`, run the code under test, then assert on `requests` /
  `records`. An empty queue raises `ProviderError` so that a test fails loudly, unless the
  provider was built with `fallback_models=True`, in which case the built-in demo models
  (`offline/echo`) answer instead.
- `ReplayProvider` replays the `model.result` events of a recorded trace, per deck path and
  in order, so a recorded session can be re-run without a network or an API key.

Both implement the `ModelProvider` protocol (`responses`) and the optional chat-mode method
(`chat`). When `on_stream_event` is given, `responses` emits the Open Responses event
sequence (seed 000, minimal set) as JSON dicts with `sequence_number` 1..n, and always
returns the aggregated response:

    response.created
    for each output item, in order:
        response.output_item.added
        [message items: per output_text part, response.output_text.delta per chunk,
         then response.output_text.done]
        response.output_item.done
    response.completed

Streaming (and only streaming) honours chunk delays with `asyncio.sleep`, so a consumer can
observe text arriving over time. See docs/offline-provider.md.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from gambit.core.provider import (
    ChatMessage,
    ChatResult,
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ModelCallEvent,
    ModelResultEvent,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    OutputTextContent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ProviderError,
    ProviderResponse,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseError,
    ResponseFailedEvent,
    ResponseToolDefinition,
    ResponseUsage,
    SavedState,
    StreamEventCallback,
    StreamTextCallback,
    chat_request,
    chat_result_from_response,
    item_from_dict,
    item_text,
    items_from_json,
    message_item,
    messages_to_items,
    new_id,
    read_trace,
    state_from_dict,
    trace_event_from_dict,
)

__all__ = [
    "BUILTIN_MODELS",
    "Call",
    "Fail",
    "RecordedRequest",
    "RecordedResult",
    "ReplayProvider",
    "Reply",
    "ReplySpec",
    "ScriptedProvider",
    "Stream",
    "echo_reply",
    "word_chunks",
]


# --------------------------------------------------------------------------- reply types


def word_chunks(text: str) -> list[str]:
    """Split text into word-sized chunks (each word with the whitespace after it).

    `"".join(word_chunks(text)) == text` always holds; empty text gives `[]`.
    """
    if not text:
        return []
    chunks = re.findall(r"\S+\s*", text)
    leading = text[: len(text) - len(text.lstrip())]
    if not chunks:
        return [text]
    if leading:
        chunks[0] = leading + chunks[0]
    return chunks


@dataclass
class Stream:
    """Assistant text delivered as several `response.output_text.delta` events.

    `chunks` is a list of deltas, or a string that is split into word-sized chunks.
    `delay` is the pause (seconds) before each delta when streaming; None uses the
    provider's `chunk_delay`.
    """

    chunks: Sequence[str] | str
    delay: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.chunks, str):
            self.chunks = word_chunks(self.chunks)
        else:
            self.chunks = [str(chunk) for chunk in self.chunks]

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class Call:
    """A function call. `args` is a dict (serialised as JSON) or a raw JSON string (kept
    byte for byte, even when it is not valid JSON). `call_id` defaults to a fresh `call-` id.
    """

    name: str
    args: Mapping[str, Any] | str | None = None
    call_id: str | None = None

    @property
    def arguments(self) -> str:
        if self.args is None:
            return "{}"
        if isinstance(self.args, str):
            return self.args
        return json.dumps(dict(self.args), ensure_ascii=False)

    def to_item(self) -> FunctionCallItem:
        return FunctionCallItem(
            call_id=self.call_id or new_id("call"), name=self.name, arguments=self.arguments
        )


@dataclass
class Reply:
    """A reply with mixed output. Output order: reasoning item, text message, calls, extras.

    - `text`: assistant text (a `Stream` to deliver it as several deltas); None for no message.
    - `calls`: `Call`s (or `FunctionCallItem`s / item dicts).
    - `usage`: reported as is; when None, usage is estimated (words, `len(text.split())`).
    - `reasoning`: adds a `{"type": "reasoning", "summary": [{"type": "summary_text", ...}]}`
      item before the message.
    - `extra_items`: any further items (models or dicts, e.g. `ns:type` extension items).
    - `finish_reason`: "length" marks the response `incomplete` (chat mode: finish reason
      "length"); otherwise chat mode derives "tool_calls" or "stop" from the output.
    """

    text: str | Stream | None = None
    calls: Sequence[Call | FunctionCallItem | Mapping[str, Any]] = field(default_factory=list)
    usage: ResponseUsage | None = None
    reasoning: str | None = None
    extra_items: Sequence[Any] = field(default_factory=list)
    finish_reason: Literal["stop", "tool_calls", "length"] | None = None


@dataclass
class Fail:
    """Make the call raise `ProviderError(provider=<provider name>, ...)`.

    With `after_deltas` (a list of text chunks, possibly empty), the provider first streams
    `response.created`, an in-progress message item and those deltas, then emits
    `response.failed` and raises; the error's `partial_text` is the joined deltas. Without
    it, the call fails before any event (like an HTTP error). `retryable` defaults to True
    for status 408, 409, 429 and 5xx.
    """

    message: str
    status: int | None = None
    code: str | None = None
    after_deltas: Sequence[str] | None = None
    retryable: bool | None = None

    def error(self, provider: str) -> ProviderError:
        retryable = self.retryable
        if retryable is None:
            retryable = self.status is not None and (
                self.status in (408, 409, 429) or self.status >= 500
            )
        return ProviderError(
            self.message,
            provider=provider,
            status=self.status,
            code=self.code,
            retryable=retryable,
            partial_text="".join(self.after_deltas or []),
        )


ReplySpec = str | Stream | Call | Reply | Fail | Callable[[CreateResponseRequest], Any]
"""What `ScriptedProvider.enqueue` accepts. A callable receives the request and returns any
of the other forms (or an awaitable of one)."""


@dataclass
class RecordedRequest:
    """One call a provider received: the request (chat calls are converted to one), the
    state and deck path it came with, the mode, and whether it was streamed."""

    request: CreateResponseRequest
    state: SavedState | None = None
    deck_path: str | None = None
    mode: Literal["responses", "chat"] = "responses"
    streamed: bool = False


# --------------------------------------------------------------------------- built-in models


def _last_user_text(items: Iterable[Any]) -> str | None:
    last: str | None = None
    for item in items:
        if isinstance(item, MessageItem) and item.role == "user":
            last = item_text(item)
    return last


def echo_reply(request: CreateResponseRequest) -> Stream | Call:
    """`offline/echo`: `You said: <last user message text>`, or a greeting without one.

    A deck that must finish through `gambit_respond` (action and grader decks with the respond
    snippet) gets a `gambit_respond` call instead, with the smallest payload its schema
    accepts, so example trees run end to end with no API key.
    """
    text = _last_user_text(request.input)
    reply = (
        "Hello! I am the offline echo model. Send me a message and I will repeat it."
        if text is None
        else f"You said: {text}"
    )
    respond = next((t for t in request.tools or [] if t.function.name == "gambit_respond"), None)
    if respond is not None and not _already_responded(request.input):
        schema = respond.function.parameters.get("properties", {}).get("payload", {})
        return Call("gambit_respond", {"payload": _placeholder(schema, reply)})
    return Stream(reply)


def _already_responded(items: Sequence[Any]) -> bool:
    return any(isinstance(i, FunctionCallItem) and i.name == "gambit_respond" for i in items)


def _placeholder(schema: Any, text: str, depth: int = 0) -> Any:
    """The simplest value `schema` accepts (a demo stand-in, not a real answer)."""
    if not isinstance(schema, dict) or depth > 8:
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _placeholder(schema[key][0], text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {
            name: _placeholder(props.get(name, {}), text, depth + 1)
            for name in schema.get("required", [])
        }
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", low if low > 0 else 0)
        return max(low, min(0, high))
    if kind == "boolean":
        return False
    if kind == "array":
        return [
            _placeholder(schema.get("items", {}), text, depth + 1)
            for _ in range(schema.get("minItems", 0))
        ]
    if kind == "null":
        return None
    return text


def _demo(request: CreateResponseRequest) -> Any:
    from ._demo import demo_reply

    return demo_reply(request)


BUILTIN_MODELS: Mapping[str, Callable[[CreateResponseRequest], Any]] = {
    "echo": echo_reply,
    "demo": _demo,
}
"""Demo models that need no script and no API key, by name (without the `offline/` prefix)."""


def _builtin_name(model: str) -> str:
    return model.removeprefix("offline/")


# --------------------------------------------------------------------------- rendering


@dataclass
class _Plan:
    """A resolved reply: the output items, how their text is chunked, and usage."""

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


def _as_item(value: Any) -> Any:
    if isinstance(value, Call):
        return value.to_item()
    if isinstance(value, BaseModel):
        return value
    return item_from_dict(value)


async def _call(callback: Callable[[Any], Any], value: Any) -> None:
    result = callback(value)
    if inspect.isawaitable(result):
        await result


def _coerce_request(request: Any) -> CreateResponseRequest:
    if isinstance(request, CreateResponseRequest):
        return request
    return CreateResponseRequest.model_validate(request)


def _deck_label(deck_path: str | None) -> str:
    return deck_path if deck_path is not None else "<none>"


class _OfflineBase:
    """Shared machinery: recording, streaming, aggregation, chat mode."""

    name: str
    offline: bool = True

    def __init__(self, name: str, *, chunk_delay: float = 0.0):
        self.name = name
        self.offline = True
        self.chunk_delay = chunk_delay
        self.records: list[RecordedRequest] = []

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
    ) -> _Plan | Fail:
        raise NotImplementedError

    # -- ModelProvider

    async def responses(
        self,
        request: CreateResponseRequest,
        *,
        state: SavedState | None = None,
        deck_path: str | None = None,
        on_stream_event: StreamEventCallback | None = None,
    ) -> ProviderResponse:
        request = _coerce_request(request)
        self.records.append(
            RecordedRequest(
                request=request,
                state=state,
                deck_path=deck_path,
                mode="responses",
                streamed=on_stream_event is not None,
            )
        )
        outcome = await self._resolve(request, state=state, deck_path=deck_path)
        response_id = new_id("resp")
        if isinstance(outcome, Fail):
            if on_stream_event is not None and outcome.after_deltas is not None:
                await self._stream_failure(outcome, request, response_id, on_stream_event)
            raise outcome.error(self.name)
        response = self._aggregate(outcome, request, response_id)
        if on_stream_event is not None:
            await self._stream(outcome, request, response, on_stream_event)
        return ProviderResponse(response=response)

    async def chat(
        self,
        *,
        model: str,
        messages: list[ChatMessage],
        tools: list[ResponseToolDefinition] | None = None,
        stream: bool = False,
        state: SavedState | None = None,
        deck_path: str | None = None,
        on_stream_text: StreamTextCallback | None = None,
        params: dict[str, Any] | None = None,
    ) -> ChatResult:
        """Chat mode: the same replies, returned as an assistant `ChatMessage`."""
        request = chat_request(
            model=model, messages=messages, tools=tools, stream=stream, params=params
        )
        self.records.append(
            RecordedRequest(
                request=request,
                state=state,
                deck_path=deck_path,
                mode="chat",
                streamed=on_stream_text is not None,
            )
        )
        outcome = await self._resolve(request, state=state, deck_path=deck_path)
        if isinstance(outcome, Fail):
            if on_stream_text is not None:
                for chunk in outcome.after_deltas or []:
                    await self._pause(self.chunk_delay)
                    await _call(on_stream_text, chunk)
            raise outcome.error(self.name)
        if on_stream_text is not None:
            for index, item in enumerate(outcome.output):
                if not (isinstance(item, MessageItem) and item.role == "assistant"):
                    continue
                for part_index, part in enumerate(item.content):
                    if isinstance(part, OutputTextContent):
                        for chunk in outcome.chunks.get((index, part_index), [part.text]):
                            if chunk:
                                await self._pause(outcome.delay)
                                await _call(on_stream_text, chunk)
        return chat_result_from_response(self._aggregate(outcome, request, new_id("resp")))

    # -- rendering

    def _aggregate(
        self, plan: _Plan, request: CreateResponseRequest, response_id: str
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

    @staticmethod
    async def _pause(delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)

    async def _stream(
        self,
        plan: _Plan,
        request: CreateResponseRequest,
        response: CreateResponseResponse,
        emit: StreamEventCallback,
    ) -> None:
        seq = 0

        async def send(event: Any) -> None:
            nonlocal seq
            seq += 1
            event.sequence_number = seq
            await _call(emit, event.to_dict())

        created = CreateResponseResponse(
            id=response.id,
            model=response.model,
            created=response.created,
            status="in_progress",
            output=[],
        )
        await send(ResponseCreatedEvent(response=created))
        for index, item in enumerate(plan.output):
            if isinstance(item, MessageItem):
                shell = item.to_dict()
                shell["content"] = []
                shell["status"] = "in_progress"
                await send(OutputItemAddedEvent(output_index=index, item=item_from_dict(shell)))
                for part_index, part in enumerate(item.content):
                    if not isinstance(part, OutputTextContent):
                        continue
                    chunks = plan.chunks.get((index, part_index), [part.text])
                    for chunk in chunks:
                        if not chunk:
                            continue
                        await self._pause(plan.delay)
                        await send(
                            OutputTextDeltaEvent(
                                output_index=index,
                                content_index=part_index,
                                item_id=item.id,
                                delta=chunk,
                            )
                        )
                    await send(
                        OutputTextDoneEvent(
                            output_index=index,
                            content_index=part_index,
                            item_id=item.id,
                            text=part.text,
                        )
                    )
            else:
                await send(OutputItemAddedEvent(output_index=index, item=item))
            await send(OutputItemDoneEvent(output_index=index, item=item))
        await send(ResponseCompletedEvent(response=response))

    async def _stream_failure(
        self,
        fail: Fail,
        request: CreateResponseRequest,
        response_id: str,
        emit: StreamEventCallback,
    ) -> None:
        seq = 0

        async def send(event: Any) -> None:
            nonlocal seq
            seq += 1
            event.sequence_number = seq
            await _call(emit, event.to_dict())

        created = int(time.time())
        await send(
            ResponseCreatedEvent(
                response=CreateResponseResponse(
                    id=response_id, model=request.model, created=created, status="in_progress"
                )
            )
        )
        shell = message_item("assistant", "").to_dict()
        shell["content"] = []
        shell["status"] = "in_progress"
        await send(OutputItemAddedEvent(output_index=0, item=item_from_dict(shell)))
        for chunk in fail.after_deltas or []:
            await self._pause(self.chunk_delay)
            await send(OutputTextDeltaEvent(output_index=0, content_index=0, delta=chunk))
        error = ResponseError(code=fail.code, message=fail.message)
        await send(
            ResponseFailedEvent(
                error=error,
                response=CreateResponseResponse(
                    id=response_id,
                    model=request.model,
                    created=created,
                    status="failed",
                    error=error,
                ),
            )
        )


# --------------------------------------------------------------------------- scripted


class ScriptedProvider(_OfflineBase):
    """A provider that answers from a queue of scripted replies.

    ```python
    provider = ScriptedProvider()
    provider.enqueue(Call("lookup", {"id": 7}), "Order 7 shipped.")
    ...  # run the deck with this provider
    assert provider.requests[1].input[-1].output == '{"status": "shipped"}'
    ```

    Each reply is consumed by exactly one call (`responses` or `chat`). When the queue is
    empty the call raises `ProviderError`, or, with `fallback_models=True`, is answered by
    the built-in model named by the request (`offline/echo`, see `BUILTIN_MODELS`).
    """

    def __init__(
        self,
        name: str = "offline",
        *,
        chunk_delay: float = 0.0,
        fallback_models: bool = False,
        replies: Iterable[ReplySpec] = (),
    ):
        super().__init__(name, chunk_delay=chunk_delay)
        self.fallback_models = fallback_models
        self._queue: list[ReplySpec] = []
        self.enqueue(*replies)

    def enqueue(self, *replies: ReplySpec) -> ScriptedProvider:
        """Queue replies (in order); returns the provider, so calls can be chained."""
        for reply in replies:
            if not (isinstance(reply, str | Stream | Call | Reply | Fail) or callable(reply)):
                raise TypeError(
                    "a scripted reply is a str, Stream, Call, Reply, Fail or a callable "
                    f"(request) -> reply; got {type(reply).__name__}"
                )
            self._queue.append(reply)
        return self

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        return len(self._queue)

    def clear(self) -> None:
        """Drop the queued replies and the recorded requests."""
        self._queue.clear()
        self.records.clear()

    async def _resolve(
        self, request: CreateResponseRequest, *, state: SavedState | None, deck_path: str | None
    ) -> _Plan | Fail:
        if self._queue:
            spec: Any = self._queue.pop(0)
        elif self.fallback_models and _builtin_name(request.model) in BUILTIN_MODELS:
            spec = BUILTIN_MODELS[_builtin_name(request.model)]
        else:
            hint = ""
            if self.fallback_models:
                names = ", ".join(f"offline/{name}" for name in BUILTIN_MODELS)
                hint = f" or use a built-in offline model ({names})"
            raise ProviderError(
                f"no scripted reply left for model {request.model} "
                f"(deck {_deck_label(deck_path)}); enqueue more replies{hint}",
                provider=self.name,
                code="no_scripted_reply",
            )
        if callable(spec) and not isinstance(spec, str | Stream | Call | Reply | Fail):
            spec = spec(request)
            if inspect.isawaitable(spec):
                spec = await spec
        return self._plan(spec)

    def _plan(self, spec: Any) -> _Plan | Fail:
        if isinstance(spec, Fail):
            return spec
        if isinstance(spec, str | Stream | Call):
            spec = Reply(calls=[spec]) if isinstance(spec, Call) else Reply(text=spec)
        if not isinstance(spec, Reply):
            raise TypeError(
                "a scripted reply callable must return a str, Stream, Call, Reply or Fail; "
                f"got {type(spec).__name__}"
            )
        plan = _Plan(output=[], delay=self.chunk_delay, usage=spec.usage)
        plan.incomplete = spec.finish_reason == "length"
        if spec.reasoning is not None:
            plan.output.append(
                item_from_dict(
                    {
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": spec.reasoning}],
                    }
                )
            )
        if spec.text is not None:
            if isinstance(spec.text, Stream):
                text = spec.text.text
                plan.chunks[(len(plan.output), 0)] = list(spec.text.chunks)
                if spec.text.delay is not None:
                    plan.delay = spec.text.delay
            else:
                text = spec.text
            plan.output.append(message_item("assistant", text))
        plan.output.extend(_as_item(call) for call in spec.calls)
        plan.output.extend(_as_item(item) for item in spec.extra_items)
        return plan


# --------------------------------------------------------------------------- replay


@dataclass
class RecordedResult:
    """One recorded model result: the deck that made the call, its output items and usage,
    and the request input recorded on the matching `model.call` (for strict mode)."""

    deck_path: str | None
    output: list[Any]
    usage: ResponseUsage | None = None
    model: str | None = None
    call_input: list[Any] | None = None


def _result_output(event: ModelResultEvent) -> list[Any]:
    items = event.output_items
    if items is None:
        extra = (event.model_extra or {}).get("items")
        if isinstance(extra, list):
            items = items_from_json(extra)
    if items is not None:
        return list(items)
    # Old chat traces: rebuild from the assistant message and the parsed tool calls.
    output: list[Any] = []
    message = event.message
    if message is not None:
        if message.tool_calls:
            output.extend(messages_to_items([message]))
        elif message.content:
            output.append(message_item("assistant", message.content))
    if not (message is not None and message.tool_calls):
        for call in event.tool_calls or []:
            arguments = call.args if isinstance(call.args, str) else json.dumps(call.args or {})
            output.append(FunctionCallItem(call_id=call.id, name=call.name, arguments=arguments))
    return output


def _call_input(event: ModelCallEvent) -> list[Any] | None:
    if event.input_items is not None:
        return list(event.input_items)
    if event.messages is not None:
        return messages_to_items(event.messages)
    return None


class ReplayProvider(_OfflineBase):
    """Replays recorded model results, in order, per deck path.

    Build it with `from_trace` (a JSONL trace file or a list of events) or `from_state` (a
    SavedState with `traces`). Each call made by deck `D` gets the next result recorded for
    `D`, so interleaved nested action decks replay correctly. When a deck makes more calls
    than were recorded, the call raises `ProviderError`.

    `strict=True` also compares the request's last user message with the one in the
    recorded `model.call` input and raises `ProviderError(code="replay_diverged")` when they
    differ (results without a recorded call are not checked).

    Deck paths are matched exactly; failing that, a recorded deck path with the same
    normalised path, or the only recorded deck path with the same file name, or (for a
    request without a deck path, or a trace with a single deck) the only recorded deck.
    """

    def __init__(
        self,
        results: Iterable[RecordedResult],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
        name: str = "offline-replay",
    ):
        super().__init__(name, chunk_delay=chunk_delay)
        self.strict = strict
        self.recorded: dict[str | None, list[RecordedResult]] = {}
        for result in results:
            self.recorded.setdefault(result.deck_path, []).append(result)
        self._used: dict[str | None, int] = dict.fromkeys(self.recorded, 0)

    @classmethod
    def from_trace(
        cls,
        source: str | os.PathLike[str] | Iterable[Any],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
    ) -> ReplayProvider:
        """Collect every `model.result` of a trace file (JSON lines) or list of events."""
        if isinstance(source, str | os.PathLike):
            events = read_trace(source)
        else:
            events = [
                trace_event_from_dict(event) if isinstance(event, Mapping) else event
                for event in source
            ]
        results: list[RecordedResult] = []
        open_calls: dict[tuple[str | None, str | None], ModelCallEvent] = {}
        for event in events:
            if isinstance(event, ModelCallEvent):
                open_calls[(event.deck_path, event.action_call_id)] = event
            elif isinstance(event, ModelResultEvent):
                call = open_calls.pop((event.deck_path, event.action_call_id), None)
                results.append(
                    RecordedResult(
                        deck_path=event.deck_path,
                        output=_result_output(event),
                        usage=event.usage,
                        model=event.model,
                        call_input=_call_input(call) if call is not None else None,
                    )
                )
        return cls(results, strict=strict, chunk_delay=chunk_delay)

    @classmethod
    def from_state(
        cls,
        state: SavedState | Mapping[str, Any],
        *,
        strict: bool = False,
        chunk_delay: float = 0.0,
    ) -> ReplayProvider:
        """Replay the traces stored in a SavedState (`traces`)."""
        if not isinstance(state, SavedState):
            state = state_from_dict(state)
        if not state.traces:
            raise ProviderError(
                f"saved state {state.run_id} has no traces to replay",
                provider="offline-replay",
                code="no_traces",
            )
        return cls.from_trace(state.traces, strict=strict, chunk_delay=chunk_delay)

    def remaining(self, deck_path: str | None = None) -> int:
        """How many recorded results are left for a deck (all decks when None)."""
        if deck_path is None:
            return sum(len(v) - self._used[k] for k, v in self.recorded.items())
        key = self._match(deck_path)
        return 0 if key is _NO_MATCH else len(self.recorded[key]) - self._used[key]

    def _match(self, deck_path: str | None) -> Any:
        if deck_path in self.recorded:
            return deck_path
        keys = list(self.recorded)
        if deck_path is not None:
            norm = os.path.normpath(deck_path)
            same = [k for k in keys if k is not None and os.path.normpath(k) == norm]
            if len(same) == 1:
                return same[0]
            base = os.path.basename(norm)
            same = [k for k in keys if k is not None and os.path.basename(k) == base]
            if len(same) == 1:
                return same[0]
        if len(keys) == 1 and (deck_path is None or keys[0] is None):
            return keys[0]
        return _NO_MATCH

    async def _resolve(
        self, request: CreateResponseRequest, *, state: SavedState | None, deck_path: str | None
    ) -> _Plan | Fail:
        key = self._match(deck_path)
        if key is _NO_MATCH:
            decks = ", ".join(_deck_label(k) for k in self.recorded) or "none"
            raise ProviderError(
                f"no model results were recorded for deck {_deck_label(deck_path)} "
                f"(recorded decks: {decks})",
                provider=self.name,
                code="replay_exhausted",
            )
        results = self.recorded[key]
        index = self._used[key]
        if index >= len(results):
            raise ProviderError(
                f"deck {_deck_label(key)} made call {index + 1}, but the trace recorded only "
                f"{len(results)} model call{'s' if len(results) != 1 else ''} for it",
                provider=self.name,
                code="replay_exhausted",
            )
        self._used[key] = index + 1
        result = results[index]
        if self.strict and result.call_input is not None:
            expected = _last_user_text(result.call_input)
            got = _last_user_text(request.input)
            if expected != got:
                raise ProviderError(
                    f"replay diverged for deck {_deck_label(key)} at call {index + 1}: "
                    f"recorded last user message {expected!r}, got {got!r}",
                    provider=self.name,
                    code="replay_diverged",
                )
        plan = _Plan(output=list(result.output), delay=self.chunk_delay, usage=result.usage)
        for item_index, item in enumerate(plan.output):
            if isinstance(item, MessageItem):
                for part_index, part in enumerate(item.content):
                    if isinstance(part, OutputTextContent):
                        plan.chunks[(item_index, part_index)] = word_chunks(part.text)
        return plan


_NO_MATCH = object()
