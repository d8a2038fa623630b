"""HTML fragments pushed over the websocket: htmx out-of-band swaps addressed by element id.

Rendered from the named partials of `sessions/session.html`, so the page and the socket
share one markup. All model and user text goes through Django's autoescaping.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string

from decks_app.models import TraceEvent

if TYPE_CHECKING:
    from decks_app.sessions.session_page import SessionPage

TEMPLATE = "sessions/session.html"


def event_rows(events: Iterable[TraceEvent]) -> list[str]:
    """OOB fragments for new events: one row per event appended to the raw event list
    (#raw-events), one piece per row so frames can be cut between rows."""
    return [
        render_to_string(TEMPLATE + "#raw_events_append", {"events": [event]}) for event in events
    ]


def live_fragment(session: Any, blocks: list[Any]) -> str:
    """The live area again (what the active run adds to the saved conversation, see
    `live_turn`), rendered by the same partials as the conversation."""
    page = {"session": session, "live_blocks": blocks}
    return render_to_string(f"{TEMPLATE}#live", {"page": page, "oob": True})


def cursor_fragment(cursor: int, version: int, status: str | None = None) -> str:
    """The page's resume point. It carries the run status too, so a reconnect's hello
    matches and is answered with new events only, not the whole page again."""
    page = {"cursor": cursor, "version": version, "status": status or ""}
    return render_to_string(TEMPLATE + "#cursor", {"page": page, "oob": True})


# The websocket server refuses frames over 1 MiB (autobahn's payload limit), so updates go
# out as several frames of about this many UTF-8 bytes, split between whole elements.
FRAME_BYTES = 256 * 1024


def _size(html: str) -> int:
    return len(html.encode("utf-8"))


def session_fragments(page: SessionPage, request: Any = None) -> list[str]:
    """Everything that changes when a run starts, saves its conversation or ends: status,
    conversation, live area, composer and trace panel, all from one `SessionPage` (read at
    its cursor, which may be past the events already appended: the consumer appends the rows
    in between). A list of pieces, each a whole OOB element; a long conversation is sent as
    its first blocks, then the rest appended in groups."""
    ctx = page.context(oob=True)
    pieces: list[str] = [render_to_string(f"{TEMPLATE}#status", ctx, request=request)]
    # the model that answered, the grades and the context fill move with the runs too
    pieces.append(render_to_string(f"{TEMPLATE}#facts", ctx, request=request))
    blocks = list(page.blocks_shown)
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
    first = replace(page, blocks_shown=groups[0])
    pieces.append(
        render_to_string(f"{TEMPLATE}#conversation", first.context(oob=True), request=request)
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
        tokens = totals["tokens"] or 0
        if run.active:
            # A run records its totals when it ends: until then, count what its trace shows
            # (the heading said "0 tokens" under calls of 170, 317 and 207 tokens).
            tokens += sum(root.total_tokens or 0 for root in roots)
        parts.append(
            render_to_string(
                TEMPLATE + "#trace_totals",
                {"page": {"tokens": tokens, "cost": totals["cost"]}, "oob": True},
            )
        )
    return parts
