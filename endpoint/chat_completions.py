"""The legacy `/v1/chat/completions`: a thin adapter onto the Open Responses service.

It parses its own wire shapes (`chat_schemas.py`), hands the service a plain Open Responses
body, and renders the result as `chat.completion` (or `chat.completion.chunk` events).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from pydantic import ValidationError

from endpoint.call import start_call
from endpoint.chat_schemas import ChatCompletionRequest
from gambit.core import new_id


async def handle(request: HttpRequest, data: Any, *, owner: str | None = None) -> HttpResponseBase:
    from endpoint.schemas import ApiError  # the error envelope is shared

    try:
        chat = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"{param}: {first['msg']}", code="invalid_value", param=param) from None
    body = {
        "model": chat.model,
        "input": [
            {"type": "message", "role": m.role if m.role != "tool" else "user", "content": m.text()}
            for m in chat.messages
        ],
    }
    call = await sync_to_async(start_call)(body, owner=owner)
    completion_id = new_id("chatcmpl")
    created = int(time.time())
    if chat.stream:
        return StreamingHttpResponse(
            _chunks(call, completion_id, created, chat.model), content_type="text/event-stream"
        )
    text, usage = "", None
    async for event in call.events():
        if event["type"] == "response.output_text.done":
            text = event["text"]
        if event["type"] in ("response.completed", "response.failed"):
            usage = event["response"].get("usage")
    return JsonResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": chat.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": (usage or {}).get("input_tokens", 0),
                "completion_tokens": (usage or {}).get("output_tokens", 0),
                "total_tokens": (usage or {}).get("total_tokens", 0),
            },
        }
    )


async def _chunks(call: Any, completion_id: str, created: int, model: str) -> AsyncIterator[bytes]:
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
    async for event in call.events():
        if event["type"] == "response.output_text.delta":
            yield chunk({"content": event["delta"]})
    yield chunk({}, "stop")
    yield b"data: [DONE]\n\n"
