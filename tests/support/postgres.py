"""A fresh database on this machine's PostgreSQL (127.0.0.1:5432, as the distributed profile
uses it), and a probe module run against it in a process of its own: Django is set up once
per process, for the SQLite test database, so code that takes PostgreSQL's own path is
exercised where `DATABASE_URL` chooses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.machine import reachable

PG = os.environ.get("GAMBIT_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards; the test is skipped, saying
    why, only when PostgreSQL does not answer."""
    if not reachable(5432):
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    import psycopg

    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_probe(module: str, database_url: str, tmp_path: Path, **env: str) -> dict[str, Any]:
    """Run `python -m module` on the distributed profile's settings against `database_url`
    (plus `env`); the JSON object it printed last. Fails the test with its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", module],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            # The distributed profile; only a probe whose run notifies sockets connects to it
            # (warm_up_probe, whose test skips when Redis does not answer).
            "REDIS_URL": "redis://127.0.0.1:6379/5",
            "GAMBIT_SIM_DB": str(tmp_path / "unused.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "simulator.settings",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(out, dict)
    return out
