"""Chat messages and the chat <-> Open Responses mapping (docs/providers.md, "Chat mode").

Chat message -> items (`messages_to_items`):

- `system` / `user` with non-empty text -> `message` item with one `input_text` part.
- `assistant` with non-empty text -> `message` item with one `output_text` part.
- `assistant.tool_calls[]` -> one `function_call` item per call, after the text item.
- `tool` -> `function_call_output` with `call_id = tool_call_id` and `output = content`.
- Empty text produces no message item (an empty system prompt is simply absent); a `tool`
  message without `tool_call_id` or with `content: null` produces nothing.

Items -> chat messages (`items_to_messages`):

- `message` -> `{role, content}` where content is the concatenation of its part texts
  (`join_text_parts`), or None when that is empty.
- `function_call` -> a tool call on an assistant message. Consecutive `function_call` items
  fold into one assistant message's `tool_calls`. By default the first of them starts a new
  assistant message with `content: None`, so an assistant text and the calls that follow it
  are separate messages: assistant "hello", a `gambit_context` call and its output are 3
  messages, and the runtime stores a model's text before the message with its tool calls.
  With `fold_into_text=True` calls that directly follow an assistant message with text fold
  into that message instead (the chat-completions habit of text plus `tool_calls`
  in one message).
- `function_call_output` -> a `tool` message `{tool_call_id, content: output}` whose `name` is
  the name of the matching earlier call, when there is one.
- Item types outside the subset (reasoning, extension items) have no chat form and are
  skipped; items stay the canonical record, chat is a compatibility view.

Synthetic tools (`gambit_context`, `gambit_init`, `gambit_respond`, `gambit_complete`,
`gambit_end`) need no special case: they are ordinary calls and outputs whose `arguments` and
`output` strings are carried byte for byte in both directions.

Item ids. Chat has no place for item ids, so they ride on non-standard keys:
a `message` item's `id` <-> `ChatMessage.id`; a `function_call_output` item's `id` <-> the
tool message's `id`; a `function_call` item's `id` <-> `ToolCall.item_id` (the chat tool
call `id` is the item's `call_id`). `ChatMessage.to_api_dict()` drops these keys for chat
completion APIs. An id on an assistant message without text has no item to go to and is lost.

Round trips:

- items -> messages -> items is the identity for lists of subset items whose messages hold
  exactly one part of their role's type (`input_text` for system/user, `output_text` for
  assistant) with non-empty text; provider-specific extra fields are not carried through chat.
- messages -> items -> messages is the identity for well-formed conversations: system, user
  and assistant messages carry non-empty text, except that an assistant message with tool
  calls has `content: None` (by default), or has text or follows no assistant message (with
  `fold_into_text=True`), and two assistant messages with tool calls are never adjacent;
  tool messages have a `tool_call_id`, non-null content and, as `name`, the name of the call
  they answer (or no name when no earlier call has that id); only `id`/`item_id` are used
  as extra keys; `name` appears on tool messages only.
"""

import operator
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from gambit.core._openresponses import (
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputTextContent,
    MessageItem,
    OutputTextContent,
    _JsonModel,
    construct,
    item_from_dict,
)

__all__ = [
    "SYNTHETIC_TOOL_NAMES",
    "ChatMessage",
    "ChatRole",
    "ToolCall",
    "ToolCallFunction",
    "is_synthetic_tool",
    "items_to_messages",
    "join_text_parts",
    "message_from_dict",
    "messages_from_json",
    "messages_to_items",
    "messages_to_json",
    "stringify_response_output",
]

SYNTHETIC_TOOL_NAMES = frozenset(
    {"gambit_context", "gambit_init", "gambit_respond", "gambit_complete", "gambit_end"}
)
"""Gambit's synthetic tools; `gambit_init` is the deprecated alias of `gambit_context`."""

ChatRole = Literal["system", "user", "assistant", "tool"]


def is_synthetic_tool(name: str) -> bool:
    return name in SYNTHETIC_TOOL_NAMES


class ToolCallFunction(_JsonModel):
    name: str
    arguments: str


class ToolCall(_JsonModel):
    """A chat tool call. `item_id` (non-standard) keeps the `function_call` item's `id`."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction
    item_id: str | None = None


class ChatMessage(_JsonModel):
    """A chat message (`ModelMessage`). `content` is always serialised, null included.

    `id` (non-standard) keeps the id of the item the message maps to; other extra keys are
    allowed and kept. An empty `tool_calls` list is normalised to None.
    """

    _keep_none: ClassVar[frozenset[str]] = frozenset({"content"})

    role: ChatRole
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    id: str | None = None

    @field_validator("tool_calls")
    @classmethod
    def _drop_empty_tool_calls(cls, value: list[ToolCall] | None) -> list[ToolCall] | None:
        return value or None

    def to_api_dict(self) -> dict[str, Any]:
        """The message as a chat-completions API expects it: standard keys only."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


def message_from_dict(data: Mapping[str, Any] | ChatMessage) -> ChatMessage:
    return data if isinstance(data, ChatMessage) else ChatMessage.model_validate(data)


def messages_from_json(data: Iterable[Mapping[str, Any] | ChatMessage]) -> list[ChatMessage]:
    return [message_from_dict(m) for m in data]


def messages_to_json(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def join_text_parts(parts: Iterable[str | None]) -> str:
    """Concatenate the non-empty parts with no separator (as the TypeScript Gambit joins them)."""
    return "".join(part for part in parts if part)


def stringify_response_output(items: CreateResponseResponse | Iterable[Any]) -> str:
    """Concatenate the `output_text` parts of assistant message items, with no separator."""
    if isinstance(items, CreateResponseResponse):
        items = items.output
    texts: list[str] = []
    for raw in items:
        item = raw if not isinstance(raw, Mapping) else item_from_dict(raw)
        if isinstance(item, MessageItem) and item.role == "assistant":
            texts.extend(p.text for p in item.content if isinstance(p, OutputTextContent))
    return join_text_parts(texts)


def messages_to_items(messages: Iterable[ChatMessage | Mapping[str, Any]]) -> list[Any]:
    """Chat messages -> `list[ResponseItem]` (see the module docstring)."""
    items: list[Any] = []
    for raw in messages:
        msg = message_from_dict(raw)
        if msg.role == "tool":
            if msg.tool_call_id is None or msg.content is None:
                continue
            items.append(
                FunctionCallOutputItem(call_id=msg.tool_call_id, output=msg.content, id=msg.id)
            )
            continue
        if msg.content:
            part: InputTextContent | OutputTextContent
            if msg.role == "assistant":
                part = OutputTextContent(text=msg.content)
            else:
                part = InputTextContent(text=msg.content)
            items.append(MessageItem(role=msg.role, content=[part], id=msg.id))
        if msg.role == "assistant" and msg.tool_calls:
            for call in msg.tool_calls:
                items.append(
                    FunctionCallItem(
                        call_id=call.id,
                        name=call.function.name,
                        arguments=call.function.arguments,
                        id=call.item_id,
                    )
                )
    return items


def items_to_messages(items: Iterable[Any], *, fold_into_text: bool = False) -> list[ChatMessage]:
    """`list[ResponseItem]` (models or dicts) -> chat messages (see the module docstring).

    `fold_into_text=True` puts calls that directly follow an assistant text message on that
    message's `tool_calls` instead of on a new `content: None` assistant message.
    """
    messages: list[ChatMessage] = []
    call_names: dict[str, str] = {}
    # The assistant message that function_call items may still fold into.
    open_assistant: ChatMessage | None = None
    for raw in items:
        item = item_from_dict(raw) if isinstance(raw, Mapping) else raw
        if isinstance(item, MessageItem):
            text = join_text_parts(part.text for part in item.content if isinstance(part.text, str))
            msg = ChatMessage(role=item.role, content=text or None, id=item.id)
            messages.append(msg)
            open_assistant = msg if fold_into_text and item.role == "assistant" else None
        elif isinstance(item, FunctionCallItem):
            call_names[item.call_id] = item.name
            call = ToolCall(
                id=item.call_id,
                function=ToolCallFunction(name=item.name, arguments=item.arguments),
                item_id=item.id,
            )
            if open_assistant is None:
                open_assistant = ChatMessage(role="assistant", content=None)
                messages.append(open_assistant)
            open_assistant.tool_calls = [*(open_assistant.tool_calls or []), call]
        elif isinstance(item, FunctionCallOutputItem):
            messages.append(
                ChatMessage(
                    role="tool",
                    content=item.output,
                    tool_call_id=item.call_id,
                    name=call_names.get(item.call_id),
                    id=item.id,
                )
            )
            open_assistant = None
        # Other item types have no chat form; they do not break a run of calls either.
    return messages


class IncrementalMessages:
    """`items_to_messages` for a conversation that grows: only new items are converted.

    A run publishes its whole item list after every model pass; converting all of it each
    time made a pass cost grow with the conversation. Messages before the last point where
    no assistant message is open (after a `message` or `function_call_output` item) never
    change, so they are kept and the tail is converted again. Items are compared by
    identity: a list that is not an extension of the previous one is converted whole.
    """

    __slots__ = ("_items", "_messages", "_names", "_safe_items", "_safe_messages")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._messages: list[ChatMessage] = []
        self._names: dict[str, str] = {}
        self._safe_items = 0  # items[:_safe_items] gave messages[:_safe_messages]
        self._safe_messages = 0

    def snapshot(self) -> tuple[Any, ...]:
        return (
            self._items,
            self._messages,
            dict(self._names),
            self._safe_items,
            self._safe_messages,
        )

    @classmethod
    def restore(cls, snapshot: tuple[Any, ...] | None) -> "IncrementalMessages":
        converter = cls()
        if snapshot is not None:
            items, messages, names, safe_items, safe_messages = snapshot
            converter._items, converter._messages, converter._names = items, messages, dict(names)
            converter._safe_items, converter._safe_messages = safe_items, safe_messages
        return converter

    def convert(self, items: list[Any]) -> list[ChatMessage]:
        # Messages are built from items already validated, without validating them again
        # (`construct`): the first validation of a chat model builds its validator, 28 ms of
        # a one-turn `gambit run`.
        safe = self._safe_items
        # Identity of the first `safe` items, compared in a C loop (a Python loop over a long
        # conversation cost more than converting what it adds).
        if safe > len(items) or not all(map(operator.is_, items[:safe], self._items)):
            # not an extension: start again
            self._safe_items = self._safe_messages = 0
            self._names = {}
            messages: list[ChatMessage] = []
        else:
            messages = self._messages[: self._safe_messages]
        start = self._safe_items
        open_assistant: ChatMessage | None = None
        names = self._names
        for index in range(start, len(items)):
            raw = items[index]
            item = item_from_dict(raw) if isinstance(raw, Mapping) else raw
            if isinstance(item, MessageItem):
                text = join_text_parts(
                    part.text for part in item.content if isinstance(part.text, str)
                )
                messages.append(
                    construct(ChatMessage, role=item.role, content=text or None, id=item.id)
                )
                open_assistant = None
            elif isinstance(item, FunctionCallItem):
                names[item.call_id] = item.name
                call = construct(
                    ToolCall,
                    id=item.call_id,
                    function=construct(ToolCallFunction, name=item.name, arguments=item.arguments),
                    item_id=item.id,
                )
                if open_assistant is None:
                    open_assistant = construct(ChatMessage, role="assistant", content=None)
                    messages.append(open_assistant)
                open_assistant.tool_calls = [*(open_assistant.tool_calls or []), call]
                continue
            elif isinstance(item, FunctionCallOutputItem):
                messages.append(
                    construct(
                        ChatMessage,
                        role="tool",
                        content=item.output,
                        tool_call_id=item.call_id,
                        name=names.get(item.call_id),
                        id=item.id,
                    )
                )
                open_assistant = None
            else:
                continue  # no chat form, and it does not close a run of calls
            if open_assistant is None:
                self._safe_items, self._safe_messages = index + 1, len(messages)
        self._items = list(items)
        self._messages = messages
        return list(messages)
