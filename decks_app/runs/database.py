"""The runs' way to the database from a coroutine: Django's sync ORM on the thread-sensitive
executor (`db`), retried through an outage where a run must not lose its record
(`db_patiently`; `patiently` in a worker's own thread). Safe in Daphne's loop (embedded
profile) and in a `gambit worker` process (distributed profile) alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError

from decks_app.runs import outage

# How long a finishing run waits for a database that went away (a restart) before giving up.
DATABASE_PATIENCE = 60.0


async def db[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)


def close_connections() -> None:
    """Drop this thread's database connections so the next query opens a new one."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:
            pass


async def reset_connection() -> None:
    """Drop the database thread's broken connection, so the next query opens a new one."""
    try:
        await db(close_connections)
    except Exception:
        pass


def _delays(deadline: float) -> Iterator[float]:
    """The waits between tries through an outage: 0.25 s, doubling up to 5 s, as long as the
    next try would still start before `deadline` (a `time.monotonic()` time)."""
    delay = 0.25
    while time.monotonic() + delay <= deadline:
        yield delay
        delay = min(5.0, delay * 2)


def patiently[T](
    fn: Callable[..., T], *args: Any, patience: float = DATABASE_PATIENCE, **kwargs: Any
) -> T:
    """`fn(...)` in this (synchronous) thread, retried like `db_patiently`."""
    delays = _delays(time.monotonic() + patience)
    while True:
        try:
            result = fn(*args, **kwargs)
        except DatabaseError as exc:
            outage.failed("the database", exc)
            delay = next(delays, None)
            if delay is None:
                raise
            close_connections()
            time.sleep(delay)
            continue
        outage.recovered("the database")
        return result


async def db_patiently[T](
    fn: Callable[..., T], *args: Any, patience: float = DATABASE_PATIENCE, **kwargs: Any
) -> T:
    """`db(fn, ...)`, retried with backoff through a database outage of up to `patience` s."""
    delays = _delays(time.monotonic() + patience)
    while True:
        try:
            result = await db(fn, *args, **kwargs)
        except DatabaseError as exc:
            outage.failed("the database", exc)
            delay = next(delays, None)
            if delay is None:
                raise
            await reset_connection()
            await asyncio.sleep(delay)
            continue
        outage.recovered("the database")
        return result
