"""The sessions search and pages on the real PostgreSQL (127.0.0.1:5432, as the distributed
profile uses it): the migration's tsvector GIN index, the `@@` query that uses it, and
`ts_headline` for the matching line. Skipped, with the reason, only when PostgreSQL is not
reachable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.machine import reachable

PG = os.environ.get("GAMBIT_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def pg_database():
    if not reachable(5432):
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    import psycopg

    name = f"gambit_search_{os.getpid()}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield PG.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_search_and_pages_on_postgresql(pg_database, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": pg_database,
        "REDIS_URL": "redis://127.0.0.1:6379/5",  # the distributed profile; not connected to
        "GAMBIT_SIM_DB": str(tmp_path / "unused.sqlite3"),
        "DJANGO_SETTINGS_MODULE": "simulator.settings",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.decks_app.sessions.pg_search_probe"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "postgresql"
    found = out["found"]
    for q in ("A1002", "complaint", "a1002 complain", "BROKEN"):
        assert found[q] == ["wanted"], (q, found[q])
    assert found["hola"] == found["zanzibar"] == ["items"]
    assert found["system"] == []  # the system prompt is not searched
    match = out["match"]
    assert match["text"].startswith("Hi, I have a complaint about order A1002.")
    start, end = match["highlights"][0]
    assert match["text"][start:end] == "A1002"
    assert out["html"] is True
    assert out["pages"] == [50, 28]  # 78 sessions, every one reachable
    # the list's query is answered by the GIN index (Bitmap Index Scan on it)
    assert "Index Scan on decks_app_session_search" in out["plan"], out["plan"]
