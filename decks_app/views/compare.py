"""A session beside the session it was replayed from (+JSON): the same turns, side by side."""

from __future__ import annotations

from itertools import zip_longest

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.services.sessions import conversation
from decks_app.views.base import page, session_or_404


@require_GET
def compare_page(request: HttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    if session.source_id is None:
        raise Http404("this session is not a replay of another session")
    source = session.source
    left = [b for b in conversation(source) if b.kind in ("user", "assistant")]
    right = [b for b in conversation(session) if b.kind in ("user", "assistant")]
    rows = [
        {
            "original": a.to_dict() if a else None,
            "replay": b.to_dict() if b else None,
            "same": bool(a and b and a.kind == b.kind and a.text == b.text),
        }
        for a, b in zip_longest(left, right)
    ]
    data = {
        "session": session.id,
        "source": source.id,
        "identical": all(r["same"] for r in rows),
        "rows": rows,
    }
    ctx = {
        "session": session,
        "source": source,
        "rows": rows,
        "identical": data["identical"],
        "tab": "test",
    }
    return page(request, "decks_app/compare.html", ctx, data=data, fmt=fmt, fragment="rows")
