"""The registry of live views: the parts of pages that follow their session's socket
(docs/simulator.md, "Live updates").

There is one live-update path. Every live page connects to the websocket of the session its
runs belong to (`/ws/sessions/<id>/`, `decks_app.sessions.consumers`), which reads the
database after every notification (and on a safety poll) and sends htmx out-of-band swaps
rendered server side from the page's own template partials:

- the session page says where it stopped (`{"after", "version", "status"}`): it gets the
  raw rows of the events after its cursor, its live area and, when the conversation moved
  on, the session-level partials (`decks_app.sessions.fragments`);
- any other live page names a view registered here (`data-live-view`) and what it shows
  (`data-live-key`: a run id, a deck path): it gets that part again whenever it changed.

A view registers itself where it is defined, as a run kind does:

    @live_view("grade_run")
    def live_result(session_id: str, run_id: str) -> str: ...

The function returns the part's HTML with `hx-swap-oob="true"`, or "" when the key does not
belong to that session (never another session's data). The app imports the modules that
register views when it starts (`decks_app.apps`), so this module imports no feature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Render = Callable[[str, str], str]  # (session id, key) -> the part as an OOB swap, or ""


@dataclass(frozen=True)
class LiveView:
    name: str
    render: Render
    description: str


_VIEWS: dict[str, LiveView] = {}


def live_view(name: str) -> Callable[[Render], Render]:
    """Register `render` as the live view `name` (the page's `data-live-view`)."""

    def register(render: Render) -> Render:
        known = _VIEWS.get(name)
        if known is not None and known.render.__qualname__ != render.__qualname__:
            raise ValueError(f"live view {name!r} is already registered ({known.render!r})")
        doc = (render.__doc__ or "").strip().splitlines()
        _VIEWS[name] = LiveView(name, render, doc[0] if doc else "")
        return render

    return register


def get(name: object) -> LiveView | None:
    return _VIEWS.get(name) if isinstance(name, str) else None


def views() -> list[LiveView]:
    """Every registered live view, by name."""
    return [_VIEWS[name] for name in sorted(_VIEWS)]


def live_html(view: str, session_id: str, key: str) -> str:
    """The live part of `view` for the socket of `session_id`, or "" (unknown view or key)."""
    registered = _VIEWS.get(view)
    return registered.render(session_id, key) if registered is not None else ""
