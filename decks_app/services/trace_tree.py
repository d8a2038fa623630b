"""The trace as a tree: run -> deck -> model calls and tool calls -> nested decks.

Built from stored trace-event payloads alone (no state), so the same function serves the
live session page, the trace page and each step of a replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Node:
    kind: str  # run | deck | model | tool | user | log
    label: str
    status: str = ""
    detail: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    cost: float | None = None
    duration_ms: int | None = None
    children: list[Node] = field(default_factory=list)
    ts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "status": self.status or None,
            "detail": self.detail or None,
            "items": self.items,
            "usage": self.usage,
            "cost": self.cost,
            "durationMs": self.duration_ms,
            "children": [c.to_dict() for c in self.children],
        }


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _short_path(path: str | None) -> str:
    if not path:
        return "deck"
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def item_summary(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type", "?")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, list):
            text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        else:
            text = _text(content)
        return {"type": "message", "role": item.get("role"), "text": text}
    if kind == "function_call":
        return {
            "type": "function_call",
            "name": item.get("name"),
            "text": _text(item.get("arguments")),
        }
    if kind == "function_call_output":
        return {
            "type": "function_call_output",
            "name": item.get("call_id"),
            "text": _text(item.get("output")),
        }
    if kind == "reasoning":
        summary = item.get("summary") or []
        text = " ".join(str(s.get("text", "")) for s in summary if isinstance(s, dict))
        return {"type": "reasoning", "text": text}
    return {"type": kind, "text": _text(item)[:2000]}


def _result_items(payload: dict[str, Any]) -> list[dict[str, Any]]:
    items = payload.get("output") or payload.get("responseItems")
    if isinstance(items, list) and items:
        return [item_summary(i) for i in items if isinstance(i, dict)]
    message = payload.get("message") or {}
    out = []
    if message.get("content"):
        out.append({"type": "message", "role": "assistant", "text": _text(message.get("content"))})
    for call in payload.get("toolCalls") or []:
        out.append(
            {"type": "function_call", "name": call.get("name"), "text": _text(call.get("args"))}
        )
    return out


def build_tree(payloads: list[dict[str, Any]]) -> list[Node]:
    roots: list[Node] = []
    run: Node | None = None
    decks: dict[str, Node] = {}
    tools: dict[str, Node] = {}
    models: dict[str, Node] = {}

    def container(parent_id: str | None) -> Node | None:
        if parent_id and parent_id in tools:
            return tools[parent_id]
        if parent_id and parent_id in decks:
            return decks[parent_id]
        return run

    def ensure_run(p: dict[str, Any]) -> Node:
        nonlocal run
        if run is None:
            run = Node("run", p.get("runId") or "run", status="running", ts=p.get("ts") or 0)
            roots.append(run)
        return run

    for p in payloads:
        t = p.get("type", "")
        ts = p.get("ts") or 0
        if t == "run.start":
            run = Node("run", p.get("runId") or "run", status="running", ts=ts)
            run.detail = _short_path(p.get("deckPath"))
            roots.append(run)
            continue
        ensure_run(p)
        assert run is not None
        if t == "run.end":
            run.status = p.get("status") or "completed"
            # Whatever was still open when the run ended ended with it: an interrupted or
            # failed run shows no deck "running" or model "calling" for ever.
            _close_open(run, "done" if run.status in ("completed", "ended") else run.status)
            run.usage = p.get("usage")
            cost = (run.usage or {}).get("costUsd")
            run.cost = cost if isinstance(cost, int | float) else None
            run.duration_ms = p.get("durationMs")
            if p.get("error"):
                run.detail = f"{run.detail} — {p['error']}"
        elif t == "deck.start":
            node = Node("deck", _short_path(p.get("deckPath")), status="running", ts=ts)
            decks[p.get("actionCallId") or ""] = node
            (container(p.get("parentActionCallId")) or run).children.append(node)
        elif t == "deck.end":
            node = decks.get(p.get("actionCallId") or "")
            if node:
                node.status = "done"
                node.duration_ms = ts - node.ts if ts and node.ts else None
        elif t == "message.user":
            msg = p.get("message") or {}
            node = Node("user", "user message", detail=_text(msg.get("content")), ts=ts)
            (container(p.get("actionCallId")) or run).children.append(node)
        elif t == "model.call":
            node = Node("model", p.get("model") or "model", status="calling", ts=ts)
            node.detail = f"{p.get('messageCount', '?')} messages, {p.get('toolCount', 0)} tools"
            models[p.get("actionCallId") or ""] = node
            (container(p.get("actionCallId")) or run).children.append(node)
        elif t == "model.result":
            node = models.pop(p.get("actionCallId") or "", None)
            if node is None:
                node = Node("model", p.get("model") or "model", ts=ts)
                (container(p.get("actionCallId")) or run).children.append(node)
            node.status = p.get("finishReason") or "done"
            node.usage = p.get("usage")
            usage = p.get("usage") or {}
            cost = usage.get("costUsd", usage.get("cost"))
            node.cost = cost if isinstance(cost, int | float) else None
            node.duration_ms = ts - node.ts if ts and node.ts else None
            node.items = _result_items(p)
        elif t in ("action.start", "tool.call"):
            call_id = p.get("actionCallId") or ""
            node = tools.get(call_id)
            if node is None:
                node = Node("tool", p.get("name") or "tool", status="running", ts=ts)
                node.detail = p.get("toolKind") or ""
                tools[call_id] = node
                (container(p.get("parentActionCallId")) or run).children.append(node)
            if t == "tool.call":
                node.items.append({"type": "arguments", "text": _text(p.get("args"))})
                node.detail = p.get("toolKind") or node.detail
        elif t == "tool.result":
            node = tools.get(p.get("actionCallId") or "")
            if node is not None:
                node.status = "done"
                node.duration_ms = ts - node.ts if ts and node.ts else None
                node.items.append({"type": "result", "text": _text(p.get("result"))[:4000]})
        elif t in ("log", "monolog"):
            text = p.get("message") or p.get("title") or p.get("content") or p.get("body")
            node = Node(t, p.get("level") or t, detail=_text(text), ts=ts)
            (container(p.get("actionCallId")) or run).children.append(node)
    return roots


def _close_open(node: Node, status: str) -> None:
    for child in node.children:
        if child.status in ("running", "calling"):
            child.status = status
        _close_open(child, status)


def tree_stats(payloads: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in payloads:
        counts[p.get("type", "?")] = counts.get(p.get("type", "?"), 0) + 1
    return counts
