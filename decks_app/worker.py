"""The run worker: claims queued runs from the database and executes them concurrently.

One `Worker` is an asyncio coroutine with `slots` concurrent runs. `gambit serve` starts one
inside Daphne's event loop (embedded profile); `gambit worker` runs one per process
(distributed profile). Queued runs are claimed with SELECT ... FOR UPDATE SKIP LOCKED, so any
number of workers on any number of machines can share one PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

from django.db import DatabaseError

from decks_app.services import execution, outage, sessions

log = logging.getLogger(__name__)

# How often a worker looks for runs whose worker stopped sending heartbeats.
RECONCILE_SECONDS = float(os.environ.get("GAMBIT_RECONCILE_SECONDS", "30"))


def close_old_connections_now() -> None:
    """Drop this thread's broken database connection so the next query opens a new one."""
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except Exception:
            pass


class Worker:
    def __init__(
        self,
        *,
        slots: int = 8,
        poll_seconds: float = 0.5,
        worker_id: str | None = None,
        reconcile_stale: bool = True,
    ):
        self.slots = max(1, slots)
        self.poll_seconds = poll_seconds
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.reconcile_stale = reconcile_stale
        self.tasks: set[asyncio.Task] = set()
        self.executed = 0

    async def run(self, stop: asyncio.Event | None = None, *, max_runs: int | None = None) -> None:
        """Work until `stop` is set (or `max_runs` runs have finished); on cancellation the
        runs in flight are stopped and recorded as interrupted."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def poke() -> None:
            loop.call_soon_threadsafe(wake.set)

        sessions.on_enqueue(poke)
        listener = asyncio.create_task(self._listen(wake))
        last_reconcile = 0.0
        backoff = 0.0
        try:
            while not stop.is_set():
                if max_runs is not None and self.executed >= max_runs and not self.tasks:
                    return
                try:
                    if (
                        self.reconcile_stale
                        and time.monotonic() - last_reconcile > RECONCILE_SECONDS
                    ):
                        last_reconcile = time.monotonic()
                        ids = await execution.db(execution.mark_interrupted, stale_only=True)
                        for run_id in ids:
                            log.warning("run %s had no heartbeat: marked interrupted", run_id)
                    while len(self.tasks) < self.slots and (
                        max_runs is None or self.executed + len(self.tasks) < max_runs
                    ):
                        run_id = await execution.db(execution.claim_next_run, self.worker_id)
                        if run_id is None:
                            break
                        task = asyncio.create_task(self._execute(run_id))
                        self.tasks.add(task)
                        task.add_done_callback(lambda t: (self.tasks.discard(t), wake.set()))
                    outage.recovered("the database")
                    backoff = 0.0
                except DatabaseError as exc:
                    # A database restart: keep the worker, reconnect with backoff, keep claiming.
                    outage.failed("the database", exc)
                    await execution.db(close_old_connections_now)
                    backoff = min(5.0, backoff * 2 or 0.25)
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=backoff)
                    except TimeoutError:
                        pass
                    continue
                wake.clear()
                waiters = [asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())]
                try:
                    await asyncio.wait(
                        waiters, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    for w in waiters:
                        w.cancel()
        finally:
            listener.cancel()
            sessions.remove_on_enqueue(poke)
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _listen(self, wake: asyncio.Event) -> None:
        """Wake up when another process queues a run (cross-process channel layers only)."""
        from channels.layers import InMemoryChannelLayer, get_channel_layer

        layer = get_channel_layer()
        if layer is None or isinstance(layer, InMemoryChannelLayer):
            return
        try:
            channel = await layer.new_channel()
            joined = 0.0
            while True:
                if time.monotonic() - joined > 3600:  # groups expire; join again
                    await layer.group_add(sessions.WORKERS_GROUP, channel)
                    joined = time.monotonic()
                try:
                    await asyncio.wait_for(layer.receive(channel), timeout=60)
                    wake.set()
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outage.failed("the channel layer", exc)
            log.warning("worker wake-ups over the channel layer stopped; polling only")

    async def _execute(self, run_id: str) -> None:
        try:
            status = await execution.execute_run(run_id)
            log.info("run %s %s", run_id, status)
        except asyncio.CancelledError:
            raise
        except DatabaseError as exc:
            # The database went away mid-run: the run's heartbeat stops, so once the database
            # is back a worker marks it interrupted (with Retry) within RECONCILE + STALE s.
            outage.failed("the database", exc)
        except Exception:
            log.exception("run %s crashed", run_id)
            try:
                await execution.db(_crashed, run_id)
            except DatabaseError as exc:
                outage.failed("the database", exc)
        finally:
            self.executed += 1


def _crashed(run_id: str) -> None:
    from django.utils import timezone

    from decks_app.models import Run

    Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).update(
        status="failed",
        error="the worker crashed while running this run",
        finished_at=timezone.now(),
    )
