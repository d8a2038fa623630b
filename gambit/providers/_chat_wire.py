"""Chat Completions wire mapping, and the conversion of chat streams into Open Responses events.

The runtime sees one shape: a chat completion (streamed or not) becomes a
`CreateResponseResponse`, and a chat stream is re-emitted as the Open Responses event sequence
(`response.created`, `response.in_progress`, `response.output_item.added`,
`response.content_part.added`, `response.output_text.delta`*, ..., `response.completed`).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from gambit.core.provider import (
    CreateResponseRequest,
    CreateResponseResponse,
    ProviderError,
    ResponseEventEncoder,
    chat_result_from_response,
    items_to_messages,
)

from ._responses_wire import context_stub_tools, parse_response, parse_usage, request_extras

__all__ = [
    "ChatStreamConverter",
    "ChatStreamError",
    "chat_body",
    "chat_result_from_response",
    "chat_tool_choice",
    "parse_chat_completion",
]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def chat_body(
    request: CreateResponseRequest,
    *,
    model: str,
    reasoning_object: bool = False,
    stub_context_tools: bool = False,
) -> dict[str, Any]:
    """The JSON body for `POST /chat/completions`.

    `max_tokens` stays `max_tokens` (the request's `max_output_tokens` maps to it);
    `reasoning` passes as an object when the server understands it (OpenRouter), otherwise
    its `effort` becomes `reasoning_effort`; `text.format` becomes `response_format`.
    """
    params = dict(request.params or {})
    reasoning = params.pop("reasoning", None)
    body: dict[str, Any] = dict(params)
    if "tool_choice" in body:
        # A `tool_choice` among the parameters (a request's, through a deck's model
        # parameters) may be in the Responses shape; Chat Completions nests the name.
        body["tool_choice"] = chat_tool_choice(body["tool_choice"])
    if isinstance(reasoning, Mapping):
        if reasoning_object:
            body["reasoning"] = dict(reasoning)
        elif reasoning.get("effort") is not None:
            body["reasoning_effort"] = reasoning["effort"]
    body.update(request_extras(request))
    body["model"] = model
    _refuse_media(request.input)
    messages = [m.to_api_dict() for m in items_to_messages(request.input, fold_into_text=True)]
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    body["messages"] = messages
    tools = [tool.to_dict() for tool in request.tools or []]
    if stub_context_tools:
        tools += context_stub_tools(request.input, tools, flat=False)
    if tools:
        body["tools"] = tools
    if request.tool_choice is not None:
        choice = request.tool_choice
        body["tool_choice"] = choice if isinstance(choice, str) else choice.to_dict()
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.text is not None and request.text.format is not None:
        fmt = request.text.format
        if fmt.type == "json_schema":
            schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.schema_ or {}}
            if fmt.strict is not None:
                schema["strict"] = fmt.strict
            if fmt.description:
                schema["description"] = fmt.description
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif fmt.type == "json_object":
            body["response_format"] = {"type": "json_object"}
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body.pop("stream", None)
    if request.metadata is not None and "metadata" not in body:
        body["metadata"] = request.metadata
    return {k: v for k, v in body.items() if v is not None}


def _refuse_media(items: list[Any]) -> None:
    """Chat messages here carry text only: an image or a file would be dropped, so the call
    fails instead, saying so (docs/endpoint.md, "Images and files")."""
    for item in items:
        for part in getattr(item, "content", None) or []:
            kind = getattr(part, "type", None)
            if kind in ("input_image", "input_file"):
                raise ProviderError(
                    f"{kind} cannot be sent over Chat Completions here (text only); use a "
                    "model reached over the Responses API",
                    provider="chat",
                    code="unsupported_content",
                )


def chat_tool_choice(choice: Any) -> Any:
    """`tool_choice` as Chat Completions takes it: the string modes pass through, and the
    Responses API's function form `{"type": "function", "name": N}` becomes
    `{"type": "function", "function": {"name": N}}` (the chat form passes unchanged)."""
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        if isinstance(choice.get("function"), Mapping):
            return dict(choice)
        if isinstance(choice.get("name"), str):
            rest = {k: v for k, v in choice.items() if k not in ("type", "name")}
            return {**rest, "type": "function", "function": {"name": choice["name"]}}
    return choice


def _reasoning_item(text: str, item_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id or _new_id("rs"),
        "summary": [{"type": "summary_text", "text": text}],
        "status": "completed",
    }


def parse_chat_completion(data: Any) -> CreateResponseResponse:
    """A `chat.completion` object -> `CreateResponseResponse`."""
    if not isinstance(data, Mapping):
        data = {}
    choices = data.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        output.append(_reasoning_item(reasoning))
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    if isinstance(content, str) and content:
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        output.append(
            {
                "type": "function_call",
                "call_id": call.get("id") or _new_id("call"),
                "name": fn.get("name") or "",
                "arguments": args if isinstance(args, str) else json.dumps(args or {}),
                "status": "completed",
            }
        )
    finish = choice.get("finish_reason")
    response = {
        "id": data.get("id") or _new_id("chatcmpl"),
        "model": data.get("model"),
        "created_at": data.get("created"),
        "status": "incomplete" if finish == "length" else "completed",
        "output": output,
        "usage": data.get("usage"),
    }
    if finish == "length":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return parse_response(response)


class ChatStreamError(Exception):
    """An `{"error": ...}` chunk inside a chat stream."""

    def __init__(self, error: Mapping[str, Any]):
        self.error = dict(error)
        super().__init__(str(error.get("message") or error))


class ChatStreamConverter:
    """Turns chat completion chunks into Open Responses events, and aggregates them.

    The events come from a `ResponseEventEncoder` (the one sequence every stream follows);
    this class only decides, chunk by chunk, what opens, grows and closes."""

    def __init__(self, emit: Callable[[dict[str, Any]], None] | None):
        self._emit_cb = emit
        self.encoder = ResponseEventEncoder()
        self.started = False
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self._message_index: int | None = None
        self._reasoning_index: int | None = None
        self._tool_index: dict[int, int] = {}  # chat tool index -> output index
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.chunks = 0
        self._partial: list[str] = []

    @property
    def output(self) -> list[dict[str, Any]]:
        return self.encoder.output

    @property
    def partial_text(self) -> str:
        return "".join(self._partial)

    @property
    def saw_finish(self) -> bool:
        return self.finish_reason is not None

    def _send(self, events: list[dict[str, Any]]) -> None:
        if self._emit_cb is not None:
            for event in events:
                self._emit_cb(event)

    def _base(self, status: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": status,
        }

    # ------------------------------------------------------------------ items

    def _close(self, index: int | None) -> None:
        if index is None:
            return
        if index == self._message_index:
            self._message_index = None
        if index == self._reasoning_index:
            self._reasoning_index = None
        self._send(self.encoder.close(index))

    def _text(self, delta: str) -> None:
        self._close(self._reasoning_index)
        if self._message_index is None:
            self._message_index, opened = self.encoder.open_message({"id": _new_id("msg")})
            self._send(opened)
        self._partial.append(delta)
        self._send(self.encoder.text_delta(self._message_index, delta))

    def _reasoning(self, delta: str) -> None:
        if self._reasoning_index is None:
            self._reasoning_index, opened = self.encoder.open_reasoning({"id": _new_id("rs")})
            self._send(opened)
        self._send(self.encoder.reasoning_delta(self._reasoning_index, delta))

    def _tool_call(self, call: Mapping[str, Any]) -> None:
        chat_index = call.get("index")
        if not isinstance(chat_index, int):
            chat_index = len(self._tool_index)
        fn = call.get("function") or {}
        index = self._tool_index.get(chat_index)
        if index is None:
            self._close(self._message_index)
            self._close(self._reasoning_index)
            index, opened = self.encoder.open_function_call(
                call.get("id") or _new_id("call"), fn.get("name") or "", item_id=_new_id("fc")
            )
            self._tool_index[chat_index] = index
            self._send(opened)
        elif fn.get("name") and not self.output[index]["name"]:
            self.output[index]["name"] = fn["name"]
        args = fn.get("arguments")
        if isinstance(args, str) and args:
            self._send(self.encoder.arguments_delta(index, args))

    # ------------------------------------------------------------------ chunks

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """One decoded `data:` chunk. Raises `ChatStreamError` on an error chunk."""
        self.chunks += 1
        if isinstance(chunk.get("error"), Mapping):
            raise ChatStreamError(chunk["error"])
        if not self.started:
            self.started = True
            self.id = str(chunk.get("id") or _new_id("chatcmpl"))
            self.model = chunk.get("model")
            self.created = chunk.get("created") or int(time.time())
            self._send(self.encoder.created({**self._base("in_progress"), "output": []}))
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning") or delta.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                self._reasoning(reasoning)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text(content)
            for call in delta.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    self._tool_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def finish(self) -> CreateResponseResponse:
        """Close open items, emit the terminal event and return the aggregated response."""
        if not self.started:
            self.feed({})
        self._message_index = self._reasoning_index = None
        self._send(self.encoder.close_all())
        incomplete = self.finish_reason == "length"
        response = {
            **self._base("incomplete" if incomplete else "completed"),
            "output": [dict(item) for item in self.output],
        }
        usage = parse_usage(self.usage)
        if self.usage is not None:
            response["usage"] = self.usage
        if incomplete:
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        self._send([self.encoder.terminal(response)])
        parsed = parse_response(response)
        if usage is not None:
            parsed.usage = usage
        return parsed


# --------------------------------------------------------------------------- chat results
