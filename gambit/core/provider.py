"""Everything a model provider needs from the engine, in one public module.

A provider (built in under `gambit.providers`, or a third-party plugin, see
docs/providers.md "Writing a provider plugin") imports from here and from nowhere else in
`gambit.core`: the private `gambit.core._*` modules may change shape between releases, this
module keeps its names. An import-linter contract in pyproject.toml holds `gambit.providers`
to it.

What is here:

- **The contract.** `ModelProvider` (`name`, `offline`, async `responses(request, *, state,
  deck_path, on_stream_event) -> ProviderResponse`) and the optional chat-mode
  `ChatProvider` (`chat(...) -> ChatResult`); `ModelResolver` / `ResolvedModel` for routers.
  `BaseProvider` / `BaseChatProvider` own that surface: a subclass implements one method,
  `execute(call: ProviderCall) -> ProviderResponse`.
  The stream callbacks are `StreamEventCallback` (one Open Responses event dict at a time)
  and `StreamTextCallback` (chat mode: one text delta at a time).
- **Errors.** `ProviderError` (every failed call; `status`, `code`, `param`, `retryable`,
  `partial_text`), `ModelNotAvailableError` (no candidate of a model list can be served),
  and their base `GambitError`.
- **Open Responses types** (https://www.openresponses.org/; pydantic models that keep
  unknown fields): the request
  (`CreateResponseRequest`, tools, tool choice, text format), the response
  (`CreateResponseResponse`, `ResponseUsage`, `ResponseError`, `ResponseStatus`), items
  (`MessageItem`, `FunctionCallItem`, `FunctionCallOutputItem`, `UnknownItem` for reasoning
  and `ns:type` extension items), content parts and the streaming events, with helpers to
  build and convert them (`message_item`, `item_from_dict`, `event_to_dict`, ...).
- **The stream encoder.** `ResponseEventEncoder` builds the events of one streamed response
  (sequence numbers, items and content parts opened and closed, the terminal event): a
  provider that streams says what happens and sends the events it gets back.
- **Chat mode.** `ChatMessage` and its tool calls, `messages_to_items` /
  `items_to_messages`, `chat_request` (a chat call as a Responses request) and
  `chat_result_from_response` (a response as a chat result).
- **State and traces.** `SavedState` (what `state` is; a provider may return an updated one
  to keep its own bookkeeping in `meta`), and the `model.call` / `model.result` trace events
  with `read_trace` for providers that replay recorded sessions.
- `new_id(prefix)` for Gambit-style ids (`call-<24 hex>`, `resp-...`).
"""

from __future__ import annotations

from ._errors import GambitError
from ._ids import new_id
from ._messages import (
    ChatMessage,
    ToolCall,
    ToolCallFunction,
    items_to_messages,
    messages_to_items,
)
from ._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputTextContent,
    MessageItem,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    OutputTextContent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ResponseCompletedEvent,
    ResponseContent,
    ResponseCreatedEvent,
    ResponseError,
    ResponseEvent,
    ResponseFailedEvent,
    ResponseFunctionDefinition,
    ResponseItem,
    ResponseStatus,
    ResponseTextConfig,
    ResponseTextFormat,
    ResponseToolChoice,
    ResponseToolDefinition,
    ResponseUsage,
    ToolChoiceFunction,
    ToolChoiceFunctionName,
    UnknownContent,
    UnknownItem,
    UnknownResponseEvent,
    event_from_dict,
    event_to_dict,
    function_call_item,
    function_call_output_item,
    item_from_dict,
    item_text,
    item_to_dict,
    items_from_json,
    items_to_json,
    json_schema_text_format,
    message_item,
    output_text,
)
from ._provider import (
    BaseChatProvider,
    BaseProvider,
    ChatProvider,
    ChatResult,
    ModelNotAvailableError,
    ModelProvider,
    ModelResolver,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    ResolvedModel,
    StreamEventCallback,
    StreamTextCallback,
    ToolCallRequest,
    chat_request,
    chat_result_from_response,
    text_forwarder,
)
from ._response_events import TERMINAL_EVENTS, ResponseEventEncoder
from ._state import SavedState, state_from_dict
from ._trace import ModelCallEvent, ModelResultEvent, read_trace, trace_event_from_dict

__all__ = [
    # the contract
    "BaseChatProvider",
    "BaseProvider",
    "ChatProvider",
    "ModelProvider",
    "ModelResolver",
    "ProviderCall",
    "ResolvedModel",
    "StreamEventCallback",
    "StreamTextCallback",
    # what a call returns
    "ChatResult",
    "ProviderResponse",
    "ToolCallRequest",
    # errors
    "GambitError",
    "ModelNotAvailableError",
    "ProviderError",
    # Open Responses: request
    "CreateResponseRequest",
    "ResponseFunctionDefinition",
    "ResponseTextConfig",
    "ResponseTextFormat",
    "ResponseToolChoice",
    "ResponseToolDefinition",
    "ToolChoiceFunction",
    "ToolChoiceFunctionName",
    "json_schema_text_format",
    # Open Responses: response, items, content
    "CreateResponseResponse",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "InputTextContent",
    "MessageItem",
    "OutputTextContent",
    "ResponseContent",
    "ResponseError",
    "ResponseItem",
    "ResponseStatus",
    "ResponseUsage",
    "UnknownContent",
    "UnknownItem",
    "function_call_item",
    "function_call_output_item",
    "item_from_dict",
    "item_text",
    "item_to_dict",
    "items_from_json",
    "items_to_json",
    "message_item",
    "output_text",
    # Open Responses: streaming events
    "OutputItemAddedEvent",
    "OutputItemDoneEvent",
    "OutputTextDeltaEvent",
    "OutputTextDoneEvent",
    "ResponseCompletedEvent",
    "ResponseCreatedEvent",
    "ResponseEvent",
    "ResponseEventEncoder",
    "ResponseFailedEvent",
    "TERMINAL_EVENTS",
    "UnknownResponseEvent",
    "event_from_dict",
    "event_to_dict",
    # chat mode
    "ChatMessage",
    "ToolCall",
    "ToolCallFunction",
    "chat_request",
    "chat_result_from_response",
    "items_to_messages",
    "messages_to_items",
    "text_forwarder",
    # state, traces, ids
    "ModelCallEvent",
    "ModelResultEvent",
    "SavedState",
    "new_id",
    "read_trace",
    "state_from_dict",
    "trace_event_from_dict",
]
