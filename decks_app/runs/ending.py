"""How a run ended, recorded: its status, error and typed result, the trace events its writer
had not written yet, the session's new SavedState, usage and cost, in one transaction
(`finish_run`). The executor (decks_app.runs.executor) hands it an `Ending`; the `/v1`
endpoint, which runs its calls in the web process, calls `finish_run` itself.

Like the executor, it knows no feature: a kind's own end is its `finish` hook.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import router, transaction
from django.db.models import Max
from django.utils import timezone

from decks_app.models import Run, TraceEvent
from decks_app.runs import events as event_log
from decks_app.runs import recorded, registry, rows
from decks_app.runs.recovery import recover_interrupted_turn
from decks_app.runs.registry import JSONObject, Payload, RunKind
from decks_app.runs.state import save_turn_state, with_message_refs
from decks_app.runs.writer import STATE_FIELDS, Unwritten

log = logging.getLogger(__name__)


@dataclass
class RunProgress:
    """What a run has produced so far, for its end: the conversation's latest state, the
    usage of its `run_deck` calls, the root deck's `run.start` / `model.result` events (which
    model answered) and, for a compute deck, the transcript we keep for it."""

    state: Any = None
    usage: JSONObject | None = None
    answers: list[JSONObject] = field(default_factory=list)
    root: str | None = None
    transcript: list[JSONObject] = field(default_factory=list)

    def note_answer(self, event: JSONObject) -> None:
        """Keep a root deck's `run.start` / `model.result` (which model answered)."""
        if event.get("type") in ("run.start", "model.result") and not event.get(
            "parentActionCallId"
        ):
            self.answers.append(recorded.answer_of(event))


@dataclass
class Ending:
    """How a run ended, as its run loop leaves it for `end_run` (in one transaction): its
    status, error and result, what it produced, and the trace events not written yet."""

    run_id: str
    session_id: str
    status: str
    error: str
    result: Payload | None
    progress: RunProgress
    started: float | None
    rest: Unwritten | None


def end_run(ending: Ending, *, also: Callable[[rows.Writes], None] | None = None) -> None:
    """Record how the run ended (`finish_run`, one transaction); `also` adds writes to it
    (a slot's task row: `worker._end_run`)."""
    finish_run(
        ending.run_id,
        ending.status,
        ending.error,
        ending.result,
        ending.progress,
        ending.started,
        ending.rest,
        also=also,
    )


def finish_run(
    run_id: str,
    status: str,
    error: str,
    result: Payload | None,
    progress: RunProgress,
    started: float | None,
    rest: Unwritten | None = None,
    *,
    also: Callable[[rows.Writes], None] | None = None,
) -> None:
    """Save the run's outcome, the trace events its writer had not written yet (`rest`) and
    the session's new SavedState in one transaction, with the writes `also` adds last.

    After the locked read, the writes are collected and sent together, just before the
    commit (`rows.Writes`: one statement on PostgreSQL). What was collected before a kind's
    `finish` hook is sent before it runs (the hook may read the run's end); the hook's own
    writes go at once."""
    with transaction.atomic():
        # Both rows locked by one statement (the run's first, as everywhere).
        run = rows.read_run(run_id, lock=True)
        if run is None:
            raise Run.DoesNotExist(f"run {run_id} is gone")
        session = run.session
        try:
            kind: RunKind | None = registry.get(run.kind)
        except registry.UnknownRunKind:
            kind = None
        # A run that was marked interrupted by another process (its heartbeat looked stale)
        # keeps that record; what it did is in its trace.
        owned = run.status == "running"
        if not owned:
            log.warning("run %s ended %s but was already %s", run_id, status, run.status)
            status, error = run.status, run.error
        usage = progress.usage or {}
        writes = rows.Writes(router.db_for_write(Run))
        run.status = status
        run.error = error or ""
        run.finished_at = timezone.now()
        if started is not None:
            run.duration_ms = int((time.monotonic() - started) * 1000)
        run.total_tokens, run.cost = recorded.usage_totals(usage)
        if kind is not None and not kind.billed:
            # The replay provider reports the recorded tokens (comparable with the
            # original), but nothing was billed.
            usage = {k: v for k, v in usage.items() if k not in recorded.COST_KEYS}
            run.cost = 0.0
        run.usage = usage or None
        answered = recorded.answered_model(
            progress.answers, recorded.root_matcher(progress.answers, abs_path=progress.root)
        )
        if answered is not None:  # the model that answered, not the one planned
            run.model, run.offline = answered
        fields = [
            "status",
            "error",
            "finished_at",
            "duration_ms",
            "total_tokens",
            "cost",
            "usage",
            "model",
            "offline",
        ]
        if kind is not None and (result is not None or run.result is not None):
            # (a run of a kind no app registers, or refused, keeps what it had)
            run.result = result
            fields.append("result")
        last_seq = None
        if rest is not None and rest.events:
            # Nobody else writes this run's trace while it runs; a process that ended it
            # meanwhile (holding this lock) may have added its `run.end`: ours go after it.
            first = rest.first_seq if owned else next_seq(run)
            event_log.append_events(run.id, session.id, first, rest.events, writes=writes)
            last_seq = first + len(rest.events) - 1
        state = progress.state
        changed = False
        if not owned:
            pass  # stopped or interrupted by someone else meanwhile: their record stands
        elif state is not None:
            if save_turn_state(run, session, state, last_seq=last_seq):
                changed = True
                fields.append("turn_base")
        elif progress.transcript:
            session.messages = (session.messages or []) + progress.transcript
            session.format = "chat" if not session.items else session.format
            session.message_refs = with_message_refs(session.messages or [], session.message_refs)
            session.state_version += 1
            changed = True
        if "result" in fields:
            registry.check_run(run)  # what `Run.save` checks (`save_fields` does not call it)
        writes.save_fields(run, fields)
        hooked = kind is not None and kind.finish is not None
        if kind is not None and kind.finish is not None:
            writes.send()  # the hook may read the run's end
            kind.finish(run, session)  # it may change the session too: saved whole below
        if status == "interrupted" and owned:
            writes.send()  # it reads the run's trace, the events just added too
            recover_interrupted_turn(run, session)
            changed = True
        if hooked:
            session.save()
        elif changed:
            writes.save_fields(session, STATE_FIELDS)
        if also is not None:
            also(writes)
        writes.send()


def next_seq(run: Run) -> int:
    """The sequence number of the run's next trace event (after the last one written)."""
    return (TraceEvent.objects.filter(run=run).aggregate(m=Max("seq"))["m"] or 0) + 1
