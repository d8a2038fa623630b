"""Rating one assistant message: POST score (-3..3, empty clears) and/or reason."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from decks_app.sessions import feedback as feedback_service
from decks_app.sessions.conversation import feedback_dict
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import HtmxHttpRequest, error_response, json_response, wants_json


@require_POST
def message_feedback(request: HtmxHttpRequest, session_id: str, ref_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        score = (
            feedback_service.parse_score(request.POST.get("score"))
            if "score" in request.POST
            else None
        )
        reason = request.POST.get("reason") if "reason" in request.POST else None
        if "score" not in request.POST and reason is None:
            raise feedback_service.FeedbackError("give a score or a reason")
        if "score" in request.POST and score is None:
            reason = None  # clearing the score clears the entry
        fb = feedback_service.set_feedback(session, ref_id, score, reason)
    except feedback_service.FeedbackError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response({"feedback": feedback_dict(fb) if fb else None})
    if request.htmx:
        return render(
            request,
            "sessions/session.html#feedback",
            {
                "page": {"session": session},
                "bubble": {"ref_id": ref_id, "feedback": fb},
                "saved": True,
            },
        )
    return redirect("sessions:session", session_id=session.id)
