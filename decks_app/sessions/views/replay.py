"""Replay a session step by step (+JSON), and re-run it offline into a new session
(`/test/<id>/rerun`: GET says whether it is offered, POST does it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from decks_app.models import Session
from decks_app.sessions import replay
from decks_app.sessions.trace_tree import Node
from decks_app.web.pages import (
    PageData,
    error_response,
    json_response,
    render_page,
    session_or_404,
    wants_json,
)


@require_GET
def replay_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        step = int(request.GET["step"]) if "step" in request.GET else None
    except ValueError:
        step = None
    frame = replay.frame(session, step)
    data = ReplayPage(**frame, rerun=replay.rerun_info(session))
    return render_page(request, "sessions/replay.html", data, fmt, fragment="frame")


@dataclass
class ReplayPage(PageData):
    """A session replayed up to `step` of its stored events: the conversation and trace tree
    as they were then, the event at that step, and whether "Re-run offline" is offered."""

    session: Session
    step: int
    total: int
    prev: int
    next: int
    current: dict[str, Any] | None
    conversation: list[dict[str, Any]]
    tree: list[Node]
    rerun: dict[str, Any]
    tab = "test"

    @property
    def workspace(self) -> Any:
        return self.session.workspace

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session.id,
            "step": self.step,
            "total": self.total,
            "event": self.current["payload"] if self.current else None,
            "conversation": self.conversation,
            "tree": [n.to_dict() for n in self.tree],
            "rerun": self.rerun,
        }


@require_http_methods(["GET", "POST"])
def replay_rerun(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    """GET: whether "Re-run offline" is offered and why not (a page, `.json`, or for htmx
    the button's slot alone). POST: re-run the session offline into a new session (201
    JSON / redirect); 400 when its trace holds nothing a replay can answer from, 409 while
    it is still running."""
    session = session_or_404(session_id)
    if request.method == "GET":
        data = RerunPage(session=session, rerun=replay.rerun_info(session))
        return render_page(request, "sessions/rerun.html", data, fmt, fragment="slot")
    back = reverse("sessions:session", args=[session.id])
    try:
        new = replay.rerun_offline(session)
    except replay.StillRunning as exc:
        return error_response(request, str(exc), 409, fmt, code="session_busy", back=back)
    except replay.NotReplayable as exc:
        return error_response(request, str(exc), 400, fmt, code="not_replayable", back=back)
    if wants_json(request, fmt):
        return json_response(
            {"id": new.id, "url": reverse("sessions:session", args=[new.id]), "source": session.id},
            status=201,
        )
    return redirect("sessions:session", session_id=new.id)


@dataclass
class RerunPage(PageData):
    """Whether "Re-run offline" is offered for a session, and why not (the twin)."""

    session: Session
    rerun: dict[str, Any]
    tab = "test"

    def to_json(self) -> dict[str, Any]:
        return self.rerun
