"""The job engines side by side: django-tasks-db on PostgreSQL beside RQ on Redis, in one run.

docs/decisions.md ("Jobs") chose django-tasks-db for the distributed profile; this measures it
against RQ on this machine's real services (PostgreSQL and Redis on 127.0.0.1), with each
engine's own worker as separate processes:

- **django-tasks-db** (the version in pyproject): tasks enqueued through `django.tasks` in a
  minimal Django project written to a temporary folder, with its own PostgreSQL database
  (created, migrated and dropped here; its DATABASES entry is the distributed profile's, a
  psycopg pool). Drained by django-tasks-db's `db_worker` management command, with
  `--interval 0.2` (the poll interval of `gambit worker`; the command's default is 1 s).
- **RQ** (plain, `Queue.enqueue` of a function): drained by `rq.Worker`, RQ's default, which
  forks a work horse per job, and by `rq.SimpleWorker`, which runs jobs in its own process.
- **django-tasks-rq** (`--engines dtrq`, not in the default run): RQ behind `django.tasks`,
  the same task module as django-tasks-db enqueued through `django.tasks`, drained by
  `rq.Worker` with django-tasks-rq's job class (what `rqworker --job-class
  django_tasks_rq.Job` runs).

For each engine and 1 and 2 worker processes:

- **enqueue**: N no-op tasks enqueued one by one from one client, no worker running (tasks/s);
- **drain**: the workers are started, set up and connected, then released at once on the N
  queued tasks in burst mode (django-tasks-db's `--batch`); the drain time runs from the
  release to the last worker's return, and throughput is N over it;
- **trickle**: into idle workers, K tasks enqueued one every 50 ms, each stamping the time its
  body starts; enqueue->start latency, p50 and p95 (what a user feels when sending a message).
  50 ms rather than 20: RQ's forking worker takes 10 to 30 ms a job on this busy 2-core
  machine, so one every 20 ms queued tasks behind each other and measured the backlog, not
  the pick-up.

Each round runs all engines at 1 worker, then all at 2; with `--rounds` the table shows
medians.
RQ, django-tasks-rq and Django 6.1 for the latter are installed on first use into
~/.cache/gambit-bench/peers, never into the project. The bench removes what it made: the
database, the Redis keys of its queue, jobs and workers (in Redis db 7), its processes and
its temporary folder. A part whose service does not answer is skipped with the reason.

    .venv/bin/python bench/bench_jobs.py [--tasks 1000] [--trickle 50] [--gap 0.05]
                                          [--rounds 1] [--engines db rq dtrq] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("GAMBIT_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_HOST, REDIS_PORT, REDIS_DB = "127.0.0.1", 6379, 7
PEERS = Path.home() / ".cache" / "gambit-bench" / "peers"
RQ_VERSION = "3.0.0"
DTRQ_VERSION = "0.12.0"
POLL = "0.2"  # db_worker's --interval, as gambit worker polls (GAMBIT_WORKER_POLL_SECONDS)
TABLE = "django_tasks_database_dbtaskresult"
# Keys RQ's workers set for their periodic maintenance (with a TTL), shared by every queue.
RQ_LOCKS = {b"rq:clean_groups"}

# ---------------------------------------------------------------- the temporary project

# One task module for every engine that goes through django.tasks: the backend configured in
# the settings decides where `enqueue` sends it.
TASKS_MODULE = """
import os
import time

from django.tasks import task

QUEUE = os.environ["BENCH_QUEUE"]


@task(queue_name=QUEUE)
def noop():
    return None


@task(queue_name=QUEUE)
def stamp(path, sent):
    started = time.time()
    with open(path, "a") as f:
        f.write(f"{sent!r} {started!r}\\n")
"""

# The same two bodies as plain functions, for RQ's own API.
RQ_MODULE = """
import time


def noop():
    return None


def stamp(path, sent):
    started = time.time()
    with open(path, "a") as f:
        f.write(f"{sent!r} {started!r}\\n")
"""

DB_SETTINGS = """
import os

from simulator.profiles import database_from_url

SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The distributed profile's DATABASES entry (a psycopg pool per process), on the bench's own
# database.
DATABASES = {"default": database_from_url(os.environ["BENCH_DATABASE_URL"], pool_max=4)}
DATABASES["default"]["TEST"] = {"NAME": "unused_" + os.environ["BENCH_QUEUE"]}
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": [os.environ["BENCH_QUEUE"]],
    }
}
"""

DTRQ_SETTINGS = """
import os

SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["django_rq"]
RQ_QUEUES = {
    os.environ["BENCH_QUEUE"]: {
        "HOST": os.environ["BENCH_REDIS_HOST"],
        "PORT": int(os.environ["BENCH_REDIS_PORT"]),
        "DB": int(os.environ["BENCH_REDIS_DB"]),
    }
}
TASKS = {
    "default": {
        "BACKEND": "django_tasks_rq.RQBackend",
        "QUEUES": [os.environ["BENCH_QUEUE"]],
    }
}
"""


# ---------------------------------------------------------------- the agent (child processes)
#
# `python bench_jobs.py --agent ROLE ENGINE ...` runs in the temporary folder with the
# engine's interpreter: the project's for django-tasks-db, the peer venv's for RQ.


def _redis():
    from redis import Redis

    return Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)


def _submitter(engine: str, queue: str):
    """A function (task name, args) -> job id that enqueues one task the engine's way."""
    if engine in ("db", "dtrq"):
        import benchjobs_tasks

        def submit(name: str, args: tuple) -> str:
            return getattr(benchjobs_tasks, name).enqueue(*args).id

        return submit
    import benchjobs_rq
    from rq import Queue

    q = Queue(queue, connection=_redis())

    def submit(name: str, args: tuple) -> str:
        job_id = f"{queue}-{uuid.uuid4().hex}"
        q.enqueue(getattr(benchjobs_rq, name), *args, job_id=job_id)
        return job_id

    return submit


def _record(ids: list[str]) -> None:
    """Append the job ids to BENCH_IDS (RQ engines), for the parent's cleanup."""
    if os.environ.get("BENCH_IDS"):
        with open(os.environ["BENCH_IDS"], "a") as f:
            f.write("".join(job_id + "\n" for job_id in ids))


def agent(argv: list[str]) -> None:
    role, engine = argv[0], argv[1]
    queue = os.environ["BENCH_QUEUE"]
    if engine in ("db", "dtrq"):
        import django

        django.setup()
    if role == "migrate":
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    elif role == "enqueue":
        n = int(argv[2])
        submit = _submitter(engine, queue)
        ids = [submit("noop", ())]  # the first call opens the connection; not counted
        start = time.perf_counter()
        for _ in range(n - 1):
            ids.append(submit("noop", ()))
        seconds = time.perf_counter() - start
        _record(ids)
        print(json.dumps({"seconds": seconds, "count": n - 1}), flush=True)
    elif role == "trickle":
        k, gap, path = int(argv[2]), float(argv[3]), argv[4]
        submit = _submitter(engine, queue)
        if engine == "db":
            from django.db import connection

            connection.ensure_connection()
        elif engine == "rq":
            _redis().ping()
        ids: list[str] = []
        start = time.perf_counter()
        for i in range(k):
            delay = start + i * gap - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            ids.append(submit("stamp", (path, time.time())))
        _record(ids)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(path) and len(Path(path).read_text().splitlines()) >= k:
                break
            time.sleep(0.05)
    elif role == "worker":
        worker_agent(engine, argv[2], int(argv[3]), argv[4] == "burst", queue)
    sys.stdout.flush()


def worker_agent(engine: str, kind: str, index: int, burst: bool, queue: str) -> None:
    """Set up and connect, say "ready", wait for a line on stdin, then work; in burst mode
    print when the queue was found empty."""
    name = f"{queue}-{index}-{uuid.uuid4().hex[:8]}"
    if engine == "db":
        from django.core.management import call_command
        from django.db import connection

        connection.ensure_connection()
        connection.close()  # back to the pool, as the worker's loop leaves it
        print("ready", flush=True)
        sys.stdin.readline()
        options = ["--queue-name", queue, "--interval", POLL, "--no-reload", "--worker-id", name]
        # A drain starts every worker at the release; idle workers keep the command's default
        # random start-up delay (up to 1 s), so that separate processes do not poll in step.
        options += ["--batch", "--no-startup-delay"] if burst else []
        call_command("db_worker", *options, verbosity=0)
        print(json.dumps({"end": time.time()}), flush=True)
        return
    from rq import Queue, SimpleWorker, Worker

    conn = _redis()
    conn.ping()
    job_class = None
    if engine == "dtrq":
        import django_rq
        from django_tasks_rq import Job

        job_class = Job
        conn = django_rq.get_connection(queue)
    cls = SimpleWorker if kind == "simple" else Worker
    q = Queue(queue, connection=conn, job_class=job_class)
    worker = cls([q], connection=conn, name=name, job_class=job_class)
    print("ready", flush=True)
    sys.stdin.readline()
    worker.work(burst=burst, logging_level="WARNING")
    print(json.dumps({"end": time.time()}), flush=True)


# ---------------------------------------------------------------- the parent


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def install_peers() -> tuple[str | None, str]:
    """The peer venv's python (RQ, django-tasks-rq, Django 6.1), installed on first use."""
    venv = PEERS / f"rq-{RQ_VERSION}-dtrq-{DTRQ_VERSION}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists():
        print(f"installing rq {RQ_VERSION} and django-tasks-rq {DTRQ_VERSION} into {venv}...")
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            packages = [f"rq=={RQ_VERSION}", f"django-tasks-rq=={DTRQ_VERSION}", "django>=6.1,<6.2"]
            pip = [str(python), "-m", "pip", "install", "-q", *packages]
            done = subprocess.run(pip, capture_output=True, text=True, timeout=900)
            if done.returncode:
                return None, f"RQ could not be installed: {done.stderr.strip()[-400:]}"
            stamp.write_text("ok\n")
        except (subprocess.SubprocessError, OSError) as exc:
            return None, f"RQ could not be installed: {exc}"
    return str(python), ""


class Bench:
    def __init__(self, folder: Path, tag: str):
        self.folder = folder
        self.tag = tag  # the queue name, and in every job id and worker name
        self.procs: list[subprocess.Popen] = []
        self.dbname: str | None = None
        self.ids = folder / "ids.txt"
        self.redis_before: set[bytes] = set()

    # ------------------------------------------------------------ processes

    def env(self, engine: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env["PYTHONPATH"] = str(self.folder)
        env["BENCH_QUEUE"] = self.tag
        env["BENCH_IDS"] = str(self.ids) if engine != "db" else ""
        env["BENCH_REDIS_HOST"], env["BENCH_REDIS_PORT"] = REDIS_HOST, str(REDIS_PORT)
        env["BENCH_REDIS_DB"] = str(REDIS_DB)
        if engine == "db":
            env["DJANGO_SETTINGS_MODULE"] = "benchjobs_db_settings"
            env["BENCH_DATABASE_URL"] = PG.rsplit("/", 1)[0] + "/" + str(self.dbname)
        elif engine == "dtrq":
            env["DJANGO_SETTINGS_MODULE"] = "benchjobs_dtrq_settings"
        return env

    def spawn(self, python: str, engine: str, *args: str) -> subprocess.Popen:
        with (self.folder / f"agent-{len(self.procs)}.log").open("w") as log:
            proc = subprocess.Popen(
                [python, str(Path(__file__).resolve()), "--agent", *args],
                cwd=self.folder,
                env=self.env(engine),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.procs.append(proc)
        return proc

    def run(self, python: str, engine: str, *args: str, timeout: float = 120) -> str:
        proc = self.spawn(python, engine, *args)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise RuntimeError(f"{' '.join(args)} did not finish in {timeout:.0f} s") from None
        if proc.returncode:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {self.log(proc)}")
        return out

    def log(self, proc: subprocess.Popen) -> str:
        index = self.procs.index(proc)
        text = (self.folder / f"agent-{index}.log").read_text(errors="replace").strip()
        return text.splitlines()[-1] if text else "(no output)"

    def start_workers(
        self, python: str, engine: str, kind: str, n: int, burst: bool
    ) -> list[subprocess.Popen]:
        mode = "burst" if burst else "idle"
        workers = [
            self.spawn(python, engine, "worker", engine, kind, str(i), mode) for i in range(n)
        ]
        for proc in workers:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else ""
            if line.strip() != "ready":
                raise RuntimeError(f"a worker did not start: {self.log(proc)}")
        return workers

    @staticmethod
    def release(workers: list[subprocess.Popen]) -> float:
        at = time.time()
        for proc in workers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return at

    @staticmethod
    def stop(workers: list[subprocess.Popen]) -> None:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # ------------------------------------------------------------ services

    def create_database(self) -> None:
        import psycopg

        self.dbname = f"gambit_bench_jobs_{os.getpid()}"
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.dbname}"')
        self.run(sys.executable, "db", "migrate", "db")

    def database_counts(self, clear: bool) -> dict[str, int]:
        import psycopg

        url = PG.rsplit("/", 1)[0] + "/" + str(self.dbname)
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(f"SELECT status, count(*) FROM {TABLE} GROUP BY status").fetchall()
            if clear:
                conn.execute(f"TRUNCATE {TABLE}")
        return {status: count for status, count in rows}

    def drop_database(self) -> None:
        if not self.dbname:
            return
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
        self.dbname = None

    def redis_snapshot(self) -> None:
        import redis

        conn = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
        self.redis_before = set(conn.scan_iter(match="rq:*", count=1000))

    def redis_cleanup(self) -> tuple[int, list[bytes]]:
        """Delete the keys of this run's queue, jobs and workers, and RQ's shared lock keys if
        this run created them; nothing else. Returns the count, and any other key that
        appeared during the run (left alone)."""
        import redis

        conn = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
        ids = set(self.ids.read_text().split()) if self.ids.exists() else set()
        mine = [
            key
            for key in conn.scan_iter(match="rq:*", count=1000)
            if self.tag.encode() in key
            or any(part.decode() in ids for part in key.split(b":"))
            or (key in RQ_LOCKS and key not in self.redis_before)
        ]
        for i in range(0, len(mine), 500):
            conn.delete(*mine[i : i + 500])
        # The two registries shared by every queue and worker: only our members go.
        conn.srem("rq:queues", f"rq:queue:{self.tag}")
        workers = [m for m in conn.smembers("rq:workers") if self.tag.encode() in m]
        if workers:
            conn.srem("rq:workers", *workers)
        others = set(conn.scan_iter(match="rq:*", count=1000)) - self.redis_before
        return len(mine), sorted(others)

    def rq_counts(self) -> dict[str, int]:
        """Jobs in this run's queue, finished and failed registries (RQ keeps the worker's
        own counts in Redis, and removes them when the worker stops)."""
        import redis

        conn = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
        return {
            "queued": int(conn.llen(f"rq:queue:{self.tag}")),
            "SUCCESSFUL": int(conn.zcard(f"rq:finished:{self.tag}")),
            "FAILED": int(conn.zcard(f"rq:failed:{self.tag}")),
        }

    # ------------------------------------------------------------ one case

    def case(
        self, python: str, engine: str, kind: str, n_workers: int, n: int, k: int, gap: float
    ) -> dict:
        # Enqueue N no-ops, no worker running.
        out = json.loads(self.run(python, engine, "enqueue", engine, str(n)))
        enqueue_rate = out["count"] / out["seconds"]
        # Drain them: workers set up, then released together.
        before = self.rq_counts() if engine != "db" else {}
        workers = self.start_workers(python, engine, kind, n_workers, burst=True)
        go = self.release(workers)
        ends = []
        for proc in workers:
            try:
                out_text, _ = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                self.stop(workers)
                raise RuntimeError("the drain did not finish in 300 s") from None
            if proc.returncode or not out_text.strip():
                raise RuntimeError(f"a worker exited {proc.returncode}: {self.log(proc)}")
            ends.append(json.loads(out_text.strip().splitlines()[-1])["end"])
        drain = max(ends) - go
        if engine == "db":
            counts = self.database_counts(clear=True)
        else:
            after = self.rq_counts()
            counts = {name: after[name] - before[name] for name in after}
            counts["queued"] = after["queued"]
        done = counts.pop("SUCCESSFUL", 0)
        if done != n or any(counts.values()):
            raise RuntimeError(f"drained {done} of {n} tasks; left or failed: {counts}")
        # Trickle K stamps into idle workers.
        stamps = self.folder / f"stamps-{uuid.uuid4().hex[:8]}.txt"
        workers = self.start_workers(python, engine, kind, n_workers, burst=False)
        self.release(workers)
        time.sleep(1.5)  # past start-up: polling (db) or blocked on the queue (rq)
        try:
            self.run(python, engine, "trickle", engine, str(k), str(gap), str(stamps))
        finally:
            self.stop(workers)
        if engine == "db":
            self.database_counts(clear=True)
        lines = stamps.read_text().splitlines() if stamps.exists() else []
        if len(lines) != k:
            raise RuntimeError(f"{len(lines)} of {k} trickled tasks started within 30 s")
        latencies = sorted(float(b) - float(a) for a, b in (line.split() for line in lines))
        return {
            "enqueue": enqueue_rate,
            "drain": drain,
            "throughput": n / drain,
            "p50": statistics.median(latencies),
            "p95": latencies[math.ceil(0.95 * len(latencies)) - 1],
        }

    def reset(self, engine: str) -> None:
        """After a failed case: nothing of it stays queued for the next one."""
        self.cleanup()
        if engine == "db":
            self.database_counts(clear=True)
        else:
            import redis

            redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB).delete(
                f"rq:queue:{self.tag}"
            )

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


CASES = {
    "db": [("django-tasks-db, db_worker", "db")],
    "rq": [("RQ, Worker (fork per job)", "fork"), ("RQ, SimpleWorker", "simple")],
    "dtrq": [("django-tasks-rq, Worker (fork)", "fork")],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="no-op tasks per drain")
    parser.add_argument("--trickle", type=int, default=50, help="tasks in the latency trickle")
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between trickled tasks")
    parser.add_argument("--rounds", type=int, default=1, help="medians over this many rounds")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engines", nargs="+", choices=list(CASES), default=["db", "rq"])
    args = parser.parse_args()
    # A SIGTERM unwinds through the cleanup below, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    folder = Path(tempfile.mkdtemp(prefix="gambit-bench-jobs-"))
    (folder / "benchjobs_tasks.py").write_text(TASKS_MODULE)
    (folder / "benchjobs_rq.py").write_text(RQ_MODULE)
    (folder / "benchjobs_db_settings.py").write_text(DB_SETTINGS)
    (folder / "benchjobs_dtrq_settings.py").write_text(DTRQ_SETTINGS)
    bench = Bench(folder, f"gambit-bench-jobs-{os.getpid()}")
    pythons: dict[str, str] = {}
    skipped: list[str] = []
    if "db" in args.engines:
        pg = urlparse(PG)
        pg_host, pg_port = pg.hostname or "127.0.0.1", pg.port or 5432
        if reachable(pg_host, pg_port):
            pythons["db"] = sys.executable
        else:
            skipped.append(f"django-tasks-db: PostgreSQL does not answer on {pg_host}:{pg_port}")
    peers = [e for e in args.engines if e != "db"]
    if peers:
        if not reachable(REDIS_HOST, REDIS_PORT):
            skipped.append(f"RQ: Redis does not answer on {REDIS_HOST}:{REDIS_PORT}")
        else:
            python, why = install_peers()
            if python is None:
                skipped.append(why)
            else:
                pythons.update({engine: python for engine in peers})

    results: dict[tuple[str, int], list[dict]] = {}
    errors: dict[tuple[str, int], str] = {}
    started, load = time.perf_counter(), os.getloadavg()[0]
    use_redis = any(engine in pythons for engine in peers)
    cleaned: list[str] = []
    try:
        if use_redis:
            bench.redis_snapshot()
        if "db" in pythons:
            try:
                bench.create_database()
            except Exception as exc:  # psycopg's errors, or the migration's
                skipped.append(f"django-tasks-db: its database could not be set up: {exc}")
                del pythons["db"]
        # Each round runs every engine at 1 worker, then every engine at 2, so that a change
        # of load on this machine falls on all of them alike.
        for round_no in range(1, args.rounds + 1):
            for n_workers in args.workers:
                for engine in args.engines:
                    if engine not in pythons:
                        continue
                    for label, kind in CASES[engine]:
                        key = (label, n_workers)
                        if key in errors:
                            continue
                        try:
                            figures = bench.case(
                                pythons[engine],
                                engine,
                                kind,
                                n_workers,
                                args.tasks,
                                args.trickle,
                                args.gap,
                            )
                        except RuntimeError as exc:
                            errors[key] = str(exc)
                            bench.reset(engine)
                            continue
                        results.setdefault(key, []).append(figures)
                        print(
                            f"round {round_no}: {label} x{n_workers}: "
                            f"{figures['enqueue']:.0f} enqueued/s, drain {figures['drain']:.2f} s, "
                            f"start p50 {figures['p50'] * 1000:.1f} ms",
                            flush=True,
                        )
    finally:
        bench.cleanup()
        if bench.dbname:
            cleaned.append(f"database {bench.dbname} dropped")
            bench.drop_database()
        if use_redis:
            removed, others = bench.redis_cleanup()
            cleaned.append(f"{removed} Redis keys of this run deleted (db {REDIS_DB})")
            if others:
                shown = ", ".join(key.decode() for key in others[:5])
                cleaned.append(f"{len(others)} other new rq:* keys left alone: {shown}")
        shutil.rmtree(folder, ignore_errors=True)
    elapsed = time.perf_counter() - started

    rounds = f"median of {args.rounds} rounds" if args.rounds > 1 else "one round"
    print(
        f"\n{args.tasks} no-op tasks per drain, {args.trickle} trickled one every "
        f"{args.gap * 1000:.0f} ms; {rounds}; {os.cpu_count()} cores, load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {elapsed:.0f} s"
    )
    for why in skipped:
        print(f"skipped: {why}")
    if not results and not errors:
        return
    header = f"{'engine, worker':32} {'procs':>5} {'enqueue/s':>10} {'drain':>8} {'drained/s':>10} {'start p50':>10} {'p95':>8}"
    print(header)
    print("-" * len(header))
    for engine in args.engines:
        for label, _ in CASES[engine]:
            for n_workers in args.workers:
                key = (label, n_workers)
                if key in errors:
                    print(f"{label:32} {n_workers:>5}  failed: {errors[key]}")
                    continue
                if key not in results:
                    continue

                def med(name: str, rows: list[dict] = results[key]) -> float:
                    return statistics.median(row[name] for row in rows)

                print(
                    f"{label:32} {n_workers:>5} {med('enqueue'):>10.0f} {med('drain'):>7.2f}s "
                    f"{med('throughput'):>10.0f} {med('p50') * 1000:>8.1f}ms "
                    f"{med('p95') * 1000:>6.1f}ms"
                )
    if cleaned:
        print("cleaned up: " + "; ".join(cleaned))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent"]:
        agent(sys.argv[2:])
    else:
        main()
