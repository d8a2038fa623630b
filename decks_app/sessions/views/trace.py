"""The trace of a session (+JSON): a tree of its runs on one side, the selected node's
detail on the other (`?node=<key>`), and the raw events; a node's detail alone (for htmx,
`/trace/nodes/<key>`), one run (`/trace/runs/<event>`), one model call's request."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.models import Session, TraceEvent
from decks_app.runs.events import event_dict, light_payloads
from decks_app.sessions.trace_items import deck_labeler
from decks_app.sessions.trace_tree import Node, build_tree, request_detail, tree_rows, walk
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import HtmxHttpRequest, PageData, json_response, render_page

# The trace page opens the newest runs and folds the older ones (each loads when opened),
# and lists the raw events this many to a page.
RUNS_OPEN = 3
EVENTS_PER_PAGE = 200
NODE_KEY = re.compile(r"^[0-9]{1,18}(-run)?$")


def _tree(session: Session, runs: list[Any] | None = None) -> list[Node]:
    label = deck_labeler(session.workspace.root, session.deck_path, session.deck_label)
    return build_tree(tree_rows(session, runs=runs), deck_label=label)


def _find(roots: list[Node], key: str) -> Node | None:
    return next((n for n in walk(roots) if n.key == key), None)


def _page_number(request: HtmxHttpRequest) -> int:
    try:
        return max(1, int(request.GET.get("page", "1")))
    except ValueError:
        return 1


@dataclass
class TraceRun:
    """A run on the trace page: whole, or folded (its children load when it is opened)."""

    node: Node
    folded: bool


@dataclass
class SessionData(PageData):
    """A page of one session's (the top bar shows its workspace)."""

    session: Session
    tab = "test"

    @property
    def workspace(self) -> Any:
        return self.session.workspace


@dataclass
class TraceData(SessionData):
    """Runs of a session's trace and the node selected in them."""

    tree: list[Node]
    selected: Node | None

    @property
    def selected_path(self) -> list[Node]:
        return ancestors(self.tree, self.selected)


@dataclass
class TracePage(TraceData):
    """A session's trace: its runs, the selected node and one page of its raw events (the
    page of one run has that run alone and no events)."""

    events: Page | None = None
    missing: str = ""  # a `?node=` that names no node of this trace
    open_runs: set[str] = field(default_factory=set)

    @property
    def runs(self) -> list[TraceRun]:
        return [TraceRun(n, n.id not in self.open_runs) for n in self.tree]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session": self.session.id,
            "deck": self.session.deck_label or None,
            "createdAt": self.session.created_at.isoformat(),
            "notes": (self.session.notes or {}).get("text"),
            "conversationScore": (self.session.conversation_score or {}).get("score"),
            "tree": [n.to_dict() for n in self.tree],
            "selected": node_json(self.selected) if self.selected else None,
        }
        if self.missing:
            out["missing"] = self.missing
        if self.events is not None:
            out.update(
                events=[event_dict(e) for e in self.events.object_list],
                page=self.events.number,
                pages=self.events.paginator.num_pages,
                count=self.events.paginator.count,
            )
        return out


def ancestors(roots: list[Node], node: Node | None) -> list[Node]:
    """The node's ancestors, root first (the detail's breadcrumb)."""
    if node is None:
        return []
    parents = {c.id: n for n in walk(roots) for c in n.children}
    path: list[Node] = []
    parent = parents.get(node.id)
    while parent is not None:
        path.insert(0, parent)
        parent = parents.get(parent.id)
    return path


def node_json(node: Node) -> dict[str, Any]:
    """A node's detail: the node without its subtree, and its children by name."""
    children = [{"id": c.id, "kind": c.kind, "label": c.label} for c in node.children]
    return {**node.to_dict(children=False), "children": children}


@require_GET
def trace_page(request: HtmxHttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    tree = _tree(session)
    key = request.GET.get("node", "")
    selected = _find(tree, key) if NODE_KEY.match(key) else None
    if selected is None and tree:
        selected = tree[-1]
    open_runs = {n.id for n in tree[-RUNS_OPEN:]}
    if selected is not None:  # the run holding the selection is open
        open_runs |= {r.id for r in tree if any(n is selected for n in walk([r]))}
    events = TraceEvent.objects.filter(session=session).order_by("id")
    current = Paginator(events, EVENTS_PER_PAGE).get_page(_page_number(request))
    current.object_list = light_payloads(current.object_list)
    missing = key if key and (selected is None or selected.key != key) else ""
    data = TracePage(session, tree, selected, current, missing, open_runs)
    return render_page(request, "sessions/trace.html", data, fmt, fragment="events")


@require_GET
def trace_run(
    request: HtmxHttpRequest, session_id: str, event_id: int, fmt: str | None = None
) -> HttpResponse:
    """One run of the trace, whole (the trace page shows older runs folded and loads each
    one's children when it is opened: the htmx fragment). `event_id` is its `run.start`."""
    session = session_or_404(session_id)
    start = TraceEvent.objects.filter(session=session, pk=event_id, type="run.start").first()
    if start is None:
        raise Http404("no such run in this session")
    node = _find(_tree(session, runs=[start.run_id]), str(event_id))
    if node is None:
        raise Http404("no such run in this session")
    key = request.GET.get("node", "")
    selected = (_find([node], key) if NODE_KEY.match(key) else None) or node
    data = RunPage(session, [node], selected, open_runs={node.id})
    return render_page(request, "sessions/trace.html", data, fmt, fragment="run_children")


@dataclass
class RunPage(TracePage):
    """One run of the trace (the twin is the run's node with its subtree)."""

    def to_json(self) -> dict[str, Any]:
        return self.tree[0].to_dict()


@require_GET
def trace_node(
    request: HtmxHttpRequest, session_id: str, node: str, fmt: str | None = None
) -> HttpResponse:
    """One node's detail: the right-hand side of the trace page (the htmx fragment), or a
    page of its own. `node` is the node's key: the id of the event that opened it."""
    session = session_or_404(session_id)
    event = TraceEvent.objects.filter(session=session, pk=int(node.split("-")[0])).first()
    if event is None:
        raise Http404("no such event in this session")
    runs = [event.run_id] if event.run_id else None
    roots = _tree(session, runs=runs)
    found = _find(roots, node)
    if found is None:
        raise Http404("no trace node starts at this event")
    data = NodePage(session, roots, found)
    return render_page(request, "sessions/trace_node.html", data, fmt, fragment="detail")


@dataclass
class NodePage(TraceData):
    """One node's detail (the twin: the node without its subtree)."""

    def to_json(self) -> dict[str, Any]:
        return node_json(self.selected) if self.selected else {}


@require_GET
def trace_call(
    request: HtmxHttpRequest, session_id: str, event_id: int, fmt: str | None = None
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
class CallPage(SessionData):
    """Everything one model call sent (the twin is the call itself)."""

    event_id: int
    call: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.call


@require_GET
def trace_event(request: HtmxHttpRequest, session_id: str, event_id: int) -> HttpResponse:
    """One stored event, whole (the lists show long payloads cut and calls without items)."""
    session = session_or_404(session_id)
    event = TraceEvent.objects.filter(session=session, pk=event_id).first()
    if event is None:
        raise Http404("no such event in this session")
    return json_response(event_dict(event))
