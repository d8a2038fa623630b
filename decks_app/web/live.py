"""Live pages other than the session page follow their session's socket too (see
docs/simulator.md, "Live updates").

A page that shows something a run changes (a grade run's result, a Verify batch's progress,
a replay's comparison, the Build assistant's chat) puts `ws-connect` to the socket of the
session that run belongs to and names its live part: `data-live-view` (a key of
`LIVE_VIEWS`) and `data-live-key` (what the page shows: a run id, a deck path). The socket
re-renders that part, server side, from the page's own template partial whenever the session
moves on (a notification, or the socket's safety poll), and sends it as an htmx out-of-band
swap when it differs from what it sent last.

Each entry names a function `(session_id, key) -> str`: the part's HTML with
`hx-swap-oob="true"`, or "" when the key does not belong to that session (never another
session's data). Named by dotted path, so this module imports no feature.
"""

from __future__ import annotations

from collections.abc import Callable

from django.utils.module_loading import import_string

LIVE_VIEWS: dict[str, str] = {
    "grade_run": "decks_app.grading.views.grade.live_result",
    "verify_batch": "decks_app.grading.views.verify.live_batch",
    "compare": "decks_app.sessions.views.compare.live_result",
    "assistant": "decks_app.building.views.live_assistant",
}


def live_html(view: str, session_id: str, key: str) -> str:
    """The live part of `view` for the socket of `session_id`, or "" (unknown view or key)."""
    dotted = LIVE_VIEWS.get(view)
    if dotted is None:
        return ""
    render: Callable[[str, str], str] = import_string(dotted)
    return render(session_id, key)
