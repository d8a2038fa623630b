"""The session websocket: replay from the database after the client's cursor, then follow.

Protocol: the client connects to `/ws/sessions/<id>/` and sends `{"after": N, "version": V}`
(its last event id and conversation version, kept in the page's `#cursor` element, so a
reconnect resumes where it stopped). The consumer answers with htmx out-of-band fragments
for every stored event after N, then for every `session.changed` notification it reads the
database again. A lost notification delays text; it never loses it (docs/simulator.md).

Other live pages (a grade run, a Verify batch, a replay's comparison, the Build assistant)
say `{"view": V, "key": K, "digest": D}` instead, V a view registered with `@live_view` and D
the digest of the part as the page shows it: the socket then sends their live part,
re-rendered from their template whenever the session moves on and it changed
(`decks_app.web.live`, the one live-update path).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from decks_app.runs import events as event_log
from decks_app.sessions import fragments, live_turn
from decks_app.sessions.actions import get_session
from decks_app.sessions.conversation import conversation_blocks
from decks_app.sessions.session_page import SessionPage
from decks_app.web import live
from decks_app.web.pages import live_digest

BATCH = 500
# While a run is active, re-read the database this often even without a notification, so a
# notification dropped by a full channel layer delays the page but never stalls it.
SAFETY_POLL_SECONDS = 2.0
# With no run active the page is re-read less often, but still: a run started by a POST
# announces itself by a notification, and if that one is dropped the page must still
# learn of the run (a full channel once left a page idle for good).
IDLE_POLL_SECONDS = 5.0
ACTIVE = ("queued", "running")


def _read(session_id: str, after: int, version: int, status: str | None, force: bool = False):
    """New event fragments after the cursor and, when the conversation or the status moved
    on, the session-level fragments too. Returns (frames, new cursor, version, status, more)."""
    session = get_session(session_id)
    if session is None:
        return None
    new = event_log.events_after(session_id, after, BATCH)
    parts = fragments.event_rows(new)
    cursor = new[-1].pk if new else after
    last = session.runs.order_by("-created_at").values("status").first()
    current_status = last["status"] if last else "idle"
    current_version = session.state_version
    changed = current_version != version or current_status != status
    if changed:
        page = SessionPage.of(session, rerun=False)
        if page.cursor > cursor:  # events stored meanwhile: their raw rows too
            between = event_log.events_after(session_id, cursor, BATCH)
            parts.extend(fragments.event_rows([e for e in between if e.pk <= page.cursor]))
        parts.extend(fragments.session_fragments(page))
        current_version = page.version
        current_status = page.status
        cursor = max(cursor, page.cursor)
    elif new:
        # The same conversation: what the active run added since it was saved (the live
        # area, from the same partials), and the trace panel updated in place from the
        # events of the runs that moved on (a model call, tool call or nested deck).
        active = session.runs.filter(status__in=ACTIVE).order_by("created_at").first()
        if active is not None and any(e.run_id == active.id for e in new):
            pending = live_turn.run_pending(active, session, cursor)
            parts.append(fragments.live_fragment(session, conversation_blocks(pending)))
        moved = list(dict.fromkeys(e.run_id for e in new if not e.type.startswith("response.")))
        for run_id in moved:
            run = session.runs.filter(pk=run_id).first()
            if run is not None:
                parts.extend(fragments.trace_updates(session, run, after, cursor))
    more = len(new) == BATCH
    if not new and not changed and not force:
        return [], cursor, current_version, current_status, False  # nothing new
    parts.append(fragments.cursor_fragment(cursor, current_version, current_status))
    return fragments.frames(parts), cursor, current_version, current_status, more


def _read_view(session_id: str, view: str, key: str) -> tuple[str, str] | None:
    """A live page's part as it is now, and the session's status (for the poll's pace)."""
    session = get_session(session_id)
    if session is None:
        return None
    last = session.runs.order_by("-created_at").values("status").first()
    return live.live_html(view, session_id, key), last["status"] if last else "idle"


def _view_hello(text: str | None) -> tuple[str, str, str] | None:
    """A live page's hello `{"view": V, "key": K, "digest": D}` (V a registered live view,
    D optional), or None."""
    try:
        data: Any = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    registered, key = live.get(data.get("view")), data.get("key", "")
    if registered is None or not isinstance(key, str) or len(key) > 1024:
        return None
    digest = data.get("digest")
    return registered.name, key, digest if isinstance(digest, str) else ""


def _hello(text: str | None) -> tuple[int, int, str | None] | None:
    """The client's hello `{"after": N, "version": V, "status": S}`, or None when it is not
    one (bad JSON, nesting, numbers that are not whole, wrong types): ignored, never fatal."""
    try:
        data: Any = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "after" not in data:
        return None
    after, version, status = data.get("after"), data.get("version", -1), data.get("status")

    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and -1 <= value < 2**62

    if after is None:
        after = 0
    if version is None:
        version = -1
    if not whole(after) or not whole(version):
        return None
    return max(0, after), version, status if isinstance(status, str) else None


class SessionConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.session_id = self.scope["url_route"]["kwargs"]["session_id"]
        exists = await database_sync_to_async(get_session)(self.session_id)
        if exists is None:
            await self.close(code=4404)
            return
        self.group = event_log.group_name(self.session_id)
        self.after: int | None = None  # unknown until the client says hello
        self.version = -1
        self.status: str | None = None
        self.lock = asyncio.Lock()
        self.poller: asyncio.Task | None = None
        self.view: tuple[str, str] | None = None  # a live page's (view, key), not the session page
        self.sent = ""  # the digest of what a live page shows (sent last, or said in its hello)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        poller = getattr(self, "poller", None)  # unset when connect() refused the socket
        if poller is not None:
            poller.cancel()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(SAFETY_POLL_SECONDS if self.status in ACTIVE else IDLE_POLL_SECONDS)
            await self.catch_up()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is not None and len(text_data) > 4096:
            return  # a hello is a few dozen characters
        view = _view_hello(text_data)
        hello = _hello(text_data) if view is None else (0, -1, None)
        if hello is None:
            return
        self.after, self.version, self.status = hello
        self.view, self.sent = (view[:2], view[2]) if view is not None else (None, "")
        await self.catch_up(force=True)  # the answer to a hello always carries the cursor
        if self.poller is None:
            self.poller = asyncio.create_task(self._poll())

    async def session_changed(self, message: dict[str, Any]) -> None:
        if self.after is not None:
            await self.catch_up()

    async def catch_up(self, force: bool = False) -> None:
        async with self.lock:
            if self.view is not None:
                await self._follow_view()
                return
            while True:
                result = await database_sync_to_async(_read)(
                    self.session_id, self.after or 0, self.version, self.status, force
                )
                if result is None:
                    await self.close(code=4404)
                    return
                frames, self.after, self.version, self.status, more = result
                for frame in frames:
                    await self.send(text_data=frame)
                if not more:
                    return

    async def _follow_view(self) -> None:
        """A live page: its part again, sent only when it differs from the last one sent."""
        assert self.view is not None
        result = await database_sync_to_async(_read_view)(self.session_id, *self.view)
        if result is None:
            await self.close(code=4404)
            return
        html, self.status = result
        digest = live_digest(html) if html else ""
        if html and digest != self.sent:
            self.sent = digest
            for frame in fragments.frames([html]):
                await self.send(text_data=frame)
