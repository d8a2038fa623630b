"""GenAI attribute values from trace event fields: token usage in its several spellings,
messages in the conventions' JSON message format (roles and typed parts), and attribute
values OpenTelemetry accepts (docs/observability.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["clean", "input_messages", "output_messages", "to_json", "usage"]


def to_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry attribute values: None left out, other values kept when they are
    primitives or lists of strings; anything else as JSON."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str | bool | int | float):
            out[key] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
        else:
            out[key] = to_json(value)
    return out


def usage(data: Any) -> dict[str, Any]:
    """A usage object's token counts as `gen_ai.usage.*` (and OpenInference's) attributes."""
    if not isinstance(data, Mapping):
        return {}
    usage = data
    out: dict[str, Any] = {
        "gen_ai.usage.input_tokens": _first(
            usage, "input_tokens", "inputTokens", "promptTokens", "prompt_tokens"
        ),
        "gen_ai.usage.output_tokens": _first(
            usage, "output_tokens", "outputTokens", "completionTokens", "completion_tokens"
        ),
    }
    details = _first(usage, "output_tokens_details", "outputTokensDetails")
    if isinstance(details, Mapping):
        out["gen_ai.usage.reasoning.output_tokens"] = _first(
            details, "reasoning_tokens", "reasoningTokens"
        )
    cached = _first(usage, "input_tokens_details", "inputTokensDetails")
    if isinstance(cached, Mapping):
        out["gen_ai.usage.cache_read.input_tokens"] = _first(
            cached, "cached_tokens", "cachedTokens"
        )
    out["llm.token_count.prompt"] = out["gen_ai.usage.input_tokens"]
    out["llm.token_count.completion"] = out["gen_ai.usage.output_tokens"]
    return out


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    """The first of `keys` that `data` has (usage comes in several spellings)."""
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat message's content as GenAI message parts (text, tool calls, tool results)."""
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": content,
            }
        ]
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for piece in content:
            if isinstance(piece, Mapping) and isinstance(piece.get("text"), str):
                parts.append({"type": "text", "content": piece["text"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        arguments = function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": arguments,
            }
        )
    return parts


def _messages(messages: Any) -> list[dict[str, Any]]:
    out = []
    for message in messages or []:
        if isinstance(message, Mapping):
            out.append({"role": message.get("role"), "parts": _parts(message)})
    return out


def input_messages(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    if event.get("messages") is not None:
        return _messages(event.get("messages"))
    items = event.get("items", event.get("responseItems"))
    return _messages(_items_as_messages(items))


def output_messages(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    if not isinstance(message, Mapping):
        items = event.get("output", event.get("responseItems"))
        converted = _items_as_messages(items)
        message = converted[-1] if converted else {"role": "assistant", "content": ""}
    out = _messages([message])
    if out and not any(p["type"] == "tool_call" for p in out[0]["parts"]):
        for call in event.get("toolCalls") or []:
            if isinstance(call, Mapping):
                out[0]["parts"].append(
                    {
                        "type": "tool_call",
                        "id": call.get("id"),
                        "name": call.get("name"),
                        "arguments": call.get("args"),
                    }
                )
    if out and event.get("finishReason"):
        out[0]["finish_reason"] = event.get("finishReason")
    return out


def _items_as_messages(items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        return []
    from gambit.core import items_to_messages

    try:
        return [m.to_api_dict() for m in items_to_messages(items)]
    except Exception:
        return []
