"""The session websocket: origin check, replay after the cursor, live follow, 404."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from decks_app.models import Run, TraceEvent
from decks_app.runs import events as event_log
from decks_app.sessions.actions import create_session
from decks_app.workspaces.served import current_workspace, jailed_path
from simulator.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


def _deck_file(session) -> str:
    return str(jailed_path(session.workspace, session.deck_path))


def _session_with_events(n: int = 3):
    """A running turn of the session's deck: its model call, then n - 1 text deltas."""
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    run = Run.objects.create(session=session, status="running")
    call = {"type": "model.call", "runId": "run-1", "deckPath": _deck_file(session)}
    TraceEvent.objects.create(
        run=run, session=session, seq=1, type="model.call", payload=call, ts=0
    )
    for i in range(2, n + 1):
        _add_delta(session, run, i, f"<d{i}>")
    return session, run


def _add_delta(session, run, seq, text):
    payload = {
        "type": "response.output_text.delta",
        "_gambit": {"deck_path": _deck_file(session)},
        "item_id": "m1",
        "delta": text,
    }
    TraceEvent.objects.create(
        run=run, session=session, seq=seq, type=payload["type"], payload=payload, ts=0
    )


async def _connect(session_id, headers=ORIGIN):
    comm = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers=headers)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


async def test_it_replays_events_after_the_cursor_then_follows():
    session, run = await sync_to_async(_session_with_events)(3)
    comm, connected, _ = await _connect(session.id)
    assert connected
    first_id = await TraceEvent.objects.filter(run=run, seq=1).values_list("id", flat=True).aget()
    await comm.send_json_to({"after": first_id, "version": 0, "status": "running"})
    html = await comm.receive_from(timeout=5)
    assert "&lt;d2&gt;&lt;d3&gt;" in html and "<d2>" not in html
    assert 'hx-swap-oob="beforeend"' in html and 'id="cursor"' in html
    await sync_to_async(_add_delta)(session, run, 4, "live!")
    await event_log.notify(session.id)
    html = await comm.receive_from(timeout=5)
    # the live area again, whole, from the conversation's own bubble partial
    assert '<div id="live" class="conversation live" hx-swap-oob="true">' in html
    assert '<div class="bubble assistant streaming"' in html
    assert "&lt;d2&gt;&lt;d3&gt;live!" in html
    # one row appended to the raw event list for the new event
    assert '<ol id="raw-events" hx-swap-oob="beforeend">' in html
    assert html.count("<li value=") == 1 and "#4" in html
    await comm.disconnect()


async def test_it_sends_session_fragments_when_a_run_ends():
    session, run = await sync_to_async(_session_with_events)(2)
    comm, connected, _ = await _connect(session.id)
    last = await TraceEvent.objects.filter(run=run).values_list("id", flat=True).alast()
    await comm.send_json_to({"after": last, "version": 0, "status": "running"})
    await comm.receive_from(timeout=5)
    await Run.objects.filter(pk=run.id).aupdate(status="completed")
    await event_log.notify(session.id)
    html = await comm.receive_from(timeout=5)
    assert 'id="conversation"' in html and 'id="status"' in html and "completed" in html
    assert 'id="trace-panel"' in html and html.count("<li value=") == 0  # rows stay as they are
    await comm.disconnect()


async def test_it_rejects_foreign_origins():
    session, _ = await sync_to_async(_session_with_events)(1)
    comm, connected, _ = await _connect(
        session.id, headers=[(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1:8000")]
    )
    assert not connected


async def test_it_closes_for_unknown_or_malformed_sessions():
    for sid in ["session-0123456789abcdef01234567", "not-an-id"]:
        comm, connected, code = await _connect(sid)
        assert not connected
        assert code == 4404


async def test_it_waits_for_the_hello_before_sending():
    session, _ = await sync_to_async(_session_with_events)(2)
    comm, connected, _ = await _connect(session.id)
    assert await comm.receive_nothing(timeout=0.2)
    await comm.send_to(text_data="not json")
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()
    await asyncio.sleep(0)


async def test_the_trace_panel_is_updated_in_place_on_structural_events():
    session, run = await sync_to_async(_session_with_events)(2)
    comm, connected, _ = await _connect(session.id)
    last = await TraceEvent.objects.filter(run=run).values_list("id", flat=True).alast()
    await comm.send_json_to({"after": last, "version": 0, "status": "running"})
    await comm.receive_from(timeout=5)

    def add(seq, payload):
        return TraceEvent.objects.create(
            run=run, session=session, seq=seq, type=payload["type"], payload=payload, ts=1
        ).id

    start = await sync_to_async(add)(10, {"type": "run.start", "runId": "run-x", "ts": 1000})
    call = await sync_to_async(add)(
        11, {"type": "model.call", "model": "m<1>", "actionCallId": "a", "ts": 1010}
    )
    await event_log.notify(session.id)
    html = await comm.receive_from(timeout=5)
    # The new run is appended to the tree with its model call inside: no whole panel.
    assert 'id="trace-panel"' not in html
    assert '<ul id="trace-tree" hx-swap-oob="beforeend">' in html
    assert f'id="tn-{start}"' in html and f'id="tn-{call}"' in html and "m&lt;1&gt;" in html
    assert "calling" in html

    await sync_to_async(add)(
        12,
        {
            "type": "model.result",
            "model": "m<1>",
            "actionCallId": "a",
            "ts": 1250,
            "durationMs": 240,
            "usage": {"promptTokens": 7, "completionTokens": 3, "totalTokens": 10},
        },
    )
    await event_log.notify(session.id)
    html = await comm.receive_from(timeout=5)
    # Only the call's head and body change (and the run's timeline): nothing is appended.
    assert "trace-tree" not in html
    assert f'<span id="tn-{call}-head" hx-swap-oob="true">' in html
    assert f'<div id="tn-{call}-body" class="node-body" hx-swap-oob="true">' in html
    assert f'<div id="tn-{start}-body" class="node-body" hx-swap-oob="true">' in html
    assert "240 ms" in html and "10 tok" in html and 'id="trace-totals"' in html
    # the heading counts the running run's calls so far (it said 0 until the run ended)
    assert re.search(r'id="trace-totals"[^>]*>10 tokens', html)
    await comm.disconnect()


async def test_a_lost_notification_only_delays_the_page(monkeypatch):
    from decks_app.sessions import consumers

    monkeypatch.setattr(consumers, "SAFETY_POLL_SECONDS", 0.1)
    session, run = await sync_to_async(_session_with_events)(2)
    comm, connected, _ = await _connect(session.id)
    last = await TraceEvent.objects.filter(run=run).values_list("id", flat=True).alast()
    await comm.send_json_to({"after": last, "version": 0, "status": "running"})
    await comm.receive_from(timeout=5)
    await sync_to_async(_add_delta)(session, run, 5, "unannounced")  # no notify
    html = await comm.receive_from(timeout=5)
    assert "unannounced" in html
    await comm.disconnect()


async def test_it_sends_nothing_when_nothing_changed(monkeypatch):
    from decks_app.sessions import consumers

    monkeypatch.setattr(consumers, "SAFETY_POLL_SECONDS", 0.05)
    session, run = await sync_to_async(_session_with_events)(2)
    comm, connected, _ = await _connect(session.id)
    last = await TraceEvent.objects.filter(run=run).values_list("id", flat=True).alast()
    await comm.send_json_to({"after": last, "version": 0, "status": "running"})
    await comm.receive_from(timeout=5)  # the first answer always carries the cursor
    await event_log.notify(session.id)
    assert await comm.receive_nothing(timeout=0.4)
    await comm.disconnect()


@pytest.mark.parametrize(
    "hello",
    ['{"after": 1e999}', "[" * 5000 + "]" * 5000, '{"after": true, "version": "x"}',
     '{"after": 99999999999999999999999}', '{"after": -5.5}', "not json", "x" * 10_000],
)  # fmt: skip
async def test_a_malformed_hello_is_ignored_and_the_socket_stays_open(hello):
    session, _ = await sync_to_async(_session_with_events)()
    comm, connected, _ = await _connect(session.id)
    assert connected
    await comm.send_to(text_data=hello)
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_json_to({"after": 0, "version": -1})  # a real hello still works
    assert "cursor" in await comm.receive_from(timeout=5)
    await comm.disconnect()


async def test_an_unrouted_websocket_path_is_refused_cleanly():
    comm = WebsocketCommunicator(application, "/ws/nowhere/", headers=ORIGIN)
    connected, code = await comm.connect(timeout=5)
    assert not connected and code == 4404


async def test_big_messages_go_out_in_frames_under_the_servers_limit():
    """Three 100,000-character messages (the maximum) and their echoes: every frame stays
    well under autobahn's 1 MiB limit, and a hello at the current cursor and status gets the
    cursor back, not the page again."""
    from decks_app.sessions import fragments

    def big_session():
        session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
        text = "é" * 100_000
        session.messages = [{"role": r, "content": text} for r in ("user", "assistant") * 3]
        session.format = "chat"
        session.state_version = 3
        session.save()
        run = Run.objects.create(session=session, status="completed")
        TraceEvent.objects.create(
            run=run, session=session, seq=1, type="model.call",
            payload={"type": "model.call", "items": [{"text": text}] * 6}, ts=0,
        )  # fmt: skip
        return session

    session = await sync_to_async(big_session)()
    comm, connected, _ = await _connect(session.id)
    await comm.send_json_to({"after": 0, "version": -1})
    # The answer ends with the cursor: read frames until it (a loaded machine may take a
    # while to render three 100,000-character messages).
    frames = [await comm.receive_from(timeout=20)]
    while 'id="cursor"' not in frames[-1]:
        frames.append(await comm.receive_from(timeout=20))
    sizes = [len(f.encode()) for f in frames]
    assert len(frames) > 1 and max(sizes) < 1024 * 1024, sizes
    assert max(sizes) <= fragments.FRAME_BYTES + 250_000  # one bubble may exceed by itself
    assert sum(f.count('class="bubble user"') for f in frames) == 3
    last = frames[-1]
    after = int(last.split('data-after="')[1].split('"')[0])
    assert 'data-status="completed"' in last
    await comm.disconnect()
    comm, _, _ = await _connect(session.id)
    await comm.send_json_to({"after": after, "version": 3, "status": "completed"})
    reply = await comm.receive_from(timeout=5)
    assert 'id="cursor"' in reply and len(reply) < 500
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_a_dropped_notification_of_a_new_run_reaches_an_idle_page(monkeypatch):
    """The page said hello while idle; the run's start and end notifications were lost (a
    full channel): the idle poll still brings the page up to date."""
    from decks_app.sessions import consumers

    monkeypatch.setattr(consumers, "IDLE_POLL_SECONDS", 0.1)
    session, run = await sync_to_async(_session_with_events)(2)
    await Run.objects.filter(pk=run.id).aupdate(status="completed")
    comm, connected, _ = await _connect(session.id)
    last = await TraceEvent.objects.filter(run=run).values_list("id", flat=True).alast()
    await comm.send_json_to({"after": last, "version": 0, "status": "completed"})
    await comm.receive_from(timeout=5)
    await Run.objects.acreate(session=session, status="running")  # no notify
    html = await comm.receive_from(timeout=5)
    assert 'data-status="running"' in html and 'id="status"' in html
    await comm.disconnect()


def test_event_rows_are_one_raw_row_each():
    """New events get their raw rows one piece each (frames are cut between them); the live
    area is never appended to, it is rendered again whole."""
    from decks_app.sessions import fragments

    session, run = _session_with_events(3)
    rows = list(TraceEvent.objects.filter(run=run).order_by("id"))
    pieces = fragments.event_rows(rows)
    assert len(pieces) == 3 and all(
        '<ol id="raw-events" hx-swap-oob="beforeend">' in p for p in pieces
    )
    assert not any('id="live"' in p for p in pieces)


def _grade_run_of(session):
    """A queued grade run of `session` in its own grading session (as the Grade tab makes)."""
    from decks_app.models import Session

    grading = Session.objects.create(
        id=f"session-{'ab' * 12}",
        workspace=session.workspace,
        deck_path=session.deck_path,
        origin="grade",
        source=session,
    )
    return Run.objects.create(
        session=grading,
        kind="grader",
        status="queued",
        params={"grader": "support/graders/tone/PROMPT.md"},
    )


async def test_a_live_page_gets_its_part_again_only_when_it_changed():
    """The Grade run page (like Verify, compare and the Build assistant) follows its
    session's socket: its hello names the view, the socket sends the part rendered server
    side as an out-of-band swap, and again only once the run moved on."""
    session, _ = await sync_to_async(_session_with_events)(1)
    run = await sync_to_async(_grade_run_of)(session)
    comm, connected, _ = await _connect(run.session_id)
    assert connected
    await comm.send_json_to({"view": "grade_run", "key": run.id})
    html = await comm.receive_from(timeout=5)
    assert html.startswith('\n  <div id="grade-result"') or '<div id="grade-result"' in html
    assert 'hx-swap-oob="true"' in html and 'data-status="queued"' in html
    await event_log.notify(run.session_id)  # nothing changed: nothing sent
    assert await comm.receive_nothing(timeout=0.5)
    await Run.objects.filter(pk=run.id).aupdate(status="failed", error="no <b>luck</b>")
    await event_log.notify(run.session_id)
    html = await comm.receive_from(timeout=5)
    assert 'data-status="failed"' in html and "no &lt;b&gt;luck&lt;/b&gt;" in html
    await comm.disconnect()


async def test_a_live_page_is_not_swapped_on_connect_when_its_part_has_not_changed():
    """The page says in its hello the digest of the part it was rendered with: the socket's
    first answer is sent only when the part changed since (a swap on connect would replace a
    flag reason being typed), and a hello without a digest always gets the part."""
    import re

    from django.test import Client

    session, _ = await sync_to_async(_session_with_events)(1)
    run = await sync_to_async(_grade_run_of)(session)
    page = await sync_to_async(Client().get)(f"/grade/runs/{run.id}")
    assert page.status_code == 200
    digest = re.search(r'data-live-digest="([0-9a-f]{32})"', page.content.decode()).group(1)
    comm, connected, _ = await _connect(run.session_id)
    assert connected
    await comm.send_json_to({"view": "grade_run", "key": run.id, "digest": digest})
    assert await comm.receive_nothing(timeout=0.5)  # the page already shows this part
    await Run.objects.filter(pk=run.id).aupdate(status="failed", error="gone")
    await event_log.notify(run.session_id)
    assert 'data-status="failed"' in await comm.receive_from(timeout=5)
    await comm.disconnect()
    for hello in ({"digest": digest}, {"digest": "0" * 32}, {}):  # stale or absent: sent
        comm, connected, _ = await _connect(run.session_id)
        await comm.send_json_to({"view": "grade_run", "key": run.id, **hello})
        assert 'data-status="failed"' in await comm.receive_from(timeout=5)
        await comm.disconnect()


async def test_a_live_page_never_gets_another_sessions_part():
    session, _ = await sync_to_async(_session_with_events)(1)
    run = await sync_to_async(_grade_run_of)(session)
    comm, connected, _ = await _connect(session.id)  # the socket of the graded session
    assert connected
    await comm.send_json_to({"view": "grade_run", "key": run.id})  # a run of another session
    assert await comm.receive_nothing(timeout=0.5)
    await comm.send_json_to({"view": "no-such-view", "key": run.id})
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()
