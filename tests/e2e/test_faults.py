"""Faults of a real deployment, against a PostgreSQL and a Redis this test starts itself:
simultaneous start on an empty database, a database restart mid-run, a worker killed with
SIGKILL mid-run, a broker outage, and SIGTERM. Each asserts final statuses, conversation
contents and how much the processes logged.

Skipped, with the reason, when PostgreSQL's or Redis's server programs are not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.fake_model_server import Reply

from .conftest import ROOT, SERVE, _free_port

WORKER = "import sys; from gambit.cli._serve import worker_command; worker_command(sys.argv[1:])"


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_postgres_user() -> list[str]:
    """initdb refuses to run as root: run PostgreSQL's programs as the postgres user then."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root without runuser: cannot start a PostgreSQL of our own")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no postgres user to start PostgreSQL as")
    return [runuser, "-u", "postgres", "--"]


class Postgres:
    def __init__(self, folder: Path):
        initdb, self.pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if not initdb or not self.pg_ctl or not shutil.which("redis-server"):
            pytest.skip("PostgreSQL (initdb, pg_ctl) or redis-server is not installed")
        self.sudo = _as_postgres_user()
        self.folder = folder
        self.data = folder / "pgdata"
        self.socket_dir = folder / "pgsock"
        self.socket_dir.mkdir()
        if self.sudo:
            shutil.chown(folder, "postgres")
            shutil.chown(self.socket_dir, "postgres")
        self.port = _free_port()
        subprocess.run(
            [*self.sudo, initdb, "-D", str(self.data), "--auth=trust", "-U", "postgres"],
            check=True,
            capture_output=True,
        )
        self.start()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1"
        subprocess.run(
            [*self.sudo, self.pg_ctl, "-D", str(self.data), "-o", options, "-w", *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        self._ctl("-l", str(self.folder / "pg.log"), "start")

    def restart(self) -> None:
        self._ctl("-l", str(self.folder / "pg.log"), "-m", "fast", "restart")

    def stop(self) -> None:
        self._ctl("-m", "immediate", "stop")


class Redis:
    def __init__(self, folder: Path):
        self.port = _free_port()
        self.folder = folder
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                import socket

                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


class Deployment:
    """`gambit serve` and two `gambit worker`s on our own PostgreSQL and Redis."""

    def __init__(self, folder: Path, fake):
        # Outside pytest's private temp folder: the postgres user must be able to reach it.
        import tempfile

        self.pg_folder = Path(tempfile.mkdtemp(prefix="gambit-faults-pg-"))
        self.pg = Postgres(self.pg_folder)
        self.redis = Redis(folder)
        self.folder = folder
        self.env = {
            **os.environ,
            **fake.env(),
            "DATABASE_URL": self.pg.url,
            "REDIS_URL": self.redis.url,
            "GAMBIT_SIM_DB": str(folder / "unused.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "simulator.settings",
            # A dead worker's run is found within seconds here (60 s and 30 s by default).
            "GAMBIT_STALE_AFTER_SECONDS": "3",
            "GAMBIT_RECONCILE_SECONDS": "1",
        }
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-c", *args], cwd=ROOT, env=self.env, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start_all_at_once(self) -> None:
        self.spawn("serve", [SERVE, "--port", str(self.port)])
        self.spawn("worker-a", [WORKER, "--slots", "4"])
        self.spawn("worker-b", [WORKER, "--slots", "4"])

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def wait_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{self.log(name)}"
            workers_up = all("gambit worker" in self.log(n) for n in self.procs if "worker" in n)
            try:
                if workers_up and httpx.get(self.url + "/test.json", timeout=2).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the deployment did not come up:\n" + self.log("serve"))

    def client(self) -> tuple[httpx.Client, dict[str, str]]:
        client = httpx.Client(base_url=self.url, timeout=10, headers={"Origin": self.url})
        client.get("/test")
        return client, {"X-CSRFToken": client.cookies["csrftoken"]}

    def send(self, message: str) -> tuple[str, httpx.Client, dict[str, str]]:
        client, headers = self.client()
        r = client.post(
            "/test/new?format=json",
            data={"deck": "support/PROMPT.md", "model": "openresponses/fake"},
            headers=headers,
        )
        session = r.json()["id"]
        r = client.post(
            f"/test/{session}/send?format=json", data={"message": message}, headers=headers
        )
        assert r.status_code == 202, r.text
        return session, client, headers

    def session(self, client: httpx.Client, session: str) -> dict:
        return client.get(f"/test/{session}.json").json()

    def wait_status(self, client, session, statuses, timeout=60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self.session(client, session)
            if data["status"] in statuses:
                return data
            time.sleep(0.2)
        raise AssertionError(f"{session} is {data['status']}, not one of {statuses}")

    def wait_streaming(self, client, session, deltas: int = 3) -> None:
        """Until this session's trace holds some text deltas (the cursor is global)."""
        deadline = time.monotonic() + 20
        while True:
            events = self.session(client, session)["events"]
            if sum(e["type"] == "response.output_text.delta" for e in events) >= deltas:
                return
            assert time.monotonic() < deadline, "the run did not start streaming"
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        self.redis.stop()
        try:
            self.pg.stop()
        except Exception:
            pass
        shutil.rmtree(self.pg_folder, ignore_errors=True)


@pytest.fixture(scope="module")
def deployment(fake_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    d = Deployment(folder, fake_model)
    try:
        d.start_all_at_once()  # on an empty database: migrations must run once, not crash
        d.wait_up()
        yield d
    finally:
        d.stop()


def _lines(text: str) -> int:
    return len([line for line in text.splitlines() if line.strip()])


def test_a_server_and_two_workers_started_together_on_an_empty_database_all_come_up(
    deployment,
):
    for name, proc in deployment.procs.items():
        assert proc.poll() is None, name
        assert "Traceback" not in deployment.log(name), deployment.log(name)
    session, client, _ = deployment.send("hello")
    data = deployment.wait_status(client, session, ("completed", "failed"))
    assert data["status"] == "completed"


def test_workers_survive_a_database_restart_mid_run(deployment, fake_model):
    fake_model.queue(Reply(deltas=[f"w{i} " for i in range(150)], delay=0.03))
    session, client, _ = deployment.send("through a restart")
    deployment.wait_streaming(client, session)
    deployment.pg.restart()
    data = deployment.wait_status(client, session, ("completed", "failed", "interrupted"), 90)
    said = [c for c in data["conversation"] if c["kind"] in ("user", "assistant")]
    assert said[0]["text"] == "through a restart"
    if data["status"] == "interrupted":  # its worker lost it: the turn is kept, with Retry
        assert data["retry"] is not None
    for name in ("worker-a", "worker-b"):
        assert deployment.procs[name].poll() is None, deployment.log(name)
    # The workers keep claiming work after the restart.
    session, client, _ = deployment.send("after the restart")
    assert deployment.wait_status(client, session, ("completed", "failed"), 60)["status"] == (
        "completed"
    )
    for name in ("worker-a", "worker-b"):
        log = deployment.log(name)
        assert _lines(log) < 40, log  # one line when it goes, one when it is back


def test_a_run_whose_worker_is_killed_ends_interrupted_with_its_turn_and_retry(
    deployment, fake_model
):
    import psycopg

    fake_model.queue(Reply(deltas=[f"k{i} " for i in range(300)], delay=0.03))
    session, client, headers = deployment.send("kill my worker")
    deployment.wait_streaming(client, session)
    with psycopg.connect(deployment.pg.url) as conn:
        (worker_id,) = conn.execute(
            "SELECT worker_id FROM decks_app_run WHERE session_id = %s AND status = 'running'",
            [session],
        ).fetchone()
    pid = int(worker_id.split(":")[1])  # host:pid:thread
    name = next(n for n, p in deployment.procs.items() if p.pid == pid)
    deployment.procs[name].send_signal(signal.SIGKILL)
    deployment.procs[name].wait(timeout=10)
    started = time.monotonic()
    data = deployment.wait_status(client, session, ("interrupted",), 30)
    assert time.monotonic() - started < 15  # 3 s stale + 1 s reconcile here (90 s by default)
    said = [c for c in data["conversation"] if c["kind"] in ("user", "assistant")]
    assert said[0]["text"] == "kill my worker"
    assert said[1]["status"] == "interrupted" and said[1]["text"].startswith("k0 k1")
    assert data["retry"] is not None
    fake_model.queue(Reply(text="Done this time."))
    r = client.post(
        f"/test/{session}/retry?format=json",
        data={"runId": data["retry"]["runId"]},
        headers=headers,
    )
    assert r.status_code == 202
    data = deployment.wait_status(client, session, ("completed",), 60)
    said = [
        (c["kind"], c["text"]) for c in data["conversation"] if c["kind"] in ("user", "assistant")
    ]
    assert said == [("user", "kill my worker"), ("assistant", "Done this time.")]
    deployment.spawn(name, [WORKER, "--slots", "4"])  # back to two workers


def test_runs_complete_through_a_broker_outage_with_two_log_lines(deployment, fake_model):
    before = {n: _lines(deployment.log(n)) for n in deployment.procs}
    fake_model.queue(Reply(deltas=[f"b{i} " for i in range(200)], delay=0.03))
    session, client, _ = deployment.send("through a broker outage")
    deployment.wait_streaming(client, session)
    deployment.redis.stop()
    time.sleep(5)
    deployment.redis.start()
    data = deployment.wait_status(client, session, ("completed", "failed", "interrupted"), 60)
    assert data["status"] == "completed"
    assert (
        [c for c in data["conversation"] if c["kind"] == "assistant"][0]["text"]
        .strip()
        .endswith("b199")
    )
    for name, count in before.items():
        added = _lines(deployment.log(name)) - count
        assert added < 30, (name, deployment.log(name)[-3000:])


def test_sigterm_stops_a_worker_within_10_s_saving_what_streamed(deployment, fake_model):
    fake_model.queue(Reply(deltas=[f"t{i} " for i in range(400)], delay=0.03))
    session, client, _ = deployment.send("stop the worker")
    deployment.wait_streaming(client, session)
    import psycopg

    with psycopg.connect(deployment.pg.url) as conn:
        (worker_id,) = conn.execute(
            "SELECT worker_id FROM decks_app_run WHERE session_id = %s AND status = 'running'",
            [session],
        ).fetchone()
    pid = int(worker_id.split(":")[1])  # host:pid:thread
    proc = next(p for p in deployment.procs.values() if p.pid == pid)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    assert time.monotonic() - started < 10
    data = deployment.session(client, session)
    assert data["status"] == "interrupted"
    said = [c for c in data["conversation"] if c["kind"] in ("user", "assistant")]
    assert said[0]["text"] == "stop the worker" and said[1]["text"].startswith("t0 t1")
