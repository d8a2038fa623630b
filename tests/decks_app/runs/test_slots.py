"""The distributed profile's slots (decks_app.runs.slots): idle waits drawn at random, cut
short by a sibling that found a task, and the pool's stop reaching idle slots at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async

from decks_app.runs import slots, worker

pytestmark = pytest.mark.django_db(transaction=True)

# Far longer than any wait below: a slot that slept its whole poll would fail these tests.
LONG_POLL = 60.0


def _slot(idle=None):
    from django_tasks_db.management.commands.db_worker import Worker

    return slots._slot_worker(Worker, idle)(
        queue_names=["default"],
        interval=0.2,
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


def test_the_backends_sleep_is_the_wait_on_the_idle_slots():
    """The backend's loop sleeps `interval`: the wait has happened when it is read, and the
    loop's own sleep is 0."""
    idle = slots.IdleSlots()
    idle.wake_one()  # kept for the next slot that goes idle
    assert _slot(idle).interval == 0.0


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
