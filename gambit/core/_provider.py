"""The model provider contract (docs/providers.md), and the errors providers raise.

`responses` is canonical. `chat` is optional, for chat mode (`GAMBIT_CHAT_FALLBACK=1`); a
provider without it is driven in chat mode through the mapping of docs/providers.md,
"Chat mode".
Cancellation is asyncio cancellation: a provider must let `CancelledError` propagate and
close what it opened.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ._errors import GambitError
from ._messages import ChatMessage, ToolCall, ToolCallFunction, messages_to_items
from ._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    MessageItem,
    OutputTextContent,
    ResponseToolDefinition,
    ResponseUsage,
)
from ._state import SavedState

# Events are the provider's JSON objects (a `type` key plus fields), passed through as
# received so that nothing a provider sends is lost.
StreamEventCallback = Callable[[dict[str, Any]], None]
StreamTextCallback = Callable[[str], None]


@dataclass
class ProviderResponse:
    """What `responses` returns: the aggregated response, and optionally a new state.

    `updated_state` lets a provider keep its own bookkeeping (a thread id in `meta`, say)
    across passes.
    """

    response: CreateResponseResponse
    updated_state: SavedState | None = None


@dataclass
class ToolCallRequest:
    """A tool call the model asked for in chat mode: its id, the tool and the parsed arguments."""

    id: str
    name: str
    args: dict[str, Any]
    arguments: str = "{}"  # the raw JSON string, kept for fidelity


@dataclass
class ChatResult:
    """What a chat-mode provider returns for one call."""

    message: ChatMessage
    finish_reason: Literal["stop", "tool_calls", "length"]
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    updated_state: SavedState | None = None
    usage: ResponseUsage | None = None


@runtime_checkable
class ModelProvider(Protocol):
    """A model provider. `name` appears in traces and errors; `offline` labels fakes."""

    name: str
    offline: bool

    async def responses(
        self,
        request: CreateResponseRequest,
        *,
        state: SavedState | None = None,
        deck_path: str | None = None,
        on_stream_event: StreamEventCallback | None = None,
    ) -> ProviderResponse: ...


@runtime_checkable
class ChatProvider(Protocol):
    """Optional chat-mode method, kept for compatibility with chat-only models."""

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
    ) -> ChatResult: ...


@dataclass
class ProviderCall:
    """One call to a provider, as `BaseProvider.execute` receives it: the request (a chat-mode
    call converted to one, `chat_request`), the conversation's state and deck, the mode, and
    where streamed output goes (`on_event`)."""

    request: CreateResponseRequest
    state: SavedState | None = None
    deck_path: str | None = None
    mode: Literal["responses", "chat"] = "responses"
    on_stream_event: StreamEventCallback | None = None  # responses mode: the caller's events
    on_stream_text: StreamTextCallback | None = None  # chat mode: the caller's text deltas
    messages: list[ChatMessage] | None = None  # chat mode: the messages as the caller gave them

    @property
    def on_event(self) -> StreamEventCallback | None:
        """Where the provider sends its stream events: the caller's callback, or in chat mode
        (for a streamed request) one that hands the text deltas to `on_stream_text`."""
        if self.mode == "responses":
            return self.on_stream_event
        if self.on_stream_text is None or not self.request.stream:
            return None
        return text_forwarder(self.on_stream_text)


def text_forwarder(on_text: StreamTextCallback) -> StreamEventCallback:
    """A stream-event callback that hands each `response.output_text.delta` to `on_text`."""

    def forward(event: dict[str, Any]) -> Any:
        if event.get("type") == "response.output_text.delta" and isinstance(
            event.get("delta"), str
        ):
            return on_text(event["delta"])  # an async callback's awaitable, for the caller
        return None

    return forward


class BaseProvider:
    """A provider that owns the `ModelProvider` surface: `responses(...)` hands the call to
    `execute`, the one method a subclass implements (docs/providers.md, "Writing a provider
    plugin"). Implementing the protocol directly works as well; this saves the signature."""

    name: str = ""
    offline: bool = False

    async def responses(
        self,
        request: CreateResponseRequest,
        *,
        state: SavedState | None = None,
        deck_path: str | None = None,
        on_stream_event: StreamEventCallback | None = None,
    ) -> ProviderResponse:
        call = ProviderCall(
            request, state=state, deck_path=deck_path, on_stream_event=on_stream_event
        )
        return await self.execute(call)

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        """Answer one call (`call.mode` says which surface it came through)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement execute()")


class BaseChatProvider(BaseProvider):
    """A `BaseProvider` that also serves chat mode (`ChatProvider`): `chat(...)` converts the
    messages to a request (`chat_request`), hands it to `execute` in chat mode, and returns
    the answer as a `ChatResult`."""

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
        request = chat_request(
            model=model, messages=messages, tools=tools, stream=stream, params=params
        )
        call = ProviderCall(
            request,
            state=state,
            deck_path=deck_path,
            mode="chat",
            on_stream_text=on_stream_text,
            messages=messages,
        )
        return await self.execute_chat(call)

    async def execute_chat(self, call: ProviderCall) -> ChatResult:
        """A chat-mode call: `execute`'s answer as a `ChatResult` (a router overrides it, to
        hand the call to a provider's own `chat`)."""
        result = await self.execute(call)
        return chat_result_from_response(result.response, result.updated_state)


@dataclass
class ResolvedModel:
    """A model chosen from a deck's fallback list, with the parameters and provider it uses."""

    model: str
    params: dict[str, Any] | None = None
    provider: ModelProvider | None = None  # None: use the run's provider


class ModelResolver(Protocol):
    """Chooses a model from a deck's fallback list (aliases, availability).

    `model` is a string when there is one model (a deck's single `model`, `--model-force`,
    or the default model) and a list only when the deck gives an ordered fallback list of
    several, as the TypeScript Gambit passes it; an empty list when the deck names no model
    and no default is given (a resolver may choose one, or raise `ModelNotAvailableError`).
    """

    def resolve_model(
        self, model: str | list[str], *, params: dict[str, Any] | None, deck_path: str | None
    ) -> ResolvedModel: ...


class ProviderError(GambitError):
    """A provider call failed. The message says what happened and which provider.

    `partial_text` holds text that streamed before the failure (it is also in the trace),
    so callers can keep it. `retryable` says whether a retry could help.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        code: str | None = None,
        param: str | None = None,
        retryable: bool = False,
        partial_text: str = "",
    ):
        self.provider = provider
        self.status = status
        self.code = code
        self.param = param
        self.retryable = retryable
        self.partial_text = partial_text
        super().__init__(f"{provider}: {message}")


class ModelNotAvailableError(GambitError):
    """No candidate in a model list can be served; the message lists why each was skipped."""


def chat_request(
    *,
    model: str,
    messages: list[ChatMessage],
    tools: list[ResponseToolDefinition] | None = None,
    stream: bool = False,
    params: dict[str, Any] | None = None,
) -> CreateResponseRequest:
    """A chat-mode call as a Responses request (its messages mapped to items)."""
    return CreateResponseRequest(
        model=model,
        input=messages_to_items(messages),
        tools=tools or None,
        stream=stream or None,
        params=params or None,
    )


def chat_result_from_response(
    response: CreateResponseResponse, updated_state: SavedState | None = None
) -> ChatResult:
    """The chat-mode view of a response: its text and its tool calls."""
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for item in response.output:
        if isinstance(item, MessageItem) and item.role == "assistant":
            texts.extend(p.text for p in item.content if isinstance(p, OutputTextContent))
        elif isinstance(item, FunctionCallItem):
            try:
                args = json.loads(item.arguments) if item.arguments.strip() else {}
            except ValueError:
                args = {}
            calls.append(
                ToolCallRequest(
                    id=item.call_id,
                    name=item.name,
                    args=args if isinstance(args, dict) else {},
                    arguments=item.arguments,
                )
            )
    text = "".join(texts)
    message = ChatMessage(
        role="assistant",
        content=text if (text or not calls) else None,
        tool_calls=[
            ToolCall(id=c.id, function=ToolCallFunction(name=c.name, arguments=c.arguments))
            for c in calls
        ]
        or None,
    )
    finish: Literal["stop", "tool_calls", "length"]
    if calls:
        finish = "tool_calls"
    elif response.status == "incomplete":
        finish = "length"
    else:
        finish = "stop"
    return ChatResult(
        message=message,
        finish_reason=finish,
        tool_calls=calls,
        updated_state=updated_state,
        usage=response.usage,
    )
