"""Replay a session step by step (+JSON), and re-run it offline into a new session
(`/test/<id>/rerun`: GET says whether it is offered, POST does it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from decks_app.models import Session
from decks_app.sessions import replay
from decks_app.sessions.conversation import Activity, Bubble
from decks_app.sessions.trace_tree import Node
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    render_page,
    wants_json,
)


@require_GET
def replay_page(request: HtmxHttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        step = int(request.GET["step"]) if request.GET.get("step") else None
    except ValueError:
        return error_response(request, "step must be a whole number", 400, fmt)
    frame = replay.frame(session, step)
    data = ReplayPage(**frame, rerun=replay.rerun_info(session))
    return render_page(request, "sessions/replay.html", data, fmt, fragment="frame")


@dataclass
class ReplayPage(PageData):
    """A session replayed up to `step` of its stored events (a step: an event other than
    the provider's stream events, which show at their model call's result): the conversation
    (the session page's own blocks) and trace tree as they were then, the event at that
    step, where the turns start (for stepping by turn), and whether "Re-run offline" is
    offered. It opens at step 1."""

    session: Session
    step: int
    total: int
    prev: int
    next: int
    turn: int
    turns: int
    prev_turn: int
    next_turn: int
    current: dict[str, Any] | None
    conversation: list[Bubble | Activity]
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
            # the step each control goes to (previous / next event, start of this or the
            # previous turn, start of the next turn)
            "prev": self.prev,
            "next": self.next,
            "turn": self.turn,
            "turns": self.turns,
            "prevTurn": self.prev_turn,
            "nextTurn": self.next_turn,
            "event": self.current["payload"] if self.current else None,
            "conversation": [b.to_dict() for b in self.conversation],
            "tree": [n.to_dict() for n in self.tree],
            "rerun": self.rerun,
        }


@require_http_methods(["GET", "POST"])
def replay_rerun(request: HtmxHttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
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
