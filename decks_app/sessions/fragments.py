"""HTML fragments pushed over the websocket: htmx out-of-band swaps addressed by element id.

Rendered from the named partials of `sessions/session.html`, so the page and the socket
share one markup. All model and user text goes through Django's autoescaping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string

from decks_app.models import TraceEvent
from decks_app.runs import events as event_log
from gambit.core import (
    LogEvent,
    MessageUserEvent,
    ResponseTraceEvent,
    ToolCallEvent,
    json_dict,
    trace_event_view,
)

TEMPLATE = "sessions/session.html"
_SLUG = re.compile(r"[^A-Za-z0-9_-]")


def text_key(run_id: str, item_id: Any) -> str:
    return "text-" + _SLUG.sub("_", f"{run_id[-12:]}-{item_id}")[:120]


def _is_root(event: Any) -> bool:
    """A provider stream event of the root deck (not of an action deck it called)."""
    return not json_dict(event.gambit).get("parent_action_call_id")


def _live(row: TraceEvent) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """What one event adds to the live area: a block (the user's message, a reply starting,
    a tool call, a log line) or a root deck's text delta `(text key, text)`; read once."""
    event = trace_event_view(row.payload)
    match event:
        case MessageUserEvent() if not event.parent_action_call_id:
            content = json_dict(event.message).get("content")
            text = content if isinstance(content, str) else str(content)
            return {"kind": "user", "text": text}, None
        case ResponseTraceEvent(type="response.output_item.added") if _is_root(event):
            item = (event.model_extra or {}).get("item") or {}
            if isinstance(item, dict) and item.get("type") == "message":
                key = text_key(row.run_id, item.get("id"))
                return {"kind": "assistant", "key": key, "text": ""}, None
        case ResponseTraceEvent(type=event_log.TEXT_DELTA) if _is_root(event):
            extra = event.model_extra or {}
            return None, (text_key(row.run_id, extra.get("item_id")), extra.get("delta") or "")
        case ToolCallEvent() if event.tool_kind in ("action", "external", "mcp_bridge"):
            return {"kind": "tool", "name": event.name or "tool"}, None
        case LogEvent() if not event.parent_action_call_id:
            return {"kind": "log", "text": str(event.message or event.title or "")}, None
    return None, None


def live_blocks(events: Iterable[TraceEvent]) -> list[dict[str, Any]]:
    """The live area of an active run, folded from its events (for the page render)."""
    blocks: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    for event in events:
        block, delta = _live(event)
        if block is not None:
            blocks.append(block)
            if block.get("key"):
                by_key[block["key"]] = block
        elif delta is not None and delta[0] in by_key:
            by_key[delta[0]]["text"] += delta[1]
    return blocks


def event_fragments(events: Iterable[TraceEvent], rows_only: bool = False) -> list[str]:
    """OOB fragments for new events: blocks appended to #live, deltas appended to their text,
    and one row per event appended to the raw event list (#raw-events). With `rows_only`,
    the rows alone (the live area is being re-rendered whole)."""
    events = list(events)
    parts: list[str] = []
    for event in [] if rows_only else events:
        block, delta = _live(event)
        if block is not None:
            parts.append(render_to_string(TEMPLATE + "#live_append", {"block": block}))
        elif delta is not None:
            parts.append(
                render_to_string(TEMPLATE + "#delta", {"key": delta[0], "delta": delta[1]})
            )
    for event in events:  # one piece per row, so frames can be cut between rows
        parts.append(render_to_string(TEMPLATE + "#raw_events_append", {"events": [event]}))
    return parts


def cursor_fragment(cursor: int, version: int, status: str | None = None) -> str:
    """The page's resume point. It carries the run status too, so a reconnect's hello
    matches and is answered with new events only, not the whole page again."""
    return render_to_string(
        TEMPLATE + "#cursor",
        {"cursor": cursor, "version": version, "status": status or "", "oob": True},
    )


# The websocket server refuses frames over 1 MiB (autobahn's payload limit), so updates go
# out as several frames of about this many UTF-8 bytes, split between whole elements.
FRAME_BYTES = 256 * 1024


def _size(html: str) -> int:
    return len(html.encode("utf-8"))


def session_fragments(detail: dict[str, Any], request: Any = None) -> list[str]:
    """Everything that changes when a run starts or ends: status, conversation, composer,
    live area and trace panel (read at the detail's cursor, which may be past the events
    already appended: the consumer appends the rows in between). A list of pieces, each a whole OOB element; a long
    conversation is sent as its first blocks, then the rest appended in groups."""
    ctx = {**detail, "oob": True}
    pieces: list[str] = [render_to_string(f"{TEMPLATE}#status", ctx, request=request)]
    blocks = list(detail.get("blocks_shown") or [])
    rendered = [
        render_to_string(f"{TEMPLATE}#block", {**ctx, "block": b}, request=request) for b in blocks
    ]
    groups: list[list[Any]] = [[]]
    size = 0
    for block, html in zip(blocks, rendered, strict=True):
        if groups[-1] and size + _size(html) > FRAME_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(block)
        size += _size(html)
    pieces.append(
        render_to_string(
            f"{TEMPLATE}#conversation", {**ctx, "blocks_shown": groups[0]}, request=request
        )
    )
    for group in groups[1:]:
        pieces.append(
            render_to_string(
                f"{TEMPLATE}#conversation_more", {**ctx, "blocks": group}, request=request
            )
        )
    for name in ("live", "composer", "trace_panel"):
        pieces.append(render_to_string(f"{TEMPLATE}#{name}", ctx, request=request))
    return pieces


def frames(pieces: Iterable[str], limit: int = FRAME_BYTES) -> list[str]:
    """Pieces packed into websocket frames of at most `limit` UTF-8 bytes (a piece larger
    than that goes alone: each piece is one whole element and cannot be cut)."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        if not piece:
            continue
        piece_size = _size(piece)
        if current and size + piece_size > limit:
            out.append("".join(current))
            current, size = [], 0
        current.append(piece)
        size += piece_size
    if current:
        out.append("".join(current))
    return out


def trace_updates(session: Any, run: Any, since: int, cursor: int) -> list[str]:
    """The trace panel brought up to date in place after the events of `run` past `since`:
    new nodes appended to their parent's children (a new run to the tree), changed nodes'
    heads and bodies replaced, and the totals. Only that run's events are read."""
    from django.db.models import Sum

    from decks_app.sessions import trace_tree

    roots = trace_tree.build_tree(trace_tree.tree_rows(session, cursor, runs=[run]))
    update = trace_tree.updates(roots, since)
    parts: list[str] = []
    for node in update.added:
        target = f"{node.parent_id}-children" if node.parent_id else "trace-tree"
        parts.append(
            f'<ul id="{target}" hx-swap-oob="beforeend">'
            + render_to_string("sessions/tree_node.html", {"node": node, "session": session})
            + "</ul>"
        )
    for node in update.changed:
        ctx = {"node": node, "session": session, "oob": True}
        parts.append(render_to_string("sessions/tree_node_head.html", ctx))
        parts.append(render_to_string("sessions/tree_node_body.html", ctx))
    if parts:
        totals = session.runs.aggregate(tokens=Sum("total_tokens"), cost=Sum("cost"))
        parts.append(
            render_to_string(
                TEMPLATE + "#trace_totals",
                {"tokens": totals["tokens"] or 0, "cost": totals["cost"], "oob": True},
            )
        )
    return parts
