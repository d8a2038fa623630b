"""The trace page of a session (+JSON): the tree and the raw event list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from decks_app.models import Session, TraceEvent
from decks_app.runs.events import event_dict, light_payloads
from decks_app.sessions.trace_tree import Node, build_tree, request_detail, tree_rows
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import PageData, is_htmx, json_response, render_page, wants_json

# The trace page opens the newest runs and folds the older ones (each loads when opened),
# and lists the raw events this many to a page.
RUNS_OPEN = 3
EVENTS_PER_PAGE = 200


@require_GET
def trace_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    events = TraceEvent.objects.filter(session=session).order_by("id")
    tree = build_tree(tree_rows(session))
    pages = Paginator(events, EVENTS_PER_PAGE)
    try:
        number = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        number = 1
    current = pages.get_page(number)
    current.object_list = light_payloads(current.object_list)
    data = TracePage(session=session, tree=tree, events=current)
    return render_page(request, "sessions/trace.html", data, fmt, fragment="events")


@dataclass
class TracePage(PageData):
    """A session's whole trace tree and one page of its raw events."""

    session: Session
    tree: list[Node]
    events: Page
    tab = "test"

    @property
    def runs_open(self) -> int:
        return RUNS_OPEN

    @property
    def workspace(self) -> Any:
        return self.session.workspace

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session.id,
            "tree": [n.to_dict() for n in self.tree],
            "events": [event_dict(e) for e in self.events.object_list],
            "page": self.events.number,
            "pages": self.events.paginator.num_pages,
            "count": self.events.paginator.count,
        }


@require_GET
def trace_run(
    request: HttpRequest, session_id: str, event_id: int, fmt: str | None = None
) -> HttpResponse:
    """One run of the trace tree, whole (the trace page shows older runs folded and loads
    each one when it is opened). `event_id` is the run's `run.start` event."""
    session = session_or_404(session_id)
    start = TraceEvent.objects.filter(session=session, pk=event_id, type="run.start").first()
    if start is None:
        raise Http404("no such run in this session")
    roots = build_tree(tree_rows(session, runs=[start.run_id]))
    node = next((n for n in roots if n.id == f"tn-{event_id}"), None)
    if node is None:
        raise Http404("no such run in this session")
    ctx = {"session": session, "node": node, "tab": "test"}
    if wants_json(request, fmt):
        return json_response(node.to_dict())
    if is_htmx(request):
        return render(request, "sessions/tree_run_body.html", ctx)
    return render(request, "sessions/trace_run.html", ctx)


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
    data = CallPage(session=session, event_id=event_id, call=call)
    return render_page(request, "sessions/trace_call.html", data, fmt, fragment="sent")


@dataclass
class CallPage(PageData):
    """Everything one model call sent (the twin is the call itself)."""

    session: Session
    event_id: int
    call: dict[str, Any]
    tab = "test"

    def to_json(self) -> dict[str, Any]:
        return self.call


@require_GET
def trace_event(request: HttpRequest, session_id: str, event_id: int) -> HttpResponse:
    """One stored event, whole (the lists show long payloads cut and calls without items)."""
    session = session_or_404(session_id)
    event = TraceEvent.objects.filter(session=session, pk=event_id).first()
    if event is None:
        raise Http404("no such event in this session")
    return json_response(event_dict(event))
