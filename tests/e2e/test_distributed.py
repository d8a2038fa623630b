"""The distributed profile: PostgreSQL + Redis + a separate `gambit worker` process.

Skipped, with the reason printed, only when PostgreSQL or Redis is not reachable.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect

from tests.support.machine import reachable

from .conftest import ROOT, _free_port, serve_simulator, stop

PG = os.environ.get("GAMBIT_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("GAMBIT_TEST_REDIS", "redis://127.0.0.1:6379/5")
WORKER = "import sys; from gambit.cli._serve import worker_command; worker_command(sys.argv[1:])"


@pytest.fixture(scope="module")
def distributed(fake_model, tmp_path_factory):
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379)):
        if not reachable(port):
            print(f"skipping the distributed tests: {name} is not reachable on 127.0.0.1:{port}")
            pytest.skip(f"{name} is not reachable on 127.0.0.1:{port}")
    import psycopg

    dbname = f"gambit_dist_{os.getpid()}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}"')
        conn.execute(f'CREATE DATABASE "{dbname}"')
    env = {**os.environ, **fake_model.env()}
    env.update(
        {
            "DATABASE_URL": PG.rsplit("/", 1)[0] + "/" + dbname,
            "REDIS_URL": REDIS,
            "GAMBIT_SIM_DB": str(tmp_path_factory.mktemp("dist") / "unused.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "simulator.settings",
        }
    )
    port = _free_port()
    log_path = tmp_path_factory.mktemp("dist-logs") / "serve-and-worker.log"
    log = log_path.open("w")
    server = serve_simulator(env, port, log, timeout=40)
    url = f"http://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, "--slots", "4"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield url
    stop(worker, server)
    log.close()
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def test_a_run_executed_by_a_worker_process_streams_to_the_browser(page, distributed):
    page.goto(distributed + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    # An idle socket must survive channels_redis' blocking receive (redis-py 8 broke it).
    page.wait_for_timeout(6000)
    page.fill("textarea[name=message]", "from another process")
    page.click("#send")
    lengths = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lengths.append(len(page.locator("#live").inner_text()))
        if page.locator("#status").inner_text() == "completed":
            break
        time.sleep(0.1)
    assert len({n for n in lengths if n > 0}) >= 4, lengths
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("#conversation")).to_contain_text("tok59")
    data = page.request.get(page.url + "?format=json").json()
    assert data["runs"][0]["status"] == "completed"
