"""The simulator's server and worker entry points, behind `gambit serve` and `gambit worker`.

`gambit.cli._serve` loads this module by name at run time, so the engine package never
imports Django (an import-linter contract checks it).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from pathlib import Path

LOCAL = ("127.0.0.1", "localhost", "::1")


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    import django

    django.setup()


def _echo(text: str) -> None:
    print(text, flush=True)


# Any constant works: it names the lock that serialises migrations across processes.
MIGRATE_LOCK = 0x6A6D6269  # "gmbi"


def _migrate() -> None:
    """Apply migrations once, however many processes start together.

    On PostgreSQL each process takes a session advisory lock first: the first migrates, the
    others wait and then find nothing to do (started at the same moment on an empty database,
    two of three used to crash on concurrent migrations). While the database does not answer
    yet, wait for it with backoff (one warning line).
    """
    import time

    from django.core.management import call_command
    from django.db import DatabaseError, connection

    from decks_app.runs import outage

    delay = 0.25
    while True:
        try:
            if connection.vendor != "postgresql":
                call_command("migrate", interactive=False, verbosity=0)
                return
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
            try:
                call_command("migrate", interactive=False, verbosity=0)
            finally:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK])
            outage.recovered("the database")
            return
        except DatabaseError as exc:
            if connection.vendor != "postgresql":
                raise
            outage.failed("the database", exc)
            connection.close()
            time.sleep(delay)
            delay = min(5.0, delay * 2)


def _port_free(host: str, port: int) -> str | None:
    """None when (host, port) can be listened on, else why not. Checked before anything
    touches the database, so a second server never marks the first one's runs interrupted."""
    import socket

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except socket.gaierror as exc:  # not an address of this machine, nor a name of one
            return f"unknown host: {exc.strerror or exc}"
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _own_names() -> list[str]:
    """This machine's name and addresses: what a 0.0.0.0 bind is reached by."""
    import socket

    names = [socket.gethostname(), socket.getfqdn()]
    try:
        names += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    except OSError:
        pass
    return [n for n in dict.fromkeys(names) if n]


def _new_token() -> str:
    import secrets

    return secrets.token_urlsafe(24)


def served_workspace(target: str | None, command: str) -> Path:
    """The folder `gambit serve [TARGET]` serves, and whose database `gambit keys` uses (so a
    key made in a deck folder opens that folder's server): TARGET, or a deck's folder; with
    none, the current folder when it holds decks (a deck of its own, or in its subfolders),
    else the bundled examples."""
    from gambit.core import find_workspace_decks
    from simulator.profiles import default_workspace

    if target is None:
        here = Path.cwd()
        return here.resolve() if find_workspace_decks(here) else default_workspace()
    path = Path(target).resolve()
    if path.is_file():
        return path.parent
    if path.is_dir():
        return path
    raise SystemExit(f"{command}: {target}: no such deck or folder")


def serve(
    target: str | None,
    host: str,
    port: int,
    workers: int | None,
    allowed_hosts: tuple[str, ...] = (),
) -> None:
    busy = _port_free(host, port)
    if busy is not None:
        fix = (
            "is another server running? Pick another port with --port."
            if "in use" in busy
            else "give --host an address of this machine (127.0.0.1 by default)."
        )
        print(f"gambit serve: cannot listen on {host}:{port} ({busy}); {fix}", file=sys.stderr)
        raise SystemExit(1)

    workspace = served_workspace(target, "gambit serve")
    os.environ["GAMBIT_WORKSPACE"] = str(workspace)
    extra = [h for h in os.environ.get("GAMBIT_ALLOWED_HOSTS", "").split(",") if h]
    extra += list(allowed_hosts)
    token = ""
    if host not in LOCAL:
        # Never "*": a wildcard Host check lets a rebinding DNS name reach the server.
        extra += _own_names() if host in ("0.0.0.0", "::") else [host.strip("[]")]
        # Decks run code: beyond loopback, every page and socket needs this token.
        token = os.environ.get("GAMBIT_ACCESS_TOKEN") or _new_token()
        os.environ["GAMBIT_ACCESS_TOKEN"] = token
    os.environ["GAMBIT_ALLOWED_HOSTS"] = ",".join(dict.fromkeys(extra))
    if workers is not None:
        os.environ["GAMBIT_INPROCESS_WORKERS"] = str(workers)
    # Distributed: pooled connections for the worker slots and the concurrent requests.
    os.environ.setdefault("GAMBIT_DB_POOL_SIZE", str(max(16, (workers or 0) + 12)))
    # The offline demo model streams at a readable pace in the browser (0 in tests and CLI).
    os.environ.setdefault("GAMBIT_DEMO_DELAY_MS", "35")
    state_dir = Path(os.environ.get("GAMBIT_SIM_DB") or workspace / ".gambit" / "x").parent
    state_dir.mkdir(parents=True, exist_ok=True)

    import daphne.server  # installs the asyncio Twisted reactor; must precede Django/Twisted

    _setup_django()
    from django.conf import settings

    from decks_app.runs import providers, queue
    from decks_app.workspaces.served import current_workspace, list_decks

    _migrate()
    distributed = settings.GAMBIT_PROFILE == "distributed"
    interrupted = queue.mark_interrupted(stale_only=distributed)
    slots = settings.GAMBIT_INPROCESS_WORKERS

    from simulator.asgi import application

    decks = list_decks(current_workspace())
    shown_host = f"[{host}]" if ":" in host else host
    lines = [
        f"Gambit simulator: http://{shown_host}:{port}/",
        f"  profile: {settings.GAMBIT_PROFILE}"
        + (" (PostgreSQL + Redis)" if distributed else " (SQLite, in-process workers)"),
        f"  workspace: {workspace}",
        f"  decks: {', '.join(d.path for d in decks) or 'none found'}",
        *(f"  BROKEN {d.path}: {d.error[:300]}" for d in decks if d.error),
        f"  workers in this process: {slots}"
        + ("  (start more with `gambit worker`)" if distributed else ""),
        "  providers:",
        *providers.banner_lines(workspace_root=workspace),
        "  decks whose provider is not configured run with the offline demo model "
        f"({providers.OFFLINE_MODEL}), labelled offline",
        f"  Open Responses endpoint: http://{shown_host}:{port}/v1/responses (model deck/<folder>;"
        " API key required: `gambit keys create NAME`)",
    ]
    if settings.GAMBIT_CHAT_COMPLETIONS:
        lines.append(
            "  WARNING: /v1/chat/completions is enabled; it is a legacy endpoint kept for old "
            "clients, use /v1/responses"
        )
    if interrupted:
        lines.append(
            f"  {len(interrupted)} run(s) left running by a previous server: marked interrupted"
        )
    if host not in LOCAL:
        lines += [
            f"  EXPOSED: listening on {host}, beyond this machine. Pages and sockets need the",
            f"  access token; open: http://{shown_host}:{port}/?token={token}",
            f"  accepted host names: {', '.join(settings.ALLOWED_HOSTS)} (add: --allowed-host)",
            "  /v1/* needs an API key; decks run code with your provider keys.",
        ]
    elif allowed_hosts:
        lines.append(f"  accepted host names: {', '.join(settings.ALLOWED_HOSTS)}")
    _echo("\n".join(lines))

    from twisted.internet import defer, reactor

    from decks_app.runs import worker
    from decks_app.runs.slots import DatabaseWorkers

    # Runs execute on Daphne's loop; the jobs backend's threads hand them over (decks_app.runs.worker).
    worker.attach(daphne.server.twisted_loop)
    state: dict[str, object] = {}

    def start_workers() -> None:
        from decks_app.building.filewatch import start_watcher

        state["watcher"] = start_watcher(str(workspace), asyncio.get_event_loop())
        if distributed:
            state["reconcile"] = asyncio.ensure_future(worker.reconcile_forever())
            if slots > 0:
                state["pool"] = DatabaseWorkers(slots).start()
        elif slots > 0:
            # The in-memory queue of the embedded backend did not survive the last server.
            worker.enqueue_queued_runs()

    def stop_workers():
        stop_watching = state.get("watcher")
        if stop_watching is not None:
            stop_watching.set()  # type: ignore[attr-defined]
        pool = state.get("pool")
        if pool is not None:
            pool.stop()  # type: ignore[attr-defined]
        reconcile = state.get("reconcile")
        if reconcile is not None:
            reconcile.cancel()  # type: ignore[attr-defined]
        # Runs in flight are stopped and recorded as interrupted, keeping what streamed.
        return defer.Deferred.fromFuture(asyncio.ensure_future(worker.stop_runs(8.0)))

    reactor.callWhenRunning(start_workers)
    # the ignore: zope interface methods omit self, which mypy (without mypy-zope) takes as
    # the first parameter, shifting the others by one
    reactor.addSystemEventTrigger("before", "shutdown", stop_workers)  # type: ignore[arg-type]
    interface = host.strip("[]").replace(":", "\\:")
    daphne.server.Server(
        application=application,
        endpoints=[f"tcp:port={port}:interface={interface}"],
        signal_handlers=True,
        verbosity=0,
        websocket_timeout=86400,
        # A busy server (100 sockets opening at once) may take longer than Daphne's 5 s to
        # answer a handshake; dropping it would only make the browser reconnect later.
        websocket_handshake_timeout=30,
    ).run()


def work(slots: int, burst: bool, max_runs: int | None) -> None:
    """`gambit worker`: django-tasks-db's worker in `slots` threads, runs on one loop."""
    # No pool: a kept connection per thread, slots + 2 of them (simulator.profiles).
    os.environ["GAMBIT_DB_POOL_SIZE"] = "0"
    _setup_django()
    from django.conf import settings

    from decks_app.models import Run
    from decks_app.runs import worker
    from decks_app.runs.slots import DatabaseWorkers, warm_up

    if settings.GAMBIT_PROFILE != "distributed":
        print(
            "gambit worker: the embedded profile (SQLite) runs its workers inside `gambit serve`;"
            " set DATABASE_URL and REDIS_URL for separate worker processes.",
            file=sys.stderr,
        )
        raise SystemExit(1)
    _migrate()
    warm_up()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="run-loop", daemon=True).start()
    worker.attach(loop)
    reconcile = asyncio.run_coroutine_threadsafe(worker.reconcile_forever(), loop)
    pool = DatabaseWorkers(slots).start()
    _echo(
        f"gambit worker {pool.name}: {slots} slots, profile {settings.GAMBIT_PROFILE}, "
        "jobs: django-tasks-db"
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            if max_runs is not None and worker.executed >= max_runs:
                break
            if (
                burst
                and not worker.in_flight()
                and not Run.objects.filter(status="queued").exists()
            ):
                break
    finally:
        pool.stop()
        reconcile.cancel()
        try:
            asyncio.run_coroutine_threadsafe(worker.stop_runs(8.0), loop).result(9.0)
        except Exception:
            pass
        pool.join(1.0)
        loop.call_soon_threadsafe(loop.stop)


def keys(action: str, name: str | None, folder: str | None) -> None:
    """`gambit keys`: create, list or revoke the API keys of /v1/* in the database of the
    workspace `gambit serve` would serve from here (`served_workspace`)."""
    workspace = served_workspace(folder, f"gambit keys {action}")
    os.environ["GAMBIT_WORKSPACE"] = str(workspace)
    Path(os.environ.get("GAMBIT_SIM_DB") or workspace / ".gambit" / "x").parent.mkdir(
        parents=True, exist_ok=True
    )
    _setup_django()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    from endpoint.keys import create_key
    from endpoint.models import ApiKey

    if action == "create":
        if not name:
            raise SystemExit("gambit keys create: give the key a NAME")
        if ApiKey.objects.filter(name=name[:100], revoked=False).exists():
            # Two active keys of one name could not be told apart (revoke takes a name).
            raise SystemExit(
                f"gambit keys create: an active key is named {name!r}; choose another name, "
                f"or `gambit keys revoke {name}` first"
            )
        _, key = create_key(name)
        _echo(key)
        print(
            f"created API key {name!r} for {_key_store(workspace)}; it is shown only now. "
            "Use: Authorization: Bearer <key>",
            file=sys.stderr,
        )
    elif action == "list":
        print(f"API keys of {_key_store(workspace)}:", file=sys.stderr)
        for record in ApiKey.objects.order_by("created_at"):
            state = "revoked" if record.revoked else "active"
            _echo(
                f"{record.name}\t{record.prefix}…\t{state}\tcreated {record.created_at:%Y-%m-%d %H:%M}"
            )
    else:
        if not name:
            raise SystemExit("gambit keys revoke: give the NAME of the key")
        count = ApiKey.objects.filter(name=name, revoked=False).update(revoked=True)
        if not count:
            raise SystemExit(f"gambit keys revoke: no active key named {name!r}")
        keys = "key" if count == 1 else f"{count} keys"
        _echo(f"revoked {keys} named {name!r} of {_key_store(workspace)}")


def _key_store(workspace: Path) -> str:
    """Whose keys these are: the workspace `gambit serve` serves them to, and its database
    (shared by every workspace in the distributed profile)."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        where = f"database {database['NAME']}"
    else:
        where = f"the shared database {database['NAME']} on {database.get('HOST') or 'localhost'}"
    return f"the workspace {workspace} (gambit serve {workspace}; {where})"
