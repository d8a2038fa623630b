"""Replay a session step by step (+JSON), and re-run it offline into a new session
(`/test/<id>/rerun`: GET says whether it is offered, POST does it)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from decks_app.sessions import replay
from decks_app.web.pages import error_response, json_response, page, session_or_404, wants_json


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
    rerun = replay.rerun_info(session)
    data["rerun"] = rerun
    ctx = {**frame, "tab": "test", "rerun": rerun}
    return page(request, "sessions/replay.html", ctx, data=data, fmt=fmt, fragment="frame")


@require_http_methods(["GET", "POST"])
def replay_rerun(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    """GET: whether "Re-run offline" is offered and why not (a page, `.json`, or for htmx
    the button's slot alone). POST: re-run the session offline into a new session (201
    JSON / redirect); 400 when its trace holds nothing a replay can answer from, 409 while
    it is still running."""
    session = session_or_404(session_id)
    if request.method == "GET":
        rerun = replay.rerun_info(session)
        ctx = {"session": session, "rerun": rerun, "tab": "test"}
        return page(request, "sessions/rerun.html", ctx, data=rerun, fmt=fmt, fragment="slot")
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
