"""Every benchmark under bench/ still runs, on a tiny workload, and prints its figures.

A benchmark talks to the simulator through its URLs and pages, so a change to them can break
it without any other test noticing (bench_load once asked for `/test/` after the sessions
list had moved to `/test`, and died on the 403 that followed). These runs check that each
script finishes and prints the line its figures are read from; they assert no timing (the
figures come from `./dev bench`, docs/benchmarks.md). The peers (inspect_ai, promptfoo, RQ)
are left out: installing them needs the network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.machine import reachable

ROOT = Path(__file__).resolve().parents[2]


DISTRIBUTED = reachable(5432) and reachable(6379)

# script, its arguments for a tiny workload, a line its figures are read from
CASES = [
    ("bench_check.py", ["--runs", "2"], r"gambit check examples \(whole command"),
    ("bench_cli.py", ["--runs", "2"], r"gambit run \(one turn, local server\)\s+\d+ ms"),
    ("bench_compute.py", ["--runs", "20"], r"sync run\(ctx\)\s+median"),
    (
        "bench_endpoint.py",
        ["--samples", "10", "--clients", "3"],
        r"3 concurrent streaming clients: 3 complete and in order",
    ),
    ("bench_engine.py", ["--runs", "10"], r"tracing on , streaming on\s+median"),
    (
        "bench_load.py",
        ["--only", "embedded", "--streams", "3", "--no-distributed"],
        r"3 concurrent streams, embedded \(SQLite\): 3/3 completed, 3/3 whole replies",
    ),
    ("bench_pages.py", ["--events", "50", "--repeat", "2"], r"session page \(HTML\)\s+median"),
    ("bench_providers.py", ["--responses", "10", "--deltas", "5"], r"openresponses/ adapter\s+\d"),
    (
        "bench_scenarios.py",
        ["--runs", "4", "--concurrency", "2", "--rounds", "1"],
        r"cli\s+wall\s+\d+\.\d+ s\s+request span",
    ),
    ("bench_simulator.py", ["--sessions", "1", "--deltas", "5"], r"\n\s+1\s+5\s+\d"),
    ("bench_tokens.py", ["--turns", "5", "--calls", "3"], r"Count error against the corpus"),
    (
        "bench_verify.py",
        ["--no-peers", "--rounds", "1", "--runs", "4"],
        r"gambit verify\s+\d+\.\d+\s+\d+\.\d+[\s\S]*httpx floor\s+\d+\.\d+\s+\d+\.\d+",
    ),
]
# These need the PostgreSQL and Redis of the distributed profile on 127.0.0.1.
NEEDS_SERVICES = [
    (
        "bench_jobs.py",
        ["--tasks", "20", "--trickle", "3", "--gap", "0.01", "--engines", "db", "--workers", "1"],
        r"django-tasks-db, db_worker\s+1\s+\d",
    ),
    (
        "bench_load.py",
        ["--only", "scale-out", "--conversations", "6", "--workers", "1", "2", "--rounds", "2"],
        r"scale-out \(round 2 of 2\): 6 conversations, 100 ms model, 2 worker\(s\) x 8 slots:"
        r" 6 completed[^\n]*transactions per run[\s\S]*medians of 2 rounds: 1 worker\(s\) \d"
        r"[^\n]*\none worker kept \d+% of its core busy: its (runs queued|slots and)",
    ),
]
if DISTRIBUTED:
    CASES += NEEDS_SERVICES


def test_every_benchmark_is_covered():
    scripts = {p.name for p in (ROOT / "bench").glob("bench_*.py")}
    assert scripts == {script for script, _, _ in CASES + NEEDS_SERVICES}


@pytest.mark.parametrize(
    ("script", "args", "figure"),
    CASES,
    ids=[f"{script}{' ' + args[1] if args[0] == '--only' else ''}" for script, args, _ in CASES],
)
def test_the_benchmark_runs_and_prints_its_figures(script, args, figure):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert re.search(figure, output), output[-3000:]
    assert "Traceback" not in output, output[-3000:]
