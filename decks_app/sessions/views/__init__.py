"""The Test tab's views, one module per page (docs/simulator.md)."""

from __future__ import annotations

from django.http import Http404

from decks_app.models import Session
from decks_app.sessions.actions import get_session


def session_or_404(session_id: str) -> Session:
    """The session, or a 404 for an unknown or malformed id (never queried when malformed)."""
    session = get_session(session_id)
    if session is None:
        raise Http404("no such session")
    return session
