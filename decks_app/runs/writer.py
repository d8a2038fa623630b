"""Writing a run's trace as it happens: events in batches, with the conversation's latest
checkpoint riding along (see `EventWriter`)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Max

from decks_app.models import TraceEvent
from decks_app.runs import events as event_log
from decks_app.runs import outage, rows
from decks_app.runs.database import DATABASE_PATIENCE, db, reset_connection
from decks_app.runs.registry import JSONObject
from decks_app.runs.state import save_turn_state

log = logging.getLogger(__name__)

# How long a batch may wait for more events before it is written. Events (and a checkpoint)
# that arrive within it share one transaction and one notification; a run that ends within
# it writes them with its end (`EventWriter.hand_over`, `finish_run`): a one-turn run then
# takes two transactions instead of five or six. A reader sees text at most this much later.
LINGER_SECONDS = float(os.environ.get("GAMBIT_TRACE_LINGER_MS", "25")) / 1000
# A published conversation (a checkpoint) waits less: long enough for a run that is ending
# to take it along, short enough that a crash rarely finds a finished pass unsaved.
CHECKPOINT_LINGER_SECONDS = min(LINGER_SECONDS, 0.005)
# The columns a conversation save writes (the session's other columns stay as they are).
STATE_FIELDS = ["format", "state_run_id", "messages", "items", "meta", "message_refs"]
STATE_FIELDS += ["state_version", "updated_at"]


@dataclass
class Unwritten:
    """What a writer had not written when the run ended: events numbered from `first_seq`,
    written with the run's end in one transaction."""

    first_seq: int
    events: list[JSONObject] = field(default_factory=list)


class EventWriter:
    """Buffers trace events and writes them in batches: append first, notify second.

    A batch waits up to LINGER_SECONDS for more events, and while a write is in flight new
    events accumulate, so text deltas are coalesced into fewer, larger events (and fewer
    notifications). The run's latest conversation state rides along: each batch is written
    in one transaction with the newest state published before it (a checkpoint), so after a
    crash the database holds the conversation up to the last finished pass plus every event
    after it: no event is ever written without the state published before it.

    The checkpoint records exactly which events its state covers (`checkpointSeq`: those
    added before the state was published), so a page shows the saved conversation plus
    what the events after that seq add, never a message twice (docs/simulator.md, "Live
    updates").
    """

    def __init__(self, run_id: str, session_id: str, next_seq: int):
        self.run_id = run_id
        self.session_id = session_id
        self.next_seq = next_seq
        self.pending: list[JSONObject] = []
        self.state: Any = None  # a published state not yet saved
        self.covered = 0  # how many of `pending` were added before `state` was published
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.wake = asyncio.Event()
        self.closed = False
        self.handing_over = False
        self.done = asyncio.Event()  # closed or handing over: stop lingering
        self.nudge = asyncio.Event()  # a checkpoint or the end: linger less
        self.task = asyncio.create_task(self._pump())
        self.written = 0
        self.failures = 0

    def add(self, event: JSONObject) -> None:
        if threading.get_ident() == self.thread:
            self._add(event)
        else:
            self.loop.call_soon_threadsafe(self._add, event)

    def _add(self, event: JSONObject) -> None:
        self.pending.append(event)
        self.wake.set()

    def checkpoint(self, state: Any) -> None:
        if threading.get_ident() == self.thread:
            self._checkpoint(state)
        else:
            self.loop.call_soon_threadsafe(self._checkpoint, state)

    def _checkpoint(self, state: Any) -> None:
        self.state = state
        self.covered = len(self.pending)
        self.nudge.set()
        self.wake.set()

    async def _pump(self) -> None:
        while True:
            await self.wake.wait()
            await self._linger()
            self.wake.clear()
            self.nudge.clear()
            if self.handing_over:
                return  # what is left goes with the run's end
            await self.flush()
            if self.closed and not self.pending:
                return

    async def flush(self) -> None:
        if not self.pending and self.state is None:
            return
        taken, self.pending = self.pending, []
        state, self.state = self.state, None
        covered, self.covered = self.covered, 0
        # Coalesced on each side of the checkpoint, so the seq it covers stays exact.
        head = event_log.coalesce(taken[:covered])
        batch = head + event_log.coalesce(taken[covered:])
        try:
            first = await db(
                append_and_checkpoint,
                self.run_id,
                self.session_id,
                self.next_seq,
                batch,
                state,
                len(head),
            )
        except DatabaseError as exc:
            # The database is restarting: keep everything and try again (nothing is dropped;
            # deltas that arrive meanwhile are coalesced into the same batch).
            outage.failed("the database", exc)
            self.pending = taken + self.pending
            if self.state is None:
                self.state, self.covered = state, covered
            else:  # a newer checkpoint came meanwhile: it covers what was taken too
                self.covered += len(taken)
            await reset_connection()
            self.failures += 1
            await asyncio.sleep(min(5.0, 0.25 * 2 ** min(self.failures, 5)))
            self.wake.set()
            return
        outage.recovered("the database")
        self.failures = 0
        self.next_seq = first + len(batch)
        self.written += len(batch)
        await event_log.notify(self.session_id)

    async def _linger(self) -> None:
        """Wait for more events: up to LINGER_SECONDS, cut short by the end; once a
        checkpoint is pending, CHECKPOINT_LINGER_SECONDS more at most."""
        if not LINGER_SECONDS or self.done.is_set() or self.failures:
            return
        try:
            await asyncio.wait_for(self.nudge.wait(), LINGER_SECONDS)
        except TimeoutError:
            return
        if self.done.is_set():
            return
        try:
            await asyncio.wait_for(self.done.wait(), CHECKPOINT_LINGER_SECONDS)
        except TimeoutError:
            pass

    async def hand_over(self) -> Unwritten:
        """Stop writing and hand what is left to the run's end (`finish_run` writes it in its
        transaction, with the final state). A write in flight finishes first."""
        self.handing_over = True
        self.done.set()
        self.nudge.set()
        self.wake.set()
        await asyncio.shield(self.task)
        rest = Unwritten(self.next_seq, event_log.coalesce(self.pending))
        self.pending, self.state, self.covered = [], None, 0
        return rest

    async def close(self, wait: float = DATABASE_PATIENCE) -> None:
        """Write what is left; while the database is down, wait for it up to `wait` s."""
        self.closed = True
        self.done.set()
        self.nudge.set()
        self.wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout=wait)
        except TimeoutError:
            self.task.cancel()
            log.error(
                "run %s: %d trace event(s) could not be written: the database stayed away",
                self.run_id,
                len(self.pending),
            )


def append_and_checkpoint(
    run_id: str,
    session_id: str,
    first: int,
    batch: list[JSONObject],
    state: Any,
    covered: int | None = None,
) -> int:
    """Append a batch (and save a checkpoint) in one transaction; return the first seq used.
    The state covers the batch's first `covered` events (all of them when None).

    Another process may have appended to this run's trace meanwhile (a `run.end` when it
    marked the run interrupted): the batch then moves after what is there.
    """
    try:
        _write_batch(run_id, session_id, first, batch, state, covered)
        return first
    except IntegrityError:
        first = (TraceEvent.objects.filter(run_id=run_id).aggregate(m=Max("seq"))["m"] or 0) + 1
        _write_batch(run_id, session_id, first, batch, state, covered)
        return first


def _write_batch(
    run_id: str,
    session_id: str,
    first: int,
    batch: list[JSONObject],
    state: Any,
    covered: int | None,
) -> None:
    if state is None and not transaction.get_connection().in_atomic_block:
        # Events alone are one statement, atomic by itself: no BEGIN and COMMIT around it
        # (two round trips fewer for most of a run's batches).
        event_log.append_events(run_id, session_id, first, batch)
        return
    with transaction.atomic():
        event_log.append_events(run_id, session_id, first, batch)
        if state is None:
            return
        run = rows.read_run(run_id, lock=True)
        if run is None or run.status != "running":
            return  # no longer this run's conversation to write (stopped or interrupted)
        session = run.session
        covered = len(batch) if covered is None else covered
        if save_turn_state(run, session, state, last_seq=first + covered - 1):
            rows.save_fields(session, STATE_FIELDS)
            rows.save_fields(run, ["turn_base"])
