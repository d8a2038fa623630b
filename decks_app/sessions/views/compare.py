"""A replay beside the session it replayed (+JSON): the same turns side by side, the status
of both and what differs. `identical` only for a completed replay whose rows all match."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.sessions import replay
from decks_app.web.pages import page, session_or_404


@require_GET
def compare_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    if session.origin != "replay" or session.source_id is None:
        raise Http404("this session is not a replay of another session")
    data = replay.compare(session)
    ctx = {**data, "session": session, "source": session.source, "tab": "test"}
    return page(request, "sessions/compare.html", ctx, data=data, fmt=fmt, fragment="result")
