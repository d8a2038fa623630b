"""The trace page of a session (+JSON): the tree and the raw event list."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.models import TraceEvent
from decks_app.services.events import event_dict
from decks_app.services.trace_tree import build_tree, tree_rows
from decks_app.views.base import page, session_or_404


@require_GET
def trace_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    events = TraceEvent.objects.filter(session=session).order_by("id")
    tree = build_tree(tree_rows(session))
    pages = Paginator(events, 500)
    try:
        number = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        number = 1
    current = pages.get_page(number)
    data = {
        "session": session.id,
        "tree": [n.to_dict() for n in tree],
        "events": [event_dict(e) for e in current.object_list],
        "page": current.number,
        "pages": pages.num_pages,
        "count": pages.count,
    }
    ctx = {"session": session, "tree": tree, "events": current, "tab": "test"}
    return page(request, "decks_app/trace.html", ctx, data=data, fmt=fmt, fragment="events")
