"""A run's record is retried through a database outage (`database.patiently` in a slot's
thread, `db_patiently` on the run loop), with one backoff schedule: 0.25 s, doubling, while
the next try still starts within the patience; past it, the error is raised."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError

from decks_app.runs import database


def _down_for(failures: int):
    calls: list[float] = []

    def record(value: str) -> str:
        calls.append(time.monotonic())
        if len(calls) <= failures:
            raise OperationalError("connection refused")
        return value

    return record, calls


def test_patiently_retries_with_a_doubling_wait_until_the_database_answers():
    record, calls = _down_for(2)
    assert database.patiently(record, "kept", patience=5) == "kept"
    waits = [later - earlier for earlier, later in zip(calls, calls[1:], strict=False)]
    assert len(calls) == 3 and 0.25 <= waits[0] < waits[1] and waits[1] >= 0.5


def test_patiently_gives_up_when_the_next_try_would_start_past_its_patience():
    record, calls = _down_for(10)
    with pytest.raises(OperationalError):
        database.patiently(record, "lost", patience=0.3)  # 0.25 s fits, 0.25 + 0.5 does not
    assert len(calls) == 2


async def test_db_patiently_keeps_the_same_schedule_on_the_run_loop():
    record, calls = _down_for(1)
    assert await database.db_patiently(record, "kept", patience=5) == "kept"
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.25
    record, calls = _down_for(10)
    with pytest.raises(OperationalError):
        await database.db_patiently(record, "lost", patience=0.3)
    assert len(calls) == 2
