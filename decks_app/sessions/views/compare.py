"""A replay beside the session it replayed (+JSON): the same turns side by side, the status
of both and what differs. `identical` only for a completed replay whose rows all match.
While the replay runs, the result follows the replay's socket (decks_app.web.live)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.models import Session
from decks_app.sessions import replay
from decks_app.sessions.actions import get_session
from decks_app.sessions.views import session_or_404
from decks_app.web.live import live_view
from decks_app.web.pages import HtmxHttpRequest, PageData, live_part, render_page

TEMPLATE = "sessions/compare.html"


@dataclass
class ComparePage(PageData):
    """The replay, its original and their comparison (`result`, the twin)."""

    live_partial = "result"  # the part its live view sends

    session: Session
    result: dict[str, Any]
    tab = "test"

    @classmethod
    def of(cls, session: Session) -> ComparePage:
        return cls(session=session, result=replay.compare(session))

    @property
    def source(self) -> Session | None:
        return self.session.source

    @property
    def workspace(self) -> Any:
        return self.session.workspace

    def to_json(self) -> dict[str, Any]:
        return self.result


def _is_replay(session: Session | None) -> bool:
    return session is not None and session.origin == "replay" and session.source_id is not None


@require_GET
def compare_page(request: HtmxHttpRequest, session_id: str, fmt: str | None = None) -> HttpResponse:
    session = session_or_404(session_id)
    if not _is_replay(session):
        raise Http404("this session is not a replay of another session")
    return render_page(request, TEMPLATE, ComparePage.of(session), fmt, fragment="result")


@live_view("compare")
def live_result(session_id: str, key: str) -> str:
    """The comparison, for the replay's socket while it runs (`key` is the replay's id)."""
    session = get_session(session_id)
    if key != session_id or session is None or not _is_replay(session):
        return ""
    return live_part(TEMPLATE + "#result", ComparePage.of(session))
