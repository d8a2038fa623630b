"""HTML fragments pushed over the websocket: htmx out-of-band swaps addressed by element id.

Rendered from the named partials of `decks_app/session.html`, so the page and the socket
share one markup. All model and user text goes through Django's autoescaping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string

from decks_app.models import TraceEvent

TEMPLATE = "decks_app/session.html"
_SLUG = re.compile(r"[^A-Za-z0-9_-]")


def text_key(run_id: str, item_id: Any) -> str:
    return "text-" + _SLUG.sub("_", f"{run_id[-12:]}-{item_id}")[:120]


def _is_root(payload: dict[str, Any]) -> bool:
    meta = payload.get("_gambit") or {}
    return not meta.get("parent_action_call_id")


def _block(event: TraceEvent) -> dict[str, Any] | None:
    p = event.payload
    t = event.type
    if t == "message.user" and not p.get("parentActionCallId"):
        content = (p.get("message") or {}).get("content")
        return {"kind": "user", "text": content if isinstance(content, str) else str(content)}
    if t == "response.output_item.added" and _is_root(p):
        item = p.get("item") or {}
        if item.get("type") == "message":
            return {"kind": "assistant", "key": text_key(event.run_id, item.get("id")), "text": ""}
    if t == "tool.call" and p.get("toolKind") in ("action", "external", "mcp_bridge"):
        return {"kind": "tool", "name": p.get("name") or "tool"}
    if t == "log" and not p.get("parentActionCallId"):
        return {"kind": "log", "text": str(p.get("message") or p.get("title") or "")}
    return None


def live_blocks(events: Iterable[TraceEvent]) -> list[dict[str, Any]]:
    """The live area of an active run, folded from its events (for the page render)."""
    blocks: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    for event in events:
        block = _block(event)
        if block is not None:
            blocks.append(block)
            if block.get("key"):
                by_key[block["key"]] = block
        elif event.type == "response.output_text.delta" and _is_root(event.payload):
            key = text_key(event.run_id, event.payload.get("item_id"))
            if key in by_key:
                by_key[key]["text"] += event.payload.get("delta") or ""
    return blocks


def event_fragments(events: Iterable[TraceEvent]) -> str:
    """OOB fragments for new events: blocks appended to #live, deltas appended to their text,
    and one row per event appended to the raw event list (#raw-events)."""
    events = list(events)
    parts: list[str] = []
    for event in events:
        block = _block(event)
        if block is not None:
            parts.append(render_to_string(TEMPLATE + "#live_append", {"block": block}))
        elif event.type == "response.output_text.delta" and _is_root(event.payload):
            parts.append(
                render_to_string(
                    TEMPLATE + "#delta",
                    {
                        "key": text_key(event.run_id, event.payload.get("item_id")),
                        "delta": event.payload.get("delta") or "",
                    },
                )
            )
    if events:
        parts.append(render_to_string(TEMPLATE + "#raw_events_append", {"events": events}))
    return "".join(parts)


def cursor_fragment(cursor: int, version: int) -> str:
    return render_to_string(
        TEMPLATE + "#cursor", {"cursor": cursor, "version": version, "oob": True}
    )


def session_fragments(detail: dict[str, Any], request: Any = None) -> str:
    """Everything that changes when a run starts or ends: status, conversation, composer,
    live area, trace panel and raw event list (read at the detail's cursor, which may be past
    the events already appended)."""
    ctx = {**detail, "oob": True}
    names = ["status", "conversation", "live", "composer", "trace_panel", "raw_events"]
    return "".join(render_to_string(f"{TEMPLATE}#{name}", ctx, request=request) for name in names)


def trace_panel_fragment(session: Any, cursor: int) -> str:
    from django.db.models import Sum

    from decks_app.services.trace_tree import build_tree

    payloads = list(
        TraceEvent.objects.filter(session=session, id__lte=cursor)
        .exclude(type__startswith="response.")
        .order_by("id")
        .values_list("payload", flat=True)
    )
    totals = session.runs.aggregate(tokens=Sum("total_tokens"), cost=Sum("cost"))
    ctx = {
        "session": session,
        "tree": build_tree(payloads),
        "tokens": totals["tokens"] or 0,
        "cost": totals["cost"],
        "oob": True,
    }
    return render_to_string(TEMPLATE + "#trace_panel", ctx)
