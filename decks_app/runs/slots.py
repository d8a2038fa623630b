"""The distributed profile's slots: django-tasks-db's `Worker`, one per thread of a `gambit
worker` (and of `gambit serve` on PostgreSQL), each thread a slot that executes one run at a
time (`worker.execute`).

Four things are ours on top of the backend's worker:
- a slot claims its next task in one statement on PostgreSQL (`claim_next_task`);
- a slot marks its task row successful in the transaction of its run's end (`slot_task`);
- an idle slot waits on its pool's `IdleSlots` between polls, so a slot that finds a task
  wakes one idle sibling at once instead of leaving the queue to the siblings' next polls;
- the pool restarts a slot whose worker stopped on a database outage.
The backend's own `run_task` executes each task and records how it ended.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DatabaseError, OperationalError, close_old_connections, connections, router

from decks_app.runs import outage
from decks_app.runs.database import close_connections

log = logging.getLogger(__name__)

# How often an idle database worker thread looks at the queue table.
POLL_SECONDS = float(os.environ.get("GAMBIT_WORKER_POLL_SECONDS", "0.2"))


def warm_up() -> None:
    """Import, before this process claims a run, what a run would otherwise import on first
    use: the channel layer's client (channels_redis and redis-py in the distributed
    profile), jsonschema (a deck's schemas) and anyio's asyncio backend (httpx's first
    request). A worker's first runs paid these, about 0.2 s of imports holding the
    interpreter's lock while every slot had a run claimed (docs/benchmarks.md, "A worker
    warm before its first claim")."""
    import anyio
    import jsonschema  # noqa: F401
    from channels.layers import get_channel_layer

    from decks_app.runs import tasks  # noqa: F401  (django-tasks-db imports it by its path)

    get_channel_layer()
    anyio.run(anyio.sleep, 0)  # loads the backend through anyio's public entry point


class _SlotTask(threading.local):
    """The django-tasks-db row of the task a slot's thread is executing (None outside one,
    and under any other backend).

    The backend's `Worker` marks a task successful in a transaction of its own once the
    task returns. A run's end is a transaction already: the row is marked there
    (`worker._end_run`), and the worker's own write is then skipped, one statement and one
    commit fewer per run (docs/benchmarks.md, "The task's end in the run's end"). A run that
    ends any other way (refused, crashed, lost) leaves it to the worker, as before."""

    row: Any = None
    written = False

    def recorded(self) -> None:
        self.written = True


slot_task = _SlotTask()


class IdleSlots:
    """Where a pool's idle slots wait between polls, and how one of them is woken.

    A slot that claims a task wakes one idle sibling (`wake_one`), which polls at once: if it
    finds a task too it wakes the next, and the chain stops at the first sibling that finds
    the queue empty. Runs queued together so fill a worker's 8 slots in about 60 ms rather
    than over a poll interval (the woken slots take the interpreter's lock in turn), and a
    single run costs one extra poll. A wake that finds no slot waiting is kept (one, not
    counted) for the next slot that goes idle, so a chain is not lost to a sibling that was
    between its poll and its wait (docs/decisions.md, "An idle slot woken by a sibling")."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._woken = False
        self._closed = False

    def wait(self, seconds: float) -> bool:
        """Up to `seconds`, or until a sibling wakes this slot or the pool stops: False when
        the whole wait passed."""
        with self._changed:
            cut_short = self._changed.wait_for(lambda: self._woken or self._closed, seconds)
            self._woken = False
            return cut_short

    def wake_one(self) -> None:
        with self._changed:
            self._woken = True
            self._changed.notify()

    def close(self) -> None:
        """Every waiting slot returns at once, and no slot waits again (the pool stops)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


@cache
def _claim_statement(table: str) -> str:
    from django.tasks import TaskResultStatus

    # The subquery locks the first ready row in the backend's own order (`DBTaskResult.Meta.
    # ordering`, which its partial index serves), skipping rows other slots hold; the UPDATE
    # marks it as the backend's `claim` does, and returns it. The statuses are in the text,
    # not bound: the prepared statement's generic plan then knows that the partial index
    # (`WHERE status = 'READY'`) applies. With the status bound, PostgreSQL planned the claim
    # afresh at every execution (docs/decisions.md, "A slot's claim in one statement").
    return (
        f'UPDATE "{table}" SET "status" = \'{TaskResultStatus.RUNNING}\', "started_at" = %s,'
        ' "worker_ids" = "worker_ids" || jsonb_build_array(%s::text)'
        f' WHERE "id" = (SELECT "id" FROM "{table}"'
        f' WHERE "status" = \'{TaskResultStatus.READY}\' AND ("run_after" = %s OR "run_after" <= %s)'
        ' AND "backend_name" = %s AND "queue_name" = ANY(%s)'
        ' ORDER BY "priority" DESC, "run_after" ASC, "enqueued_at" ASC'
        " LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *"
    )


def claim_next_task(backend: str, queues: Sequence[str], worker_id: str) -> Any:
    """The next ready task of `backend` in `queues`, marked running for `worker_id` (a
    django-tasks-db `DBTaskResult`), or None when there is none.

    On PostgreSQL one statement in autocommit. The backend's loop takes a transaction for the
    same (BEGIN, a locked read, an UPDATE by `save`, COMMIT) and compiles its ORM queries at
    every poll, empty ones included: 15% of a worker's CPU (docs/decisions.md, "A slot's claim
    in one statement"). Elsewhere (SQLite, in tests) as the backend claims: its
    locked read and `claim` in its transaction, a locked database counting as an empty poll."""
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult, get_date_max

    alias = router.db_for_write(DBTaskResult)
    if connections[alias].vendor != "postgresql":
        return _claim_as_the_backend_does(alias, backend, queues, worker_id)
    now = timezone.now()
    statement = _claim_statement(DBTaskResult._meta.db_table)
    params = [now, worker_id, get_date_max(), now, backend, list(queues)]
    claimed = list(DBTaskResult.objects.db_manager(alias).raw(statement, params))
    return claimed[0] if claimed else None


def _claim_as_the_backend_does(
    alias: str, backend: str, queues: Sequence[str], worker_id: str
) -> Any:
    from django_tasks_db.models import DBTaskResult
    from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

    ready = DBTaskResult.objects.using(alias).ready()
    ready = ready.filter(backend_name=backend, queue_name__in=list(queues))
    try:
        with exclusive_transaction(alias):
            row = ready.get_locked()
            if row is not None:
                row.claim(worker_id)
            return row
    except OperationalError as exc:
        if is_locked_database_exception(exc):
            return None  # the backend's loop, too, tries again at its next poll
        raise


def _slot_worker(base: type, idle: IdleSlots | None = None) -> type:
    """django-tasks-db's `Worker` with the slot's own loop: its claim in one statement
    (`claim_next_task`), its idle waits on `idle` (a fresh `IdleSlots` when None), its tasks'
    rows told to `slot_task`. The backend's `run_task` executes each task."""
    idle_slots = idle if idle is not None else IdleSlots()

    class SlotWorker(base):
        def draw_wait(self) -> float:
            """The wait after a poll that found nothing: between half and one and a half of
            the configured interval, drawn each time. Slots started together drift apart
            after their first idle poll, so an idle worker's slots look at the queue at
            different moments and a new run waits a fraction of the interval, not all of it."""
            return float(self.interval) * (0.5 + random.random())

        def run(self) -> None:
            """The backend's `Worker.run`, but for its claim and its wait, until `running`
            is cleared. Without its start-up delay, batch mode and task limit: the pool asks
            for none of them (`gambit worker --burst`/`--max-runs` count runs themselves)."""
            while self.running:
                close_old_connections()  # a connection the database dropped is replaced
                row = claim_next_task(self.backend_name, self.queue_names, self.worker_id)
                if row is not None:
                    self.run_task(row)
                close_old_connections()
                if self.running and row is None:
                    idle_slots.wait(self.draw_wait())

        def run_task(self, db_task_result: Any) -> None:
            idle_slots.wake_one()  # this slot found a task: a sibling looks for the next one
            own = db_task_result.set_successful

            def set_successful(return_value: Any) -> None:
                if not slot_task.written:  # not written with the run's end
                    own(return_value)

            db_task_result.set_successful = set_successful
            slot_task.row, slot_task.written = db_task_result, False
            try:
                super().run_task(db_task_result)
            finally:
                slot_task.row, slot_task.written = None, False

    return SlotWorker


class DatabaseWorkers:
    """`slots` threads, each running django-tasks-db's `Worker`, kept alive through database
    outages (its worker exits on a connection error; this restarts it with backoff)."""

    def __init__(self, slots: int, *, name: str | None = None, backend: str = "default"):
        self.slots = max(1, slots)
        self.name = (name or f"{socket.gethostname()}:{os.getpid()}")[:56]
        self.backend = backend
        self.running = True
        self.idle = IdleSlots()
        self.threads: list[threading.Thread] = []
        self.workers: dict[int, Any] = {}

    def start(self) -> DatabaseWorkers:
        for index in range(self.slots):
            thread = threading.Thread(
                target=self._supervise, args=(index,), name=f"db-worker-{index}", daemon=True
            )
            thread.start()
            self.threads.append(thread)
        return self

    def _supervise(self, index: int) -> None:
        from django_tasks_db.management.commands.db_worker import Worker

        SlotWorker = _slot_worker(Worker, self.idle)
        backoff = 0.0
        # No first wait: a new worker's slots all look at the queue at once, so runs already
        # queued start on every slot together. Their idle waits are drawn at random
        # (`SlotWorker.draw_wait`), which spreads the slots' later polls over the interval.
        # (django-tasks-db's own `startup_delay` waits up to a whole second.)
        while self.running:
            worker = SlotWorker(
                queue_names=["default"],
                interval=POLL_SECONDS,
                batch=False,
                backend_name=self.backend,
                startup_delay=False,
                max_tasks=None,
                worker_id=f"{self.name}/{index}",
                excluded_queue_names=[],
            )
            self.workers[index] = worker
            if not self.running:
                return
            try:
                worker.run()
                return  # stopped
            except DatabaseError as exc:
                outage.failed("the database", exc)
            except Exception:
                log.exception("database worker %s/%s stopped; starting it again", self.name, index)
            close_connections()
            backoff = min(5.0, backoff * 2 or 0.25)
            deadline = time.monotonic() + backoff
            while self.running and time.monotonic() < deadline:
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop taking tasks; each thread ends after its current run (see `worker.stop_runs`),
        an idle one at once."""
        self.running = False
        for worker in list(self.workers.values()):
            worker.running = False
        self.idle.close()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
