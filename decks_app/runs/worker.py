"""Where queued runs execute: delivered by django.tasks, run on one event loop per process.

A `Run` created `queued` is enqueued as the task `decks_app.runs.tasks.execute_run` (`on_run_created`
below). The configured backend (simulator.profiles) decides which thread picks it up:

- embedded: django-tasks-local's `ThreadPoolBackend` inside `gambit serve`, one thread per
  slot (`GAMBIT_INPROCESS_WORKERS`); queued runs are enqueued again when the server starts,
  since that queue lives in memory;
- distributed: django-tasks-db's `DatabaseBackend`; `gambit worker` runs that backend's own
  `Worker` in one thread per slot (`DatabaseWorkers`), on any number of machines sharing the
  PostgreSQL database. The task is written in the transaction that creates the run, so a run
  is never queued without its task.

The task's thread claims the run (queued -> running, so a run executes once whatever the
backend delivers) and hands it to this process's run loop (`attach`), then waits for it. One
loop per process because provider HTTP clients, the in-memory channel layer and the
cancellation of runs at shutdown all belong to one loop; the blocked thread keeps the
backend's meaning of a slot. Status, cancellation, heartbeats and "interrupted" stay on the
`Run` row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import socket
import threading
import time
from typing import Any

from django.db import DatabaseError, close_old_connections, transaction

from decks_app.runs import outage, queue
from decks_app.runs.database import close_connections, db
from decks_app.runs.executor import execute_run
from decks_app.runs.providers import SharedRouters

log = logging.getLogger(__name__)

# How often a worker looks for runs whose worker stopped sending heartbeats.
RECONCILE_SECONDS = float(os.environ.get("GAMBIT_RECONCILE_SECONDS", "30"))
# How often an idle database worker thread looks at the queue table.
POLL_SECONDS = float(os.environ.get("GAMBIT_WORKER_POLL_SECONDS", "0.2"))

_loop: asyncio.AbstractEventLoop | None = None
_accepting = True
_hosted: set[asyncio.Task] = set()
# The run loop's provider routers, shared by the runs it hosts (their HTTP connections too).
_routers = SharedRouters()
_lock = threading.Lock()
executed = 0


# ---------------------------------------------------------------- enqueueing


def on_run_created(sender: Any, instance: Any, created: bool) -> None:
    """post_save of `Run`: a new queued run becomes a task."""
    if not created or instance.status != "queued":
        return
    if _transactional_backend():
        enqueue(instance.pk)  # same database: the task commits (or rolls back) with the run
    else:
        transaction.on_commit(lambda: enqueue(instance.pk))


def _transactional_backend() -> bool:
    from django.tasks import default_task_backend
    from django_tasks_db import DatabaseBackend

    return isinstance(default_task_backend, DatabaseBackend)


def enqueue(run_id: str) -> None:
    from decks_app.runs import tasks

    tasks.execute_run.enqueue(run_id)


def enqueue_queued_runs() -> int:
    """Enqueue every queued run again (the embedded backend's queue did not survive a
    restart; a run enqueued twice still executes once, the second task finds it claimed)."""
    from decks_app.models import Run

    ids = list(
        Run.objects.filter(status="queued").order_by("created_at").values_list("pk", flat=True)
    )
    for run_id in ids:
        enqueue(run_id)
    return len(ids)


# ---------------------------------------------------------------- executing


def attach(loop: asyncio.AbstractEventLoop) -> None:
    """Run this process's runs on `loop` (Daphne's in `gambit serve`, a thread's in
    `gambit worker`)."""
    global _loop, _accepting, _routers
    if loop is not _loop:
        _routers = SharedRouters()  # connections belong to the loop that opened them
    _loop, _accepting = loop, True


def shared_routers() -> SharedRouters | None:
    """The run loop's shared provider routers, when called on the run loop; None on any other
    loop (a caller there builds its own router, whose connections die with that loop)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return _routers if running is _loop else None


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"[:100]


def execute(run_id: str) -> str:
    """The task's body, in a backend thread: claim the run, run it on the run loop, wait."""
    from gambit.core import is_valid_id

    global executed
    if not isinstance(run_id, str) or not is_valid_id(run_id, "run") or not _accepting:
        return "skipped"  # a stopping process leaves it queued for the next one
    try:
        claimed = queue.claim_run(run_id, worker_id())
        if claimed is None:
            return "skipped"  # cancelled, or executed by another worker already
        outage.recovered("the database")
        # This thread only waits from here: a pooled connection goes back to the pool (a
        # kept one, in a `gambit worker`, stays: simulator.profiles).
        close_old_connections()
        loop = _loop
        if loop is None or loop.is_closed():
            # No run loop in this process (a script, the ImmediateBackend): this thread's own.
            from asgiref.sync import async_to_sync

            return async_to_sync(_run)(run_id, claimed=claimed)
        future = asyncio.run_coroutine_threadsafe(_hosted_run(run_id, claimed), loop)
        while True:
            try:
                return future.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if loop.is_closed() or not loop.is_running():
                    # The loop stopped under us (shutdown): nobody will finish this run.
                    future.cancel()
                    queue.mark_run_interrupted(run_id)
                    return "interrupted"
            except concurrent.futures.CancelledError:
                return "interrupted"
    finally:
        with _lock:
            executed += 1
        close_old_connections()


async def _hosted_run(run_id: str, claimed: queue.ClaimedRun) -> str:
    task = asyncio.current_task()
    assert task is not None
    _hosted.add(task)
    try:
        return await _run(run_id, _routers, claimed=claimed)
    finally:
        _hosted.discard(task)


async def _run(
    run_id: str, routers: SharedRouters | None = None, *, claimed: queue.ClaimedRun | None = None
) -> str:
    try:
        status = await execute_run(run_id, routers=routers, claimed=claimed)
        log.info("run %s %s", run_id, status)
        return status
    except asyncio.CancelledError:
        raise
    except DatabaseError as exc:
        # The database went away mid-run: the run's heartbeat stops, so once the database
        # is back a worker marks it interrupted (with Retry) within RECONCILE + STALE s.
        outage.failed("the database", exc)
        return "lost"
    except Exception:
        log.exception("run %s crashed", run_id)
        try:
            await db(_crashed, run_id)
        except DatabaseError as exc:
            outage.failed("the database", exc)
        return "failed"


def in_flight() -> int:
    return len(_hosted)


async def stop_runs(timeout: float = 8.0) -> None:
    """On the run loop: take no more runs, stop the runs in flight and wait for them to be
    recorded as interrupted (what streamed is kept)."""
    global _accepting
    _accepting = False
    running = list(_hosted)
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=timeout)
    await _routers.aclose()


def _crashed(run_id: str) -> None:
    from django.utils import timezone

    from decks_app.models import Run

    Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).update(
        status="failed",
        error="the worker crashed while running this run",
        finished_at=timezone.now(),
    )


# ---------------------------------------------------------------- stale runs


async def reconcile_forever(every: float = RECONCILE_SECONDS) -> None:
    """On the run loop: every `every` s, runs whose worker stopped sending heartbeats become
    interrupted (with Retry)."""
    while True:
        try:
            ids = await db(queue.mark_interrupted, stale_only=True)
            for run_id in ids:
                log.warning("run %s had no heartbeat: marked interrupted", run_id)
            outage.recovered("the database")
        except DatabaseError as exc:
            outage.failed("the database", exc)
            await db(close_connections)
        await asyncio.sleep(every)


# ---------------------------------------------------------------- the database backend's workers


class DatabaseWorkers:
    """`slots` threads, each running django-tasks-db's `Worker`, kept alive through database
    outages (its worker exits on a connection error; this restarts it with backoff)."""

    def __init__(self, slots: int, *, name: str | None = None, backend: str = "default"):
        self.slots = max(1, slots)
        self.name = (name or f"{socket.gethostname()}:{os.getpid()}")[:56]
        self.backend = backend
        self.running = True
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

        backoff = 0.0
        # A random first wait, up to one poll, spreads the slots' polls over the interval, so
        # an idle worker picks a new run up in a fraction of a poll instead of every slot
        # looking at the same moment. (django-tasks-db's own `startup_delay` waits up to a
        # whole second, whatever the interval: a new worker's slots came into use over a
        # second.)
        time.sleep(POLL_SECONDS * random.random())
        while self.running:
            worker = Worker(
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
        """Stop taking tasks; each thread ends after its current run (see `stop_runs`)."""
        self.running = False
        for worker in list(self.workers.values()):
            worker.running = False

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
