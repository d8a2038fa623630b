"""Suite-wide fixtures."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.support.fake_model_server import FakeModelServer
from tests.support.postgres import fresh_database

# In-process tests drive runs themselves (claim_next_run + execute_run): queued runs are
# recorded as tasks, not executed behind the test's back. "database" is django-tasks-db's
# backend, for the tests of its worker threads (tests/decks_app/runs/test_worker.py). The real
# backends run in the servers that the browser, distributed and fault tests start.
django_settings.TASKS = {
    "default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"},
    "database": {"BACKEND": "django_tasks_db.DatabaseBackend"},
}

# Hypothesis keeps its example database and caches outside the working tree (never
# committed, never left behind in a checkout).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "gambit-hypothesis")


@pytest.fixture
def fake_server() -> Iterator[FakeModelServer]:
    """A fresh fake model server on 127.0.0.1 (random port), stopped after the test.

    Script it with `fake_server.queue(Reply(...))`; point providers at `fake_server.base_url`
    (or a subprocess at it with `env={**os.environ, **fake_server.env()}`); assert on
    `fake_server.requests`. See tests/support/fake_model_server.py.
    """
    server = FakeModelServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A new database on this machine's PostgreSQL, named for the test module, dropped after
    the test (skipped only when PostgreSQL does not answer); run code against it with
    `tests.support.postgres.run_probe`."""
    with fresh_database("gambit_" + request.module.__name__.rsplit(".", 1)[-1]) as url:
        yield url
