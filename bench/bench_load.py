"""Load and scale-out of the simulator, as whole processes on this machine.

    .venv/bin/python bench/bench_load.py [--streams 100] [--conversations 400]
                                          [--workers 1 2 4] [--model-ms 100] [--no-distributed]
                                          [--only embedded|distributed|scale-out] [--rounds 1]

1. **Streams.** N websocket clients (a minimal RFC 6455 client, as a browser speaks it) each
   open a session page's socket, then send a message; the model streams 40 numbered deltas
   per reply. Every client checks that the deltas it received spell the reply exactly once:
   none lost, none duplicated. Run on the embedded profile (`gambit serve`, SQLite) and, when
   PostgreSQL and Redis answer on 127.0.0.1, on the distributed profile (`gambit serve` plus
   a `gambit worker`, a fresh database).
2. **Scale-out.** M one-turn conversations are queued at once against a model that takes
   100 ms per reply, then drained by 1, 2 and 4 `gambit worker` processes (8 slots each) on
   the distributed profile, each from its own copy of the queued database (PostgreSQL's
   `CREATE DATABASE ... TEMPLATE`: the conversations are queued once). The queue is held
   (the tasks' `run_after` in the future) until every worker has started its slots, then
   released, so one worker's runs do not share the cores with another's start-up. Throughput
   (conversations per second) should grow with workers; the ratios to one worker are
   printed, and the workers' CPU per run (Linux's /proc, from the first claim to the last
   run's end), the rest of the machine's (PostgreSQL, Redis, the kernel, this bench) and, of
   that, this bench's own (its fake model's threads share the same cores), and how busy each
   worker kept its core and the machine its cores over that span. `--rounds N`
   drains with each count N times, alternating, and prints the medians last: on a noisy
   machine one round's ratio says little. Its last line says whether one worker's runs
   queued for its own CPU (a slow phase of this machine, which bounds the ratios). Needs
   PostgreSQL and Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_model_server import FakeModelServer, Reply  # noqa: E402
from tests.support.machine import reachable  # noqa: E402

SERVE = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"
SLOTS = 8  # each scale-out worker's, as `gambit worker` starts by default
WORKER = "import sys; from gambit.cli._serve import worker_command; worker_command(sys.argv[1:])"
PG = os.environ.get("GAMBIT_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("GAMBIT_TEST_REDIS", "redis://127.0.0.1:6379/6")
# The streaming bubble, re-rendered whole at each delta (docs/simulator.md, "Streaming").
LIVE_TEXT = re.compile(
    r'<div id="live"[^>]*>.*?<div class="bubble assistant streaming"[^>]*>\s*'
    r'<div class="text">(.*?)</div>',
    re.S,
)
TAG = re.compile(r"<[^>]+>")
STATUS = re.compile(r'id="cursor"[^>]*data-status="(\w*)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- a minimal websocket client


class Socket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, path: str) -> Socket:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Origin: http://127.0.0.1:{port}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"websocket refused: {head[:80]!r}")
        return cls(reader, writer)

    async def send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (
            bytes([0x80 | n])
            if n < 126
            else bytes([0x80 | 126]) + struct.pack(">H", n)
            if n < 65536
            else bytes([0x80 | 127]) + struct.pack(">Q", n)
        )
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        await self.writer.drain()

    async def recv(self) -> str | None:
        """The next text message, or None when the server closed the socket."""
        parts = []
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 127
            if n == 126:
                n = struct.unpack(">H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(n)
            opcode = b0 & 15
            if opcode == 8:
                return None
            if opcode in (0, 1):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.writer.close()


# ---------------------------------------------------------------- a deployment


class Simulator:
    def __init__(self, fake: FakeModelServer, folder: Path, distributed: bool, workers: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(fake.env())
        env["GAMBIT_SIM_DB"] = str(folder / "sim.sqlite3")
        self.dbname = None
        if distributed:
            import psycopg

            self.dbname = f"gambit_bench_{os.getpid()}_{self.port}"
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.dbname}"')
            env["DATABASE_URL"] = PG.rsplit("/", 1)[0] + "/" + self.dbname
            env["REDIS_URL"] = REDIS
        self.env = env
        self.log = (folder / f"serve-{self.port}.log").open("w")
        self._spawn(
            [SERVE, "--port", str(self.port)] + ([] if distributed else ["--workers", "32"])
        )
        self._wait()
        self.distributed = distributed
        for _ in range(workers if distributed else 0):
            self.add_worker()

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", *args], cwd=ROOT, env=self.env, stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def add_worker(self, slots: int = 8) -> None:
        self._spawn([WORKER, "--slots", str(slots)])

    def _wait(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/test.json", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gambit serve did not start: " + Path(self.log.name).read_text())

    def stop(self, keep_database: bool = False) -> None:
        stop_processes(self.procs)
        self.log.close()
        if self.dbname and not keep_database:
            import psycopg

            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """Ask each process to stop, then wait up to 15 s for it before killing it."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


async def http(
    port: int, method: str, path: str, form: dict | None = None, cookies: dict | None = None
):
    """A tiny HTTP/1.1 client on asyncio streams (keeps the bench free of thread pools)."""
    import json
    from urllib.parse import urlencode

    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
    body = urlencode(form or {}).encode()
    cookie = "; ".join(f"{k}={v}" for k, v in (cookies or {}).items())
    headers = [
        f"{method} {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Origin: http://127.0.0.1:{port}",
        "Connection: close",
    ]
    if cookie:
        headers.append(f"Cookie: {cookie}")
    if method == "POST":
        headers += [
            "Content-Type: application/x-www-form-urlencoded",
            f"Content-Length: {len(body)}",
            f"X-CSRFToken: {(cookies or {}).get('csrftoken', '')}",
        ]
    writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, content = raw.partition(b"\r\n\r\n")
    set_cookies = dict(re.findall(rb"[Ss]et-[Cc]ookie: (\w+)=([^;]+)", head))
    status = int(head.split(b" ", 2)[1])
    if b"chunked" in head.lower():
        out, rest = b"", content
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2 :]
        content = out
    data = json.loads(content) if content[:1] in (b"{", b"[") else None
    return status, data, {k.decode(): v.decode() for k, v in set_cookies.items()}


async def csrf(port: int) -> dict:
    _, _, cookies = await http(port, "GET", "/test")
    return cookies


# ---------------------------------------------------------------- 1. streams


async def one_stream(port: int, cookies: dict, expected: str, index: int) -> dict:
    status, data, _ = await http(
        port, "POST", "/test/new?format=json",
        {"deck": "support/PROMPT.md", "model": "openresponses/fake"}, cookies,
    )  # fmt: skip
    session = data["id"]
    sock = await Socket.open(port, f"/ws/sessions/{session}/")
    await sock.send('{"after": 0, "version": -1}')
    await sock.recv()  # the hello's answer
    started = time.monotonic()
    await http(
        port, "POST", f"/test/{session}/send?format=json", {"message": f"go {index}"}, cookies
    )
    shown = ""  # the most the streaming bubble showed while the run went on
    final = None
    final_html = ""
    while True:
        message = await asyncio.wait_for(sock.recv(), timeout=120)
        if message is None:
            break
        for live in LIVE_TEXT.findall(message):
            text = " ".join(TAG.sub(" ", live).split())
            if len(text) > len(shown):
                shown = text
        found = STATUS.findall(message)
        if 'id="conversation"' in message:
            final_html = message
        if found and found[-1] in ("completed", "failed", "interrupted"):
            final = found[-1]
            break
    sock.close()
    got = shown
    words = expected.split()
    # Deltas still in flight when the run ended reach the page inside the re-rendered
    # conversation (the cursor moves past them): lost means missing from both.
    in_final = expected.strip() in final_html
    return {
        "status": final,
        "ok": got.split() == words or in_final,
        "live": got.split() == words,
        "lost": 0 if in_final else len(set(words) - set(got.split())),
        "duplicated": len(got.split()) - len(set(got.split())),
        "seconds": time.monotonic() - started,
    }


def streams(fake: FakeModelServer, folder: Path, n: int, distributed: bool) -> None:
    deltas = [f"d{i:02d} " for i in range(40)]
    expected = "".join(deltas)
    fake.default_reply = Reply(deltas=deltas, delay=0.03)
    sim = Simulator(fake, folder, distributed, workers=2)
    try:

        async def main():
            cookies = await csrf(sim.port)
            started = time.monotonic()
            results = await asyncio.gather(
                *(one_stream(sim.port, cookies, expected, i) for i in range(n))
            )
            return results, time.monotonic() - started

        try:
            results, wall = asyncio.run(main())
        except Exception:
            sim.log.flush()
            print("".join(Path(sim.log.name).read_text().splitlines(True)[-60:]), file=sys.stderr)
            print("processes:", [p.poll() for p in sim.procs], file=sys.stderr)
            raise
    finally:
        sim.stop()
    done = sum(r["status"] == "completed" for r in results)
    exact = sum(r["ok"] for r in results)
    live = sum(r["live"] for r in results)
    lost = sum(r["lost"] for r in results)
    dup = sum(r["duplicated"] for r in results)
    times = sorted(r["seconds"] for r in results)
    profile = "distributed (PostgreSQL, Redis, 2 workers)" if distributed else "embedded (SQLite)"
    print(
        f"{n} concurrent streams, {profile}: {done}/{n} completed, {exact}/{n} whole replies "
        f"({live} saw every word in the streaming bubble, the rest the last words only in the "
        f"finished conversation, as the page shows it), {lost} words lost, {dup} deltas duplicated; wall {wall:.1f} s, per stream median "
        f"{times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s"
    )


# ---------------------------------------------------------------- 2. scale-out


def machine_cpu_seconds() -> float | None:
    """CPU time every process of the machine has used so far, steal left out (Linux's
    /proc/stat: user, nice, system, irq and softirq; None elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds(procs: list[subprocess.Popen]) -> float | None:
    """User and system CPU the processes have used so far (Linux's /proc; None elsewhere)."""
    total = 0.0
    try:
        for proc in procs:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


def own_cpu_seconds() -> float:
    """User and system CPU this process has used so far: the fake model's threads, and this
    bench's own polling."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def scaleout(
    fake: FakeModelServer,
    folder: Path,
    conversations: int,
    counts: list[int],
    model_ms: int,
    rounds: int = 1,
) -> None:
    """Queue the conversations once, then drain a copy of that database with each number of
    workers in turn, `rounds` times (alternating, so the machine's slow spells fall on every
    count alike); with several rounds, the medians and their ratios are printed last."""
    # `model_ms` before the first byte, then the whole reply at once (`delay` would pause
    # before each of the stream's ~10 writes).
    fake.default_reply = Reply(text="ok", delay_before=model_ms / 1000)
    sim = Simulator(fake, folder, distributed=True, workers=0)
    try:

        async def queue_all(port: int):
            cookies = await csrf(port)
            for i in range(conversations):
                _, data, _ = await http(
                    port, "POST", "/test/new?format=json",
                    {"deck": "support/PROMPT.md", "model": "openresponses/fake"}, cookies,
                )  # fmt: skip
                if not isinstance(data, dict) or "id" not in data:
                    raise SystemExit(f"/test/new answered {data!r}")
                await http(
                    port, "POST", f"/test/{data['id']}/send?format=json",
                    {"message": f"m{i}"}, cookies,
                )  # fmt: skip

        asyncio.run(queue_all(sim.port))
    except BaseException:
        sim.stop()
        raise
    sim.stop(keep_database=True)  # the queued runs: every drain starts from a copy
    import psycopg

    queued = sim.dbname
    assert queued is not None
    drains: dict[int, list[tuple[float, float]]] = {n: [] for n in counts}
    fills: list[float] = []  # how much of its core one worker kept busy, each round
    try:
        for round_ in range(rounds):
            for workers in counts:
                copy = f"{queued}_{round_}_{workers}"
                with psycopg.connect(PG, autocommit=True) as conn:
                    _copy_database(conn, queued, copy)
                try:
                    rate, steady, line, fill = _drain(sim, copy, workers, model_ms)
                finally:
                    with psycopg.connect(PG, autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
                drains[workers].append((rate, steady))
                if workers == 1 and fill is not None:
                    fills.append(fill)
                first = drains[counts[0]][-1]
                print(
                    "scale-out"
                    + (f" (round {round_ + 1} of {rounds})" if rounds > 1 else "")
                    + f": {conversations} conversations, {model_ms} ms model, {line}"
                    + (
                        f"; {rate / first[0]:.2f}x {counts[0]} worker"
                        f" (sustained {steady / first[1]:.2f}x)"
                        if workers != counts[0]
                        else ""
                    ),
                    flush=True,
                )
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{queued}" WITH (FORCE)')
    if rounds > 1:
        median = {n: [statistics.median(r[i] for r in drains[n]) for i in (0, 1)] for n in counts}
        base = median[counts[0]]
        print(
            f"scale-out, medians of {rounds} rounds: "
            + ", ".join(
                f"{n} worker(s) {median[n][0]:.1f}/s (sustained {median[n][1]:.1f}/s)"
                + (
                    f" = {median[n][0] / base[0]:.2f}x (sustained {median[n][1] / base[1]:.2f}x)"
                    if n != counts[0]
                    else ""
                )
                for n in counts
            )
        )
    if fills and counts[0] == 1 and len(counts) > 1:
        print(_reading(statistics.median(fills)))


def _reading(fill: float) -> str:
    """What the ratios above can say, from how busy one worker kept its core (the median of
    the rounds). A worker whose runs queue for its own CPU holds the ratio near 1.6x
    whatever a run costs: since the queue's rework, the slow phases of this machine measured
    71 to 81% of a core, the fast ones 43 to 64% (docs/benchmarks.md, "Scale-out beside the
    commit the issue was filed against")."""
    if fill >= 0.70:
        return (
            f"one worker kept {fill:.0%} of its core busy: its runs queued for its own CPU (a"
            " slow phase of this machine, or runs this dear), so the ratios above are bounded"
            " by the machine's cores more than by the queue"
        )
    return (
        f"one worker kept {fill:.0%} of its core busy: its slots and the model's latency set"
        " its rate, so the ratios above measure how two workers share the machine"
    )


def _copy_database(conn: Any, source: str, target: str) -> None:
    """`target` as a copy of `source` (PostgreSQL refuses while a connection to `source`
    is still closing: try again for a few seconds)."""
    import psycopg

    for _ in range(50):
        try:
            conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')
            return
        except psycopg.errors.ObjectInUse:
            time.sleep(0.1)
    conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')


TASKS = "django_tasks_database_dbtaskresult"  # django-tasks-db's table (app label django_tasks_database)


def _hold_queue(conn: Any) -> Any:
    """Make the queued tasks wait (django-tasks-db takes a ready task only once its
    `run_after` has passed); what their `run_after` was, for `_release_queue`."""
    values = conn.execute(f"SELECT DISTINCT run_after FROM {TASKS} WHERE status = 'READY'")
    (original,) = values.fetchone()
    if values.fetchone() is not None:
        raise SystemExit("the queued tasks differ in run_after: this bench queues them alike")
    conn.execute(f"UPDATE {TASKS} SET run_after = now() + interval '1 hour' WHERE status = 'READY'")
    return original


def _release_queue(conn: Any, original: Any) -> None:
    conn.execute(f"UPDATE {TASKS} SET run_after = %s WHERE status = 'READY'", (original,))


def _wait_until_up(procs: list[subprocess.Popen], logs: list[Path]) -> None:
    """Until every worker has said it started its slots (`gambit worker NAME: N slots`)."""
    deadline = time.monotonic() + 120
    waiting = set(range(len(procs)))
    while waiting:
        for i in list(waiting):
            if procs[i].poll() is not None:
                raise SystemExit(f"a gambit worker stopped while starting: see {logs[i]}")
            if " slots, profile " in logs[i].read_text(errors="replace"):
                waiting.discard(i)
        if time.monotonic() > deadline:
            raise SystemExit(f"gambit worker did not start within 120 s: see {logs[0]}")
        time.sleep(0.05)


def _drain(
    sim: Simulator, database: str, workers: int, model_ms: int
) -> tuple[float, float, str, float | None]:
    """Start `workers` `gambit worker` processes (8 slots each) on `database`, wait until
    its queued runs have ended; the whole-span rate, the sustained rate, a line saying so,
    and how much of a core each worker kept busy (None when /proc could not tell)."""
    import psycopg

    url = PG.rsplit("/", 1)[0] + "/" + database
    env = dict(sim.env, DATABASE_URL=url)
    # The queue is held while the workers start, and released once every one of them is
    # up: with several workers started together, the first one's runs would otherwise
    # share the cores with the others' start-up (about 1 s of CPU each), which this count
    # means to leave out.
    with psycopg.connect(url, autocommit=True) as conn:
        held = _hold_queue(conn)
    logs = [Path(sim.log.name).with_name(f"worker-{database}-{i}.log") for i in range(workers)]
    started = time.monotonic()
    procs = []
    for log in logs:
        with log.open("w") as out:  # the worker writes to its own copy
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", WORKER, "--slots", str(SLOTS)],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            )
    try:
        _wait_until_up(procs, logs)
        with psycopg.connect(url, autocommit=True) as conn:
            _release_queue(conn, held)
    except BaseException:
        stop_processes(procs)
        raise
    # The workers' CPU from their first claim to the last run's end (start-up left out).
    cpu_at_first_claim: float | None = None
    machine_at_first_claim: float | None = None
    own_at_first_claim = own_cpu = clock_at_first_claim = measured = 0.0
    # This bench's own statements, left out of the count below: the loop's last poll (the
    # others are counted as they happen), the query after the loop, and the three that hold
    # and release the queue.
    polls = 5
    workers_cpu = machine_cpu = None
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                (left, claimed) = conn.execute(
                    "SELECT count(*) FILTER (WHERE status IN ('queued', 'running')),"
                    " count(*) FILTER (WHERE status <> 'queued') FROM decks_app_run"
                ).fetchone()
                if claimed and cpu_at_first_claim is None:
                    cpu_at_first_claim = cpu_seconds(procs)
                    machine_at_first_claim = machine_cpu_seconds()
                    own_at_first_claim = own_cpu_seconds()
                    clock_at_first_claim = time.monotonic()
                if left == 0:
                    break
                polls += 1
                if any(proc.poll() is not None for proc in procs):
                    raise SystemExit(f"a gambit worker stopped: see {logs[0].parent}")
                time.sleep(0.05)
            cpu_at_end, machine_at_end = cpu_seconds(procs), machine_cpu_seconds()
            own_cpu = own_cpu_seconds() - own_at_first_claim
            measured = time.monotonic() - clock_at_first_claim
            if cpu_at_first_claim is not None and cpu_at_end is not None:
                workers_cpu = cpu_at_end - cpu_at_first_claim
            if machine_at_first_claim is not None and machine_at_end is not None:
                machine_cpu = machine_at_end - machine_at_first_claim
            wall = time.monotonic() - started
            completed = conn.execute(
                "SELECT started_at, finished_at FROM decks_app_run WHERE status = 'completed'"
            ).fetchall()
    finally:
        stop_processes(procs)
    # The transactions committed in this database (every statement outside a transaction is
    # one), from PostgreSQL's statistics once the workers have exited (a backend reports its
    # counts when it exits): this bench's statements are subtracted (`polls`); the workers'
    # start-up and their slots' idle polls, while the queue is held and at the end, are in.
    time.sleep(0.5)  # their backends exit after their clients
    with psycopg.connect(PG, autocommit=True) as conn:
        (commits,) = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (database,)
        ).fetchone()
    # When each run started (how long the slots took to all have one, below) and ended.
    starts = sorted(started for started, _ in completed)
    ends = sorted(finished for _, finished in completed)
    done = len(completed)
    # From the first run claimed to the last finished: worker start-up (1-2 s of Python
    # and Django per process, all processes on the same 2 cores) is left out.
    busy = (ends[-1] - starts[0]).total_seconds() if done else wall
    rate = done / busy
    # The sustained rate: runs finished between the 10th and the 90th percentile of the
    # finish times, over that time. It leaves out each worker's first runs (its first
    # deck load, its first connections) and the drain at the end, when fewer runs than
    # slots are left: both weigh more on a shorter span (more workers).
    low, high = len(ends) // 10, len(ends) - 1 - len(ends) // 10
    span = (ends[high] - ends[low]).total_seconds() if high > low else 0.0
    steady = (high - low) / span if span > 0 else rate
    slots = workers * SLOTS
    ramp_ms = (
        (starts[slots - 1] - starts[0]).total_seconds() * 1000 if len(starts) >= slots else None
    )
    cores = os.cpu_count()
    core_fill = workers_cpu / measured / workers if workers_cpu and measured > 0 else None
    line = (
        f"{workers} worker(s) x {SLOTS} slots: {done} completed in {busy:.1f} s ({wall:.1f} s"
        f" with start-up) = {rate:.1f}/s (model-bound limit {slots / (model_ms / 1000):.0f}/s)"
        + (
            f", workers' CPU {workers_cpu / done * 1000:.1f} ms per run"
            + (
                # PostgreSQL, Redis, the fake model and this bench share the same cores
                f" (the rest of the machine {(machine_cpu - workers_cpu) / done * 1000:.1f} ms,"
                f" of which this bench and its fake model {own_cpu / done * 1000:.1f} ms)"
                if machine_cpu
                else ""
            )
            + (
                # Over the same span: how busy a worker kept its core, and the machine all of
                # its cores (docs/benchmarks.md, "Before and after the queue's rework").
                f"; each worker kept {core_fill:.0%} of a core busy"
                + (
                    f", the machine {machine_cpu / measured / cores:.0%} of its {cores} cores"
                    if machine_cpu and cores
                    else ""
                )
                if core_fill is not None
                else ""
            )
            if workers_cpu and done
            else ""
        )
        + f"; sustained (the middle 80% of runs) {steady:.1f}/s"
        + (
            # From the first run's start to the start of the run that filled the last slot:
            # how fast idle slots take runs queued together (docs/decisions.md, "An idle
            # slot woken by a sibling").
            f"; all {slots} slots busy {ramp_ms:.0f} ms after the first claim"
            if ramp_ms is not None
            else ""
        )
        + (f"; {(commits - polls) / done:.2f} transactions per run" if done else "")
    )
    return rate, steady, line, core_fill


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--conversations", type=int, default=400)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--no-distributed", action="store_true")
    parser.add_argument("--model-ms", type=int, default=100, help="the scale-out model's latency")
    parser.add_argument(
        "--rounds", type=int, default=1, help="scale-out: drain with each worker count N times"
    )
    parser.add_argument(
        "--only", choices=["embedded", "distributed", "scale-out"], help="run one part alone"
    )
    args = parser.parse_args()
    import tempfile

    distributed = not args.no_distributed and reachable(5432) and reachable(6379)
    if not distributed and not args.no_distributed:
        print("(PostgreSQL or Redis not reachable on 127.0.0.1: the distributed runs are skipped)")
    with FakeModelServer() as fake, tempfile.TemporaryDirectory() as folder:
        if args.only in (None, "embedded"):
            streams(fake, Path(folder), args.streams, distributed=False)
        if distributed and args.only in (None, "distributed"):
            streams(fake, Path(folder), args.streams, distributed=True)
        if distributed and args.only in (None, "scale-out"):
            scaleout(
                fake, Path(folder), args.conversations, args.workers, args.model_ms, args.rounds
            )


if __name__ == "__main__":
    main()
