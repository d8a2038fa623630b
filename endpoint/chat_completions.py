"""The legacy `/v1/chat/completions`: a thin adapter onto the Open Responses service
(docs/endpoint.md, "Legacy Chat Completions").

It parses its own wire shapes (`chat_schemas.py`) and maps them onto an Open Responses body:
messages become items (an assistant's `tool_calls` become `function_call` items, a `tool`
message a `function_call_output`, an `image_url` part an `input_image`, which the call
checks like any image), `tools` and `tool_choice` their Responses forms. The result is
rendered as `chat.completion` (or `chat.completion.chunk` events): text, `tool_calls`, and a
`finish_reason` of `stop`, `tool_calls` or `length`. A run that fails answers with its error
(HTTP 500, or 502 when the model failed), never an empty completion.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from pydantic import ValidationError

from endpoint.call import ResponseCall, start_call
from endpoint.chat_schemas import ChatCompletionRequest, ChatMessage
from endpoint.schemas import ApiError
from gambit.core import new_id

_INPUT_PARAM = re.compile(r"^input\[(\d+)\]")


async def handle(request: HttpRequest, data: Any, *, owner: str | None = None) -> HttpResponseBase:
    try:
        chat = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"{param}: {first['msg']}", code="invalid_value", param=param) from None
    body, sources = responses_body(chat)
    try:
        call = await sync_to_async(start_call)(body, owner=owner)
    except ApiError as exc:
        raise _in_messages(exc, sources) from None
    completion_id = new_id("chatcmpl")
    created = int(time.time())
    if chat.stream:
        return StreamingHttpResponse(
            _chunks(call, completion_id, created, chat.model), content_type="text/event-stream"
        )
    final: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    async for event in call.events():
        if event["type"] == "error":
            error = event["error"]  # it has the type (a model's failure: 502)
        elif event["type"] in ("response.completed", "response.failed", "response.incomplete"):
            final = event["response"]
    if error is not None or final.get("status") == "failed":
        return _failure(error or final.get("error") or {})
    text, calls = _answer(final.get("output") or [])
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    usage = final.get("usage") or {}
    return JsonResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": chat.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(final, calls)}],
            "usage": {
                "prompt_tokens": usage.get("input_tokens", 0),
                "completion_tokens": usage.get("output_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0),
            },
        }
    )


def responses_body(chat: ChatCompletionRequest) -> tuple[dict[str, Any], list[int]]:
    """The Open Responses body of a chat request, and for each input item the index of the
    message it came from (to name `messages[i]` in errors)."""
    items: list[dict[str, Any]] = []
    sources: list[int] = []
    for index, message in enumerate(chat.messages):
        for item in _items(message, index):
            items.append(item)
            sources.append(index)
    body: dict[str, Any] = {"model": chat.model, "input": items}
    if chat.tools:
        body["tools"] = [
            {"type": "function", **tool.function.model_dump(exclude_none=True)}
            for tool in chat.tools
        ]
    choice = chat.tool_choice
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        choice = {"type": "function", "name": choice["function"].get("name")}
    for key, value in (
        ("tool_choice", choice),
        ("parallel_tool_calls", chat.parallel_tool_calls),
        ("temperature", chat.temperature),
        ("top_p", chat.top_p),
        ("max_output_tokens", chat.max_completion_tokens or chat.max_tokens),
    ):
        if value is not None:
            body[key] = value
    return body, sources


def _items(message: ChatMessage, index: int) -> list[dict[str, Any]]:
    where = f"messages[{index}]"
    if message.role == "tool":
        if not message.tool_call_id:
            raise ApiError(
                400,
                f"{where}: a tool message needs tool_call_id (the call it answers)",
                code="invalid_value",
                param=f"{where}.tool_call_id",
            )
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.text(),
            }
        ]
    if message.role == "assistant":
        items: list[dict[str, Any]] = []
        if message.text():
            items.append({"type": "message", "role": "assistant", "content": message.text()})
        for call in message.tool_calls or []:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.function.name,
                    "arguments": call.function.arguments,
                }
            )
        return items
    if not isinstance(message.content, list):
        return [{"type": "message", "role": message.role, "content": message.content or ""}]
    parts: list[dict[str, Any]] = []
    for number, part in enumerate(message.content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif kind == "image_url" and message.role == "user":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            converted = {"type": "input_image", "image_url": url}
            if isinstance(image, dict) and image.get("detail"):
                converted["detail"] = image["detail"]
            parts.append(converted)
        else:
            raise ApiError(
                400,
                f"{where}.content[{number}]: content part {kind!r} is not supported here "
                "(text, and image_url in a user message)",
                code="unsupported_content",
                param=f"{where}.content[{number}].type",
            )
    return [{"type": "message", "role": message.role, "content": parts}]


def _in_messages(exc: ApiError, sources: list[int]) -> ApiError:
    """An error of the mapped body, naming the chat message it came from."""

    def rename(text: str | None) -> str | None:
        if text is None:
            return None

        def message(match: re.Match[str]) -> str:
            index = int(match.group(1))
            return f"messages[{sources[index]}]" if index < len(sources) else match.group(0)

        return _INPUT_PARAM.sub(message, text)

    renamed = ApiError(exc.status, rename(exc.message) or exc.message, type=exc.type, code=exc.code)
    renamed.param = rename(exc.param)
    return renamed


def _answer(output: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    text = "".join(
        part.get("text") or ""
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    )
    calls = [
        {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item.get("arguments") or ""},
        }
        for item in output
        if item.get("type") == "function_call"
    ]
    return text, calls


def _finish(final: dict[str, Any], calls: list[dict[str, Any]]) -> str:
    if final.get("status") == "incomplete":
        return "length"
    return "tool_calls" if calls else "stop"


def _error_body(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "error": {
            "type": error.get("type") or "server_error",
            "code": error.get("code"),
            "param": None,
            "message": error.get("message") or "the run failed",
        }
    }


def _failure(error: dict[str, Any]) -> JsonResponse:
    """A failed run: its error with the status of who failed (the model: 502)."""
    status = 502 if error.get("type") == "model_error" else 500
    return JsonResponse(_error_body(error), status=status)


async def _chunks(
    call: ResponseCall, completion_id: str, created: int, model: str
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    calls: dict[int, int] = {}  # output index -> tool call index
    error: dict[str, Any] | None = None
    final: dict[str, Any] = {}
    async for event in call.events():
        kind = event["type"]
        if kind == "response.output_text.delta":
            yield chunk({"content": event["delta"]})
        elif kind == "response.output_item.added" and event["item"]["type"] == "function_call":
            calls[event["output_index"]] = number = len(calls)
            item = event["item"]
            head = {"index": number, "id": item["call_id"], "type": "function"}
            yield chunk(
                {"tool_calls": [{**head, "function": {"name": item["name"], "arguments": ""}}]}
            )
        elif kind == "response.function_call_arguments.delta" and event["output_index"] in calls:
            number = calls[event["output_index"]]
            yield chunk(
                {"tool_calls": [{"index": number, "function": {"arguments": event["delta"]}}]}
            )
        elif kind == "error":
            error = event["error"]
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            final = event["response"]
    if error is not None or final.get("status") == "failed":
        body = _error_body(error or final.get("error") or {})
        yield f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
    else:
        yield chunk(
            {},
            "length" if final.get("status") == "incomplete" else _finish(final, [{}] * len(calls)),
        )
    yield b"data: [DONE]\n\n"
