"""The trace page of a session (+JSON): the tree and the raw event list."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.models import TraceEvent
from decks_app.services.events import event_dict, light_payloads
from decks_app.services.trace_tree import build_tree, request_detail, tree_rows
from decks_app.views.base import json_response, page, session_or_404


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
    current.object_list = light_payloads(current.object_list)
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


@require_GET
def trace_call(
    request: HttpRequest, session_id: str, event_id: int, fmt: str | None = None
) -> HttpResponse:
    """Everything one model call sent (instructions, input items, tools, parameters), read
    from its `model.call` event on demand: the tree keeps only its size and settings."""
    session = session_or_404(session_id)
    event = TraceEvent.objects.filter(session=session, pk=event_id, type="model.call").first()
    if event is None:
        raise Http404("no such model call in this session")
    call = {"model": event.payload.get("model"), **request_detail(event.payload)}
    ctx = {"session": session, "event_id": event_id, "call": call, "tab": "test"}
    return page(request, "decks_app/trace_call.html", ctx, data=call, fmt=fmt, fragment="sent")


@require_GET
def trace_event(request: HttpRequest, session_id: str, event_id: int) -> HttpResponse:
    """One stored event, whole (the lists show long payloads cut and calls without items)."""
    session = session_or_404(session_id)
    event = TraceEvent.objects.filter(session=session, pk=event_id).first()
    if event is None:
        raise Http404("no such event in this session")
    return json_response(event_dict(event))
