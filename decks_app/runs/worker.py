"""Where queued runs execute: delivered by django.tasks, run on one event loop per process.

A `Run` created `queued` is enqueued as the task `decks_app.runs.tasks.execute_run` (`on_run_created`
below). The configured backend (simulator.profiles) decides which thread picks it up:

- embedded: django-tasks-local's `ThreadPoolBackend` inside `gambit serve`, one thread per
  slot (`GAMBIT_INPROCESS_WORKERS`); queued runs are enqueued again when the server starts,
  since that queue lives in memory;
- distributed: django-tasks-db's `DatabaseBackend`; `gambit worker` runs that backend's
  `Worker`, with the slot's own claim and idle wait, in one thread per slot
  (`slots.DatabaseWorkers`), on any number of machines sharing the PostgreSQL database. The task is written in the transaction that creates the run, so a run
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
import socket
import threading
from collections.abc import Awaitable
from typing import Any

from django.db import DatabaseError, close_old_connections, transaction

from decks_app.runs import events as event_log
from decks_app.runs import executor, outage, queue, rows
from decks_app.runs.database import close_connections, db, patiently
from decks_app.runs.ending import Ending, end_run
from decks_app.runs.providers import SharedRouters
from decks_app.runs.slots import slot_task

log = logging.getLogger(__name__)

# How often a worker looks for runs whose worker stopped sending heartbeats.
RECONCILE_SECONDS = float(os.environ.get("GAMBIT_RECONCILE_SECONDS", "30"))

_loop: asyncio.AbstractEventLoop | None = None
_accepting = True
_hosted: set[asyncio.Task] = set()
# The run loop's provider routers, shared by the runs it hosts (their HTTP connections too).
_routers = SharedRouters()
_lock = threading.Lock()
executed = 0
_claimed_here = 0  # claimed by this process's slots, their end not recorded yet


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
    """The task's body, in a backend thread (a slot): claim the run and prepare it here, run
    it on the run loop and wait, then record its end here.

    The slot's thread does the run's database work at its start and its end itself, with its
    own connection: the run loop's one database thread (which every run of the process
    shares) then only writes the trace while runs stream, and a run's start and end take no
    hand-off between threads beyond the loop's (docs/benchmarks.md, "A run's start and end in
    its slot's thread")."""
    from gambit.core import is_valid_id

    global executed
    if not isinstance(run_id, str) or not is_valid_id(run_id, "run") or not _accepting:
        return "skipped"  # a stopping process leaves it queued for the next one
    try:
        claimed = queue.claim_run(run_id, worker_id())
        if claimed is None:
            return "skipped"  # cancelled, or executed by another worker already
        outage.recovered("the database")
        return _execute_claimed(run_id, claimed)
    finally:
        with _lock:
            executed += 1
        close_old_connections()


def _execute_claimed(run_id: str, claimed: queue.ClaimedRun) -> str:
    """A claimed run, from its preparation to its recorded end (counted in `in_flight`)."""
    global _claimed_here
    with _lock:
        _claimed_here += 1
    try:
        loop = _loop
        if loop is None or loop.is_closed():
            # No run loop in this process (a script, the ImmediateBackend): this thread's own.
            from asgiref.sync import async_to_sync

            close_old_connections()
            return async_to_sync(_run)(run_id, claimed=claimed)
        try:
            job = patiently(executor.prepare, run_id, claimed)
        except executor.RunRefused as exc:
            return _settled(loop, exc.session_id, executor.refuse, run_id, exc) or "failed"
        except DatabaseError as exc:
            outage.failed("the database", exc)  # see `_guarded`: it will be marked interrupted
            return "lost"
        except Exception:
            log.exception("run %s crashed", run_id)
            return _settled(loop, claimed.run.session_id, _crashed, run_id) or "failed"
        # This thread only waits from here: a pooled connection goes back to the pool (a
        # kept one, in a `gambit worker`, stays: simulator.profiles).
        close_old_connections()
        future = asyncio.run_coroutine_threadsafe(_hosted_run(job), loop)
        while True:
            try:
                ending = future.result(timeout=1.0)
                break
            except concurrent.futures.TimeoutError:
                if loop.is_closed() or not loop.is_running():
                    # The loop stopped under us (shutdown): nobody will finish this run.
                    future.cancel()
                    queue.mark_run_interrupted(run_id)
                    return "interrupted"
            except concurrent.futures.CancelledError:
                return "interrupted"
        if isinstance(ending, str):
            return ending  # it crashed or lost the database on the loop (`_guarded`)
        status = _settled(loop, ending.session_id, _end_run, ending) or ending.status
        log.info("run %s %s", run_id, status)
        return status
    finally:
        with _lock:
            _claimed_here -= 1


def _settled(
    loop: asyncio.AbstractEventLoop, session_id: str | None, record: Any, *args: Any
) -> str | None:
    """`record(*args)` in this thread, patiently (a run's record must not be lost to a
    database restart), then the session's sockets told on the run loop, without waiting (a
    lost notification only delays them). "lost" when the database stayed away."""
    try:
        patiently(record, *args)
    except DatabaseError as exc:
        outage.failed("the database", exc)  # see `_guarded`: it will be marked interrupted
        return "lost"
    if session_id is not None:
        try:
            loop.call_soon_threadsafe(_notify, session_id)
        except RuntimeError:
            pass  # the loop closed meanwhile
    return None


def _end_run(ending: Ending) -> None:
    """`ending.end_run`; in a slot of the database backend, with the slot's task row
    marked successful in the same transaction (`slots.slot_task`)."""
    row = slot_task.row
    if row is None:
        end_run(ending)
        return

    def mark_task(writes: rows.Writes) -> None:
        # The fields `DBTaskResult.set_successful` writes, by an UPDATE that may match no
        # row: that method retries and raises when the row is gone (deleted by hand), which
        # here would roll back the run's end. A row not marked is left to the worker.
        from django.tasks import TaskResultStatus
        from django.utils import timezone

        def marked(changed: int) -> None:
            if changed:
                transaction.on_commit(slot_task.recorded)

        writes.update_if(
            type(row),
            row.pk,
            {"status": TaskResultStatus.RUNNING},
            {
                "status": TaskResultStatus.SUCCESSFUL,
                "return_value": ending.status,  # what the task returns (`_execute_claimed`)
                "finished_at": timezone.now(),
                "exception_class_path": "",
                "traceback": "",
            },
            then=marked,
        )

    end_run(ending, also=mark_task)


_notifying: set[asyncio.Task] = set()


def _notify(session_id: str) -> None:
    """On the run loop: tell the session's sockets, without anyone waiting for it."""
    task = asyncio.ensure_future(event_log.notify(session_id))
    _notifying.add(task)  # a task nobody holds may be collected before it ends
    task.add_done_callback(_notifying.discard)


async def _hosted_run(job: executor.Job) -> Ending | str:
    """On the run loop: the prepared run's `run_job`, counted in `in_flight`."""
    task = asyncio.current_task()
    assert task is not None
    _hosted.add(task)
    try:
        return await _guarded(job.run.id, executor.run_job(job, routers=_routers))
    finally:
        _hosted.discard(task)


async def _run(
    run_id: str, routers: SharedRouters | None = None, *, claimed: queue.ClaimedRun | None = None
) -> str:
    status = await _guarded(run_id, executor.execute_run(run_id, routers=routers, claimed=claimed))
    log.info("run %s %s", run_id, status)
    return status


async def _guarded[T](run_id: str, work: Awaitable[T]) -> T | str:
    """`work`'s result; "lost" when the database went away under it, "failed" when it
    crashed (the run is then recorded as failed)."""
    try:
        return await work
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
    """Runs this process claimed and has not recorded the end of yet."""
    return _claimed_here


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
