"""A run's end, recorded by decks_app.runs.ending: the outcome, the trace events its writer
had not written and whatever the caller adds (`also`) are one transaction, so a failure
anywhere in it leaves the run as it was; the trace goes on after the last event written."""

from __future__ import annotations

import time

import pytest

from decks_app.models import Run, TraceEvent
from decks_app.runs import ending, queue, rows
from decks_app.runs.writer import Unwritten
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace

pytestmark = pytest.mark.django_db(transaction=True)


def _claimed_run() -> Run:
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    run = send_message(session, "hello")
    assert queue.claim_run(run.id, "test-worker") is not None
    return Run.objects.get(pk=run.id)


def _event(kind: str) -> dict:
    return {"type": kind, "ts": int(time.time() * 1000)}


def test_the_end_its_last_events_and_the_callers_writes_commit_together():
    run = _claimed_run()
    rest = Unwritten(first_seq=1, events=[_event("run.start"), _event("run.end")])
    other = _claimed_run()  # a row the caller's write changes (as a slot's task row)
    counts: list[int] = []

    def also(writes: rows.Writes) -> None:
        writes.update_if(Run, other.id, {"status": "running"}, {"error": "marked"}, counts.append)

    ending.finish_run(
        run.id, "completed", "", None, ending.RunProgress(), time.monotonic(), rest, also=also
    )

    run.refresh_from_db()
    assert run.status == "completed" and run.finished_at is not None
    assert list(TraceEvent.objects.filter(run=run).order_by("seq").values_list("seq", "type")) == [
        (1, "run.start"),
        (2, "run.end"),
    ]
    # The caller's write went with the end, and was told how many rows it changed.
    assert Run.objects.get(pk=other.id).error == "marked" and counts == [1]


def test_a_failure_in_the_callers_writes_leaves_the_run_running_and_its_trace_unwritten():
    run = _claimed_run()
    rest = Unwritten(first_seq=1, events=[_event("run.start"), _event("run.end")])

    def lost_connection(writes: rows.Writes) -> None:
        raise RuntimeError("the task row could not be marked")

    with pytest.raises(RuntimeError):
        ending.finish_run(
            run.id, "completed", "", None, ending.RunProgress(), None, rest, also=lost_connection
        )

    run.refresh_from_db()
    assert run.status == "running" and run.finished_at is None
    assert not TraceEvent.objects.filter(run=run).exists()


def test_a_run_gone_when_its_writes_are_sent_leaves_nothing_written():
    run = _claimed_run()
    rest = Unwritten(first_seq=1, events=[_event("run.start"), _event("run.end")])
    other = _claimed_run()

    def delete_the_run(writes: rows.Writes) -> None:
        # Deleted after the locked read (as no other process can): its save, sent with the
        # rest, matches no row, and the whole end is rolled back.
        writes.update_if(Run, other.id, {"status": "running"}, {"error": "marked"})
        Run.objects.filter(pk=run.id).delete()

    with pytest.raises(Run.DoesNotExist, match=f"Run {run.id} is gone"):
        ending.finish_run(
            run.id, "completed", "", None, ending.RunProgress(), None, rest, also=delete_the_run
        )
    assert Run.objects.get(pk=run.id).status == "running"
    assert Run.objects.get(pk=other.id).error == ""
    assert not TraceEvent.objects.filter(run_id=run.id).exists()


def test_the_next_event_goes_after_the_last_one_written():
    run = _claimed_run()
    assert ending.next_seq(run) == 1
    ending.finish_run(
        run.id, "completed", "", None, ending.RunProgress(), None,
        Unwritten(first_seq=1, events=[_event("run.start"), _event("model.call")]),
    )  # fmt: skip
    assert ending.next_seq(run) == 3


def test_an_end_for_a_run_that_is_gone_says_so():
    run = _claimed_run()
    Run.objects.filter(pk=run.id).delete()
    with pytest.raises(Run.DoesNotExist, match=f"run {run.id} is gone"):
        ending.finish_run(run.id, "completed", "", None, ending.RunProgress(), None)
