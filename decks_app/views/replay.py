"""Replay a session step by step (+JSON), and re-run it offline into a new session."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from decks_app.services import replay
from decks_app.views.base import error_response, json_response, page, session_or_404, wants_json


@require_GET
def replay_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        step = int(request.GET["step"]) if "step" in request.GET else None
    except ValueError:
        step = None
    frame = replay.frame(session, step)
    current = frame["current"]
    data = {
        "session": session.id,
        "step": frame["step"],
        "total": frame["total"],
        "event": current["payload"] if current else None,
        "conversation": frame["conversation"],
        "tree": [n.to_dict() for n in frame["tree"]],
    }
    ctx = {**frame, "tab": "test"}
    return page(request, "decks_app/replay.html", ctx, data=data, fmt=fmt, fragment="frame")


@require_POST
def replay_rerun(request: HttpRequest, session_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        new = replay.rerun_offline(session)
    except replay.NotReplayable as exc:
        return error_response(request, str(exc), 409)
    if wants_json(request):
        return json_response(
            {"id": new.id, "url": f"/test/{new.id}/", "source": session.id}, status=201
        )
    return redirect("session", session_id=new.id)
