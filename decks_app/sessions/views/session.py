"""The session page (+JSON): conversation, composer, Stop, notes and score, trace panel."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from decks_app.runs import events as event_log
from decks_app.sessions import feedback as feedback_service
from decks_app.sessions.actions import (
    InvalidInput,
    SessionBusy,
    retry_run,
    send_message,
    stop_session,
)
from decks_app.sessions.conversation import earlier_blocks
from decks_app.sessions.session_page import SessionPage
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import (
    HtmxHttpRequest,
    error_response,
    json_response,
    render_page,
    wants_json,
)

TEMPLATE = "sessions/session.html"


@require_GET
def session_page(request: HtmxHttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    """The page, its JSON twin, or for htmx its conversation: one `SessionPage` each."""
    page = SessionPage.of(session_or_404(session_id))
    return render_page(request, TEMPLATE, page, fmt, fragment="conversation")


@require_GET
def session_earlier(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    """ "Show earlier": the conversation blocks before `?before=N` (htmx swaps them in for the
    button; the JSON twin lists them)."""
    session = session_or_404(session_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return error_response(request, "before must be a whole number (a block index)")
    part = earlier_blocks(session, before)
    if wants_json(request):
        return json_response(
            {
                "blocks": [b.to_dict() for b in part["blocks_shown"]],
                "before": part["blocks_before"],
            }
        )
    return render(request, TEMPLATE + "#earlier", {"page": part})


@require_GET
def session_recent_events(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    """The raw event list of the session page (the newest events), loaded when its panel
    is opened; the JSON twin is the session's `events`."""
    session = session_or_404(session_id)
    rows = event_log.recent_events(session.id, event_log.last_event_id(session.id))
    if wants_json(request):
        return json_response({"events": [event_log.event_dict(e) for e in rows]})
    part = {"session": session, "raw_events_limit": event_log.RECENT_LIMIT}
    return render(request, TEMPLATE + "#raw_events", {"page": part, "raw_events": rows})


def _after_command(request: HtmxHttpRequest, session, status: int = 200, **extra) -> HttpResponse:
    if wants_json(request):
        page = SessionPage.of(session)
        return json_response({**page.to_json(), **extra}, status=status)
    if request.htmx:
        page = SessionPage.of(session, rerun=False)
        return render(
            request, TEMPLATE + "#composer_response", page.context(oob=True), status=status
        )
    return redirect("sessions:session", session_id=session.id)


@require_POST
def session_send(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        run = send_message(session, request.POST.get("message", ""))
    except InvalidInput as exc:
        return error_response(request, str(exc), 400)
    except SessionBusy as exc:
        return error_response(request, str(exc), 409)
    return _after_command(request, session, status=202, runId=run.id)


@require_POST
def session_retry(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    """Re-run the last turn after it was interrupted or failed (`runId` names that run)."""
    session = session_or_404(session_id)
    try:
        run = retry_run(session, request.POST.get("runId", "")[:64])
    except InvalidInput as exc:
        return error_response(request, str(exc), 409)
    except SessionBusy as exc:
        return error_response(request, str(exc), 409)
    return _after_command(request, session, status=202, runId=run.id)


@require_POST
def session_stop(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    stopped = stop_session(session)
    return _after_command(request, session, stopped=stopped)


@require_POST
def session_notes(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        if "notes" in request.POST:
            feedback_service.set_notes(session, request.POST.get("notes", ""))
        if "score" in request.POST:
            feedback_service.set_conversation_score(
                session, feedback_service.parse_score(request.POST.get("score"))
            )
    except feedback_service.FeedbackError as exc:
        return error_response(request, str(exc))
    session.refresh_from_db()
    if wants_json(request):
        return json_response(
            {"notes": session.notes, "conversationScore": session.conversation_score}
        )
    if request.htmx:
        return render(request, TEMPLATE + "#notes", {"page": {"session": session}, "saved": True})
    return redirect("sessions:session", session_id=session.id)


@require_POST
def session_delete(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    """Delete a session with its runs, trace and ratings; `confirm` must repeat its id."""
    session = session_or_404(session_id)
    if request.POST.get("confirm", "").strip() != session.id:
        return error_response(request, f"type the session id ({session.id}) to confirm", 400)
    if session.runs.filter(status__in=("queued", "running")).exists():
        return error_response(request, "stop the session's run before deleting it", 409)
    session.delete()
    if wants_json(request):
        return json_response({"deleted": session_id})
    if request.htmx:  # the page it was on is gone: the browser goes to the list
        return HttpResponseClientRedirect(reverse("sessions:sessions"))
    return redirect("sessions:sessions")
