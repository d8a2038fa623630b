"""Downloads: a session's SavedState JSON and its trace JSONL."""

from __future__ import annotations

import json

from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from decks_app.sessions import transfer
from decks_app.sessions.views import session_or_404
from decks_app.web.pages import HtmxHttpRequest


@require_GET
def export_state(request: HtmxHttpRequest, session_id: str) -> HttpResponse:
    session = session_or_404(session_id)
    body = json.dumps(transfer.export_state(session), ensure_ascii=False, indent=2)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{session.id}.state.json"'
    return response


@require_GET
def export_trace(request: HtmxHttpRequest, session_id: str) -> StreamingHttpResponse:
    session = session_or_404(session_id)
    response = StreamingHttpResponse(
        transfer.export_trace(session), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{session.id}.trace.jsonl"'
    return response
