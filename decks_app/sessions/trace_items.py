"""What a trace node shows of its events: the items a model call sent and got back, a
tool call's arguments, and its result split into the payload and the envelope around it.

Pure functions of stored event payloads (no database), used by the trace tree
(`trace_tree.build_tree`) and by the detail of the call a model made (`request_detail`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from gambit.core import ModelCallEvent, ModelResultEvent, json_dict, trace_event_view

# The keys the runtime wraps an action's or external tool's result in (its envelope): who
# called it and from where. What is left is the result itself (docs/simulator.md, "Trace").
ENVELOPE_KEYS = ("runId", "actionCallId", "parentActionCallId", "source", "deckPath")


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def parse_json(value: Any) -> Any:
    """A value as JSON data: a string that holds a JSON object or array is parsed (tool
    arguments and results are stored as JSON text), anything else is kept as it is."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def split_envelope(value: Any) -> tuple[Any, dict[str, Any] | None]:
    """`(what the tool returned, the whole envelope)`. An action's result arrives as
    `{"runId", "actionCallId", "parentActionCallId", "source", "status", "payload"}`: the
    payload is what a reader wants; a failure keeps its `status`, `code` and `message`.
    A value with no envelope keys is its own result (`None` for the envelope)."""
    value = parse_json(value)
    if not isinstance(value, dict) or not any(key in value for key in ENVELOPE_KEYS):
        return value, None
    rest = {k: v for k, v in value.items() if k not in ENVELOPE_KEYS}
    plain = set(rest) <= {"payload", "status"} and rest.get("status") in (None, 200)
    if "payload" in rest and plain:
        return rest["payload"], value
    return rest, value


def content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return text(content)


def item_summary(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type", "?")
    if kind == "message":
        return {
            "type": "message",
            "role": item.get("role"),
            "text": content_text(item.get("content")),
        }
    if kind == "function_call":
        return {
            "type": "function_call",
            "name": item.get("name"),
            "text": text(item.get("arguments")),
        }
    if kind == "function_call_output":
        return {
            "type": "function_call_output",
            "name": item.get("call_id"),
            "text": text(item.get("output")),
        }
    if kind == "reasoning":
        summary = item.get("summary") or []
        joined = " ".join(str(s.get("text", "")) for s in summary if isinstance(s, dict))
        return {"type": "reasoning", "text": joined}
    return {"type": kind, "text": text(item)[:2000]}


def result_items(event: ModelResultEvent) -> list[dict[str, Any]]:
    items = event.output_items
    if isinstance(items, list) and items:
        return [item_summary(i) for i in items if isinstance(i, dict)]
    message = json_dict(event.message)
    out = []
    if message.get("content"):
        out.append({"type": "message", "role": "assistant", "text": text(message.get("content"))})
    for call in event.tool_calls or []:
        if isinstance(call, dict):
            out.append(
                {"type": "function_call", "name": call.get("name"), "text": text(call.get("args"))}
            )
    return out


def request_detail(payload: dict[str, Any]) -> dict[str, Any]:
    """Everything a model call sent: instructions (system and developer messages), the other
    input items, the tools offered (name and description) and the parameters. Built on
    demand from the one `model.call` event (its items are the whole conversation so far)."""
    items = payload.get("items") or payload.get("responseItems") or []
    instructions = []
    inputs = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and item.get("role") in ("system", "developer"):
            instructions.append(content_text(item.get("content")))
        else:
            inputs.append(item_summary(item))
    if isinstance(payload.get("instructions"), str):
        instructions.insert(0, payload["instructions"])
    tools = []
    for tool in payload.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        fn = fn if isinstance(fn, dict) else tool
        tools.append(
            {
                "name": fn.get("name") or tool.get("type"),
                "description": fn.get("description"),
                "parameters": fn.get("parameters"),
            }
        )
    return {
        **request_settings(trace_event_view(payload)),
        "instructions": "\n\n".join(i for i in instructions if i),
        "input": inputs,
        "tools": tools,
    }


def request_settings(event: ModelCallEvent) -> dict[str, Any]:
    """What the tree keeps of a model call's request: its size and settings. The items
    themselves are read on demand (`request_detail`): each call carries the whole
    conversation, so a long session's calls would be quadratic in its length."""
    params = event.params
    count = event.message_count
    return {
        "itemCount": count if isinstance(count, int) else None,
        "toolCount": event.tool_count or 0,
        "params": params if isinstance(params, dict) and params else None,
        "mode": event.mode,
        "stream": event.stream,
        "provider": event.provider,
    }


def sent_summary(request: dict[str, Any] | None) -> str:
    """One line for what a call sent: "2 items, 1 tools · responses · streamed · openai-api"."""
    if not request:
        return ""
    size = f"{request.get('toolCount') or 0} tools"
    if request.get("itemCount") is not None:
        size = f"{request['itemCount']} items, {size}"
    parts = [size, request.get("mode"), "streamed" if request.get("stream") else None]
    return " · ".join(str(p) for p in [*parts, request.get("provider")] if p)


def deck_labeler(
    root: str, session_deck: str = "", session_label: str = ""
) -> Callable[[str | None], str]:
    """A function naming a deck from the absolute path a trace event carries, as the
    workspace names it: the session's own deck by its label, another deck by its folder
    relative to the workspace root (`support/actions/lookup`), a deck outside the workspace
    by its last two path parts. Never the absolute path."""
    roots = [PurePath(os.path.normpath(root))]
    with contextlib.suppress(OSError):
        roots.append(PurePath(os.path.realpath(root)))

    known: dict[str, str] = {}  # a session's runs name the same few decks again and again

    def label(path: str | None) -> str:
        if not path:
            return "deck"
        if path not in known:
            known[path] = name(path)
        return known[path]

    def name(path: str) -> str:
        full = PurePath(os.path.normpath(path))
        rel = next((full.relative_to(r) for r in roots if full.is_relative_to(r)), None)
        if rel is None:
            rel = PurePath(*full.parts[-2:]) if full.is_absolute() else full
        if session_label and rel.as_posix() == session_deck:
            return session_label
        if rel.name == "PROMPT.md" and len(rel.parts) > 1:
            return rel.parent.as_posix()
        return rel.as_posix()

    return label


def duration_text(ms: int | None) -> str:
    """812 -> "812 ms", 4200 -> "4.2 s", 192000 -> "3 min 12 s"; None -> ""."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"


def tokens_text(tokens: int | None) -> str:
    """150 -> "150 tok", 12345 -> "12.3k tok"; None -> ""."""
    if tokens is None:
        return ""
    return f"{tokens} tok" if tokens < 10_000 else f"{tokens / 1000:.1f}k tok"


def cost_text(cost: float | None) -> str:
    """USD with enough digits to see a small call ("$0.00042"); unknown -> "—"."""
    if cost is None:
        return "—"
    if cost == 0:
        return "$0"
    return f"${cost:.2f}" if cost >= 1 else f"${cost:.6f}".rstrip("0")
