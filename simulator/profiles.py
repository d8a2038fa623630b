"""Runtime profiles (docs/simulator.md, "Profiles"), chosen by the environment alone.

- **embedded** (default): SQLite in WAL mode, in-memory channel layer, workers running inside
  the `gambit serve` process.
- **distributed**: `DATABASE_URL=postgres://...` and `REDIS_URL=redis://...` select
  PostgreSQL and the Redis channel layer; runs are claimed from the database by `gambit worker`
  processes (any number, on any machine).

`build_settings(env)` is a pure function of the environment so the choice can be tested
without reloading Django. Environment variables read here:

| variable | meaning |
|---|---|
| `DATABASE_URL`, `REDIS_URL` | both set: the distributed profile |
| `GAMBIT_WORKSPACE` | the deck folder served (default: the bundled `examples/`) |
| `GAMBIT_SIM_DB` | the SQLite file of the embedded profile (default `<workspace>/.gambit/simulator.sqlite3`) |
| `GAMBIT_SECRET_KEY` | Django's secret key (default: generated once, kept beside the database) |
| `GAMBIT_ALLOWED_HOSTS` | comma-separated extra host names (localhost names are always allowed) |
| `GAMBIT_ACCESS_TOKEN` | when set, every page and websocket needs it (`?token=` once, then a cookie); `gambit serve --host` beyond loopback sets one |
| `GAMBIT_DB_POOL_SIZE` | most PostgreSQL connections one process holds (default 16; distributed); `0`: no pool, one kept connection per thread (what `gambit worker` uses) |
| `GAMBIT_DB_PREPARED_STATEMENTS` | `0`: kept connections do not prepare statements (for a pooler in transaction mode that does not keep them, such as PgBouncer before 1.21) |
| `GAMBIT_INPROCESS_WORKERS` | worker slots inside `gambit serve` (default 8 embedded, 0 distributed) |
| `GAMBIT_DEBUG` | `1` for Django's debug mode |

Read by the worker (`decks_app`), for operators and the fault tests:
`GAMBIT_STALE_AFTER_SECONDS` (default 60: a running run without a heartbeat for this long is
taken for dead and marked interrupted) and `GAMBIT_RECONCILE_SECONDS` (default 30: how often
live workers look for such runs); `GAMBIT_WORKER_POLL_SECONDS` (default 0.2: how often an idle
`gambit worker` thread looks at the queue table; each wait is drawn between half and one and
a half of it).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from gambit.env import env_flag

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]


def default_workspace() -> Path:
    """The bundled examples folder (next to the package in a checkout), else the cwd."""
    bundled = REPO_ROOT / "examples"
    return bundled if bundled.is_dir() else Path.cwd()


def profile_name(env: Mapping[str, str]) -> str:
    return "distributed" if env.get("DATABASE_URL") and env.get("REDIS_URL") else "embedded"


def database_from_url(url: str, pool_max: int = 16, prepared: bool = True) -> dict[str, Any]:
    """A Django DATABASES entry from `postgres://user:pass@host:port/name`; `pool_max` 0:
    no pool, one connection per thread, kept, which prepares the statements it runs often
    unless `prepared` is false (see below)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql", "pgsql"):
        raise ValueError(f"DATABASE_URL must be a postgres:// URL, not {parsed.scheme}://")
    if pool_max <= 0:
        connections: dict[str, Any] = {
            # A `gambit worker` has a fixed set of threads (its slots, the run loop's database
            # thread, its main thread), so its connections are bounded without a pool. A
            # pooled connection goes back at every close_old_connections(), which
            # django-tasks-db's worker loop calls twice per task, and is checked with a round
            # trip when taken again: three or four round trips per run. A kept connection
            # broken by a database restart fails one query; the worker's threads then drop it
            # (decks_app.runs.worker, decks_app.runs.database) and the next query reconnects.
            "CONN_MAX_AGE": None,
            # It also runs the same few statements for every run. With the parameters bound
            # on the server, psycopg prepares a statement once a connection has run it 5
            # times, and PostgreSQL stops parsing and planning it on every call (planning
            # django-tasks-db's locked fetch alone took 0.4 to 0.8 ms): 0.6 to 0.7 ms less of
            # PostgreSQL's CPU per run (docs/benchmarks.md, "Prepared statements in
            # `gambit worker`"). Not for the server's pool: its pages run many statements a
            # few times each.
            "OPTIONS": {"server_side_binding": True, "prepare_threshold": 5} if prepared else {},
        }
    else:
        connections = {
            # A pool per process bounds its connections whatever the number of request
            # threads (each concurrent request has its own) and worker slots: 100 concurrent
            # sends once exhausted PostgreSQL's 100 connections. Broken connections (a
            # database restart) are checked and replaced when taken from the pool.
            "CONN_MAX_AGE": 0,
            "OPTIONS": {"pool": _pool_options(pool_max)},
        }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        **connections,
        "TEST": {"NAME": "test_gambit_simulator"},
    }


def _pool_options(max_size: int) -> dict[str, Any]:
    from psycopg_pool import ConnectionPool

    return {
        "min_size": 1,
        "max_size": max(2, max_size),
        "timeout": 60,
        "check": ConnectionPool.check_connection,
    }


def sqlite_database(path: Path) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        # One connection per thread, kept: opening one runs the PRAGMAs below, about 5 ms on
        # every request and every read of a session's socket when connections were closed
        # after each (a local file needs no pool and has no server to lose).
        "CONN_MAX_AGE": None,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
        },
    }


def _secret_key(env: Mapping[str, str], state_dir: Path) -> str:
    if env.get("GAMBIT_SECRET_KEY"):
        return env["GAMBIT_SECRET_KEY"]
    path = state_dir / "secret_key"
    try:
        return path.read_text().strip()
    except OSError:
        pass
    key = secrets.token_urlsafe(48)
    if not state_dir.is_dir():
        return key  # nothing is written until `gambit serve` creates the state folder
    try:
        path.write_text(key)
        path.chmod(0o600)
    except OSError:
        pass  # a read-only workspace: the key lives for this process only
    return key


def build_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """Every profile-dependent setting, from the environment."""
    profile = profile_name(env)
    workspace = Path(env.get("GAMBIT_WORKSPACE") or default_workspace()).resolve()
    db_path = Path(env.get("GAMBIT_SIM_DB") or workspace / ".gambit" / "simulator.sqlite3")
    state_dir = db_path.parent
    extra_hosts = [h.strip() for h in env.get("GAMBIT_ALLOWED_HOSTS", "").split(",") if h.strip()]
    out: dict[str, Any] = {
        "GAMBIT_PROFILE": profile,
        "GAMBIT_WORKSPACE": str(workspace),
        "SECRET_KEY": _secret_key(env, state_dir),
        "DEBUG": env_flag(env, "GAMBIT_DEBUG"),
        "ALLOWED_HOSTS": LOCAL_HOSTS + extra_hosts,
        # Set by a non-loopback `gambit serve`: every page and socket then needs it.
        "GAMBIT_ACCESS_TOKEN": env.get("GAMBIT_ACCESS_TOKEN", ""),
    }
    if profile == "distributed":
        pool_max = int(env.get("GAMBIT_DB_POOL_SIZE", "16"))
        prepared = env.get("GAMBIT_DB_PREPARED_STATEMENTS", "1") != "0"
        out["DATABASES"] = {
            "default": database_from_url(env["DATABASE_URL"], pool_max, prepared=prepared)
        }
        out["CHANNEL_LAYERS"] = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [env["REDIS_URL"]], "capacity": 1000, "expiry": 30},
            }
        }
        out["GAMBIT_INPROCESS_WORKERS"] = int(env.get("GAMBIT_INPROCESS_WORKERS", "0"))
        # A queue table in PostgreSQL; `gambit worker` processes (any number, any machine)
        # run django-tasks-db's worker. Enqueued in the transaction that creates the run.
        out["TASKS"] = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    else:
        db = sqlite_database(db_path)
        # The test database is a file so that threads (async ORM calls) share it.
        test_dir = Path(env.get("GAMBIT_TEST_DB_DIR", "/tmp"))
        db["TEST"] = {"NAME": str(test_dir / f"gambit_sim_test_{os.getpid()}.sqlite3")}
        out["DATABASES"] = {"default": db}
        out["CHANNEL_LAYERS"] = {
            "default": {
                "BACKEND": "channels.layers.InMemoryChannelLayer",
                "CONFIG": {"capacity": 1000, "expiry": 30},
            }
        }
        out["GAMBIT_INPROCESS_WORKERS"] = slots = int(env.get("GAMBIT_INPROCESS_WORKERS", "8"))
        # Nothing to install or start: a thread pool inside `gambit serve`, one thread per
        # slot. Its queue is in memory; queued runs are enqueued again when the server starts.
        out["TASKS"] = {
            "default": (
                {
                    "BACKEND": "django_tasks_local.ThreadPoolBackend",
                    "OPTIONS": {"MAX_WORKERS": slots},
                }
                if slots > 0
                else {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}
            )
        }
    return out
