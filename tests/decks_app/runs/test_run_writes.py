"""What a run costs the database: a one-turn chat run writes its trace and its conversation in
a couple of transactions (events linger briefly and the last ones go with the run's end,
decks_app.runs.writer), and a crash still loses no finished turn (tests/decks_app/runs/
test_turn_recovery.py covers that side)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from decks_app.models import Run, TraceEvent
from decks_app.runs import executor, queue, writer
from decks_app.runs.database import db
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace

pytestmark = pytest.mark.django_db(transaction=True)


class Statements:
    """The SQL statements run on the runs' database thread (Django's execute wrapper)."""

    def __init__(self) -> None:
        self.sql: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.sql.append(sql)
        return execute(sql, params, many, context)

    def count(self, start: str, table: str) -> int:
        return sum(1 for s in self.sql if s.startswith(start) and f'"{table}"' in s)


async def test_a_one_turn_run_writes_its_trace_and_conversation_in_few_statements(monkeypatch):
    # Longer than the run takes: every event waits, and goes with the run's end.
    monkeypatch.setattr(writer, "LINGER_SECONDS", 5.0)
    monkeypatch.setattr(writer, "CHECKPOINT_LINGER_SECONDS", 5.0)

    def setup() -> Run:
        session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
        return send_message(session, "hello")

    run = await sync_to_async(setup)()
    seen = Statements()
    # The worker's way: the claim reads the run and is handed on (decks_app.runs.worker).
    await db(lambda: connection.execute_wrappers.append(seen))
    try:
        claimed = await db(queue.claim_run, run.id, "w")
        assert claimed is not None and claimed.first_start
        status = await asyncio.wait_for(executor.execute_run(run.id, claimed=claimed), 20)
        assert status == "completed"
    finally:
        await db(lambda: connection.execute_wrappers.remove(seen))
    events = await sync_to_async(TraceEvent.objects.filter(run_id=run.id).count)()
    assert events >= 4  # run.start, model.call, model.result, run.end at least
    # Every event in one insert, written with the run's end, the conversation saved once, the
    # run row read and updated by its claim (with its turn base) and locked (with its session,
    # in one statement) and updated at its end: nothing else.
    assert seen.count("INSERT", "decks_app_traceevent") == 1, seen.sql
    assert seen.count("UPDATE", "decks_app_session") == 1, seen.sql
    assert seen.count("UPDATE", "decks_app_run") == 2, seen.sql
    assert seen.count("SELECT", "decks_app_run") == 2, seen.sql
    assert seen.count("SELECT", "decks_app_session") == 2, seen.sql  # joined to those two
    assert len(seen.sql) == 7, seen.sql
    assert not any(s.startswith("SAVEPOINT") for s in seen.sql), seen.sql
    run = await Run.objects.select_related("session").aget(pk=run.id)
    assert run.session.messages[-1] == {"role": "assistant", "content": "You said: hello"}
    assert run.turn_base["checkpointSeq"] == events  # the saved state covers every event


async def test_a_checkpoint_covers_exactly_the_events_added_before_it(monkeypatch):
    """The saved state covers the events added before it was published, not the whole batch
    it is written with (the session page shows the events after it: docs/simulator.md,
    "Streaming"); deltas are coalesced on each side of that point, never across it."""
    from gambit.core import new_state

    monkeypatch.setattr(writer, "LINGER_SECONDS", 5.0)
    monkeypatch.setattr(writer, "CHECKPOINT_LINGER_SECONDS", 5.0)

    def setup() -> Run:
        session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
        run = send_message(session, "hello")
        Run.objects.filter(pk=run.id).update(status="running")
        run.refresh_from_db()
        run.turn_base = {"messages": 0, "items": 0, "savedMessages": 0, "savedItems": 0}
        run.save(update_fields=["turn_base"])
        return run

    run = await sync_to_async(setup)()
    delta = {"type": "response.output_text.delta", "item_id": "m1"}
    out = writer.EventWriter(run.id, run.session_id, 1)
    out.add({"type": "message.user", "message": {"role": "user", "content": "hello"}})
    out.add({**delta, "delta": "a"})
    out.checkpoint(new_state())
    out.add({**delta, "delta": "b"})
    out.add({**delta, "delta": "c"})
    await out.close()
    rows = [
        (e.seq, e.payload.get("delta"))
        async for e in TraceEvent.objects.filter(run_id=run.id).order_by("seq")
    ]
    assert rows == [(1, None), (2, "a"), (3, "bc")]
    saved = await Run.objects.aget(pk=run.id)
    assert saved.turn_base["checkpointSeq"] == 2
