"""The CLI's export (docs/observability.md): `gambit run` with OTEL_EXPORTER_OTLP_ENDPOINT
set sends its spans to a real OTLP/HTTP receiver on 127.0.0.1; `gambit export otel FILE`
sends a recorded trace later; a collector that is down or slow leaves the run unaffected
but for one warning line. Times are measured and printed (`-s`), not asserted."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .receiver import Receiver

GAMBIT = str(Path(sys.executable).parent / "gambit")
SUPPORT = Path(__file__).parents[2] / "examples" / "support" / "PROMPT.md"
ANSWER = "order id: A1002, found: yes, status: delayed"


def base_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("OTEL_")
    }
    env["GAMBIT_DEMO_DELAY_MS"] = "0"
    return env


def gambit(*args: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    began = time.perf_counter()
    done = subprocess.run(
        [GAMBIT, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )
    return done, time.perf_counter() - began


def otel_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "OpenTelemetry" in line]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gambit_run_exports_live_and_the_recorded_trace_exports_the_same_tree(
    tmp_path: Path, receiver: Receiver
):
    env = {**base_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    trace = tmp_path / "trace.jsonl"
    args = ("run", str(SUPPORT), "--message", "where is order A1002?", "--trace", str(trace))
    done, _ = gambit(*args, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout and otel_warnings(done.stderr) == []
    live = receiver.wait_for(7)
    root = next(s for s in live if not s.parent_id)
    expected = [
        "invoke_agent support",
        "  execute_tool gambit_context",
        "  invoke_agent support",
        "    chat offline/demo",
        "    invoke_agent order_status",
        "      execute_tool order_status",
        "    chat offline/demo",
    ]
    assert receiver.tree(root) == expected
    chat = next(s for s in live if s.name == "chat offline/demo")
    assert chat.attributes["gen_ai.provider.name"] == "offline"
    assert chat.attributes["gen_ai.request.temperature"] == 0.2  # the deck's [modelParams]

    # Later, from the file, to another collector: the same tree, at the recorded times.
    later = Receiver().start()
    try:
        sent, _ = gambit(
            "export", "otel", str(trace), "--endpoint", later.endpoint, env=base_env(), cwd=tmp_path
        )
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.startswith(f"sent {len(live)} spans")
        replayed = later.wait_for(len(live))
        again = next(s for s in replayed if not s.parent_id)
        assert later.tree(again) == expected
        first_ts = int(trace.read_text().split('"ts":', 1)[1].split(",", 1)[0])
        assert again.start_ns == first_ts * 1_000_000
        assert (
            again.attributes["gen_ai.conversation.id"] == root.attributes["gen_ai.conversation.id"]
        )
    finally:
        later.stop()


def test_export_otel_says_what_is_wrong(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"type": "run.start", "runId": "r", "ts": 1}\n{"type": 3}\n')
    done, _ = gambit("export", "otel", str(trace), env=base_env(), cwd=tmp_path)
    assert done.returncode == 1
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT or pass --endpoint" in done.stderr
    url = f"http://127.0.0.1:{closed_port()}"
    done, _ = gambit("export", "otel", str(trace), "--endpoint", url, env=base_env(), cwd=tmp_path)
    assert done.returncode == 1 and f"{trace}:2: invalid event" in done.stderr
    trace.write_text('{"type": "run.start", "runId": "r", "ts": 1}\n')
    done, _ = gambit("export", "otel", str(trace), "--endpoint", url, env=base_env(), cwd=tmp_path)
    assert done.returncode == 1
    assert f"the collector at {url}/v1/traces took 0 of 1 spans" in done.stderr


def test_a_collector_that_is_down_leaves_the_run_unaffected_but_for_one_warning(
    tmp_path: Path,
):
    args = ("run", str(SUPPORT), "--message", "where is order A1002?")
    baseline, plain = gambit(*args, env=base_env(), cwd=tmp_path)
    env = {**base_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    done, down = gambit(*args, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == baseline.stdout and ANSWER in done.stdout
    [warning] = otel_warnings(done.stderr)
    assert warning.startswith("warning: OpenTelemetry export to http://127.0.0.1:")
    print(f"\ngambit run: {plain:.2f} s without an export, {down:.2f} s with the collector down")


def test_a_slow_collector_leaves_the_run_unaffected_but_for_one_warning(tmp_path: Path):
    slow = Receiver(delay=20).start()  # answers long after the command's bounded wait
    try:
        env = {**base_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": slow.endpoint}
        done, took = gambit(
            "run", str(SUPPORT), "--message", "where is order A1002?", env=env, cwd=tmp_path
        )
    finally:
        slow.stop()
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout
    [warning] = otel_warnings(done.stderr)
    assert "did not finish within 3 s" in warning or "failed" in warning
    print(f"\ngambit run with a collector that answers in 20 s: {took:.2f} s")
