"""`slots.warm_up()`: a `gambit worker` imports, before it claims a run, the packages its
first run would otherwise import while it holds a slot (docs/benchmarks.md, "A worker warm
before its first claim"). Probed on the distributed profile (real PostgreSQL and Redis), a
run queued by one process and executed by another, each a process of its own since a
package imported once stays imported."""

from __future__ import annotations

import pytest

from tests.support.machine import reachable
from tests.support.postgres import run_probe

PROBE = "tests.decks_app.runs.warm_up_probe"
# What a worker's first one-turn run over HTTP imported before warm_up existed: the channel
# layer's Redis client, a deck's schema validator, httpx's async backend.
LAZY = {"channels_redis", "redis", "jsonschema", "anyio"}


@pytest.fixture
def queued_run(pg_database, tmp_path):
    """A run queued on the distributed profile, and how to execute it in a worker process."""
    if not reachable(6379):
        pytest.skip("Redis is not reachable on 127.0.0.1:6379")
    queued = run_probe(PROBE, pg_database, tmp_path, STEP="queue")

    def execute(warm: bool) -> dict:
        out = run_probe(
            PROBE, pg_database, tmp_path, STEP="run", WARM=str(int(warm)), GAMBIT_DB_POOL_SIZE="0"
        )
        assert out["run"] == queued["run"] and out["status"] == "completed"
        return out

    return execute


def test_a_cold_workers_first_run_imports_them(queued_run):
    # Shows the probe sees these imports when nothing imported them first.
    assert set(queued_run(warm=False)["imported"]) >= LAZY


def test_a_warm_workers_first_run_imports_none_of_them(queued_run):
    imported = queued_run(warm=True)["imported"]
    assert not LAZY & set(imported), imported
