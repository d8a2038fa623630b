"""The distributed profile's slots (decks_app.runs.slots): idle waits drawn at random, cut
short by a sibling that found a task, and the pool's stop reaching idle slots at once."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from decks_app.runs import slots, worker
from tests.support.postgres import run_probe

pytestmark = pytest.mark.django_db(transaction=True)

# Far longer than any wait below: a slot that slept its whole poll would fail these tests.
LONG_POLL = 60.0


def _slot(idle=None, interval=0.2):
    from django_tasks_db.management.commands.db_worker import Worker

    return slots._slot_worker(Worker, idle)(
        queue_names=["default"],
        interval=interval,
        batch=False,
        backend_name="database",
        startup_delay=False,
        max_tasks=None,
        worker_id="probe/0",
        excluded_queue_names=[],
    )


def test_an_idle_slot_waits_between_half_and_one_and_a_half_polls():
    """The waits are drawn afresh each time, so slots started together drift apart and an
    idle worker's slots look at the queue at different moments."""
    slot = _slot()
    waits = [slot.draw_wait() for _ in range(500)]
    assert all(0.1 <= wait <= 0.3 for wait in waits)
    assert min(waits) < 0.12 and max(waits) > 0.28 and len(set(waits)) > 400


def test_an_idle_slot_polls_again_when_woken_and_ends_when_the_pool_closes(monkeypatch):
    """The slot's loop waits on its pool's idle slots after a poll that found nothing: a
    wake makes it poll at once (its interval is a minute), and closing the pool ends it."""
    polls: list[float] = []
    real_claim = slots.claim_next_task

    def counted(*args):
        polls.append(time.monotonic())
        return real_claim(*args)

    monkeypatch.setattr(slots, "claim_next_task", counted)
    idle = slots.IdleSlots()
    slot = _slot(idle, interval=LONG_POLL)
    thread = threading.Thread(target=slot.run)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not polls and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(polls) == 1  # then it waits
        idle.wake_one()
        deadline = time.monotonic() + 5
        while len(polls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(polls) == 2
    finally:
        slot.running = False
        idle.close()
        thread.join(5)
    assert not thread.is_alive()


def test_a_slot_claims_in_the_backends_order_and_skips_other_queues_and_later_tasks():
    """On SQLite (the test database) the claim is the backend's own; on PostgreSQL it is one
    statement, checked against the same order below."""
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    from decks_app.runs import tasks

    def enqueue(name: str, **using) -> str:
        return tasks.execute_run.using(backend="database", **using).enqueue(name).id

    first = enqueue("first")
    urgent = enqueue("urgent", priority=10)
    enqueue("later", run_after=timezone.now() + datetime.timedelta(hours=1))
    # A queue the backend is not configured for cannot be enqueued to: moved there.
    DBTaskResult.objects.filter(pk=enqueue("elsewhere")).update(queue_name="other")
    claimed = []
    while (row := slots.claim_next_task("database", ["default"], "probe/0")) is not None:
        claimed.append(str(row.pk))
    assert claimed == [urgent, first]
    stored = DBTaskResult.objects.get(pk=first)
    assert stored.status == "RUNNING" and stored.worker_ids == ["probe/0"] and stored.started_at


def test_on_postgresql_a_slot_claims_in_one_statement_in_the_backends_order(pg_database, tmp_path):
    out = run_probe("tests.decks_app.runs.pg_claim_probe", pg_database, tmp_path)
    assert out["vendor"] == "postgresql"
    assert out["queries_per_claim"] == 1
    assert out["backends_order"] == out["expected_order"]
    assert [c["id"] for c in out["claimed"]] == out["expected_order"]
    for claim in out["claimed"]:
        assert claim["as_stored"] and claim["status"] == "RUNNING" and claim["started"]
    assert [c["worker_ids"] for c in out["claimed"]] == [
        ["probe/0"],
        ["probe/0"],
        ["an earlier worker", "probe/0"],
    ]
    assert [c["args"] for c in out["claimed"]] == [["urgent"], ["first"], ["second"]]
    assert out["later_still_ready"] is True
    assert len(out["other_queue"]) == 1
    skipped_to, free = out["skipped_held"]
    assert skipped_to == free  # the row another transaction held was skipped, not waited for
    assert out["held_after"] is True
    assert out["concurrent"] == {"taken": 40, "distinct": 40, "all": True}


def test_a_wake_cuts_one_wait_short_and_is_kept_when_nobody_waits():
    idle = slots.IdleSlots()
    returned: list[bool] = []
    waiter = threading.Thread(target=lambda: returned.append(idle.wait(LONG_POLL)))
    waiter.start()
    time.sleep(0.05)  # the waiter is waiting (or the wake is kept for it: the same result)
    idle.wake_one()
    waiter.join(LONG_POLL / 2)
    assert not waiter.is_alive() and returned == [True]
    assert idle.wait(0.05) is False  # that wake was taken: nothing is left for this one
    # One wake with no slot waiting lets one wait return at once, not two.
    idle.wake_one()
    idle.wake_one()
    assert idle.wait(LONG_POLL) is True
    assert idle.wait(0.05) is False  # the second wake was not counted
    idle.close()
    assert idle.wait(LONG_POLL) is True  # a closed pool's slots do not wait


def _enqueue(n: int) -> None:
    from decks_app.runs import tasks

    for i in range(n):
        tasks.execute_run.using(backend="database").enqueue(f"run_{i:026d}")


async def _successful(count: int, seconds: float) -> bool:
    from django_tasks_db.models import DBTaskResult

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await DBTaskResult.objects.filter(status="SUCCESSFUL").acount() == count:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_slot_that_finds_a_task_wakes_the_next_one(monkeypatch):
    """Three idle slots whose next poll is at least 30 s away, and three tasks that each wait
    until all three run at once: they complete only if the wake passes from slot to slot
    (one woken slot, polling again after its task, could not run them). Stopping the pool
    then ends its idle threads at once."""
    monkeypatch.setattr(slots, "POLL_SECONDS", LONG_POLL)
    together = threading.Barrier(3, timeout=LONG_POLL / 4)
    ran: list[str] = []

    def execute(run_id: str) -> str:
        together.wait()
        ran.append(threading.current_thread().name)
        return "completed"

    monkeypatch.setattr(worker, "execute", execute)
    pool = slots.DatabaseWorkers(3, backend="database").start()
    try:
        await asyncio.sleep(0.3)  # each slot polled the empty queue once and waits
        await sync_to_async(_enqueue)(3)
        assert not await _successful(3, 0.5) and together.n_waiting == 0, "nobody woke a slot"
        pool.idle.wake_one()  # as a sibling's claim does
        assert await _successful(3, LONG_POLL / 4)
    finally:
        pool.stop()
        await asyncio.to_thread(pool.join, LONG_POLL / 4)
    assert sorted(ran) == ["db-worker-0", "db-worker-1", "db-worker-2"]
    assert not any(thread.is_alive() for thread in pool.threads)
