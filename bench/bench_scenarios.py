"""100 scenario runs at concurrency 16 against a 100 ms model: through the CLI and through the
simulator's jobs (issue 9), each beside the model-bound limit.

    .venv/bin/python bench/bench_scenarios.py [--runs 100] [--concurrency 16] [--rounds 3]

The workload: a root deck and an LLM persona (a scenario deck). Each run is one persona
message and one answer (`--max-turns 1`): two model calls one after the other, so the
model-bound limit is runs x 2 x 0.1 s / concurrency (1.25 s for 100 runs at 16). A fake
model server on 127.0.0.1 (tests/support/fake_model_server.py) answers every request after
100 ms and notes when the first request came in and the last answer went out: that request
span, divided by the limit, is what the engine and the job machinery add.

1. CLI: `gambit scenario ROOT --scenario PERSONA --runs N --concurrency C --max-turns 1`.
2. Simulator: `gambit serve` (embedded profile: SQLite, the in-process task backend), one
   POST to `/test/scenario` with `runs=N` and `concurrency=C` (a batch), then the batch page's
   JSON twin polled until every run finished.

Rounds alternate the two paths; medians are printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_model_server import Reply, TimedModelServer  # noqa: E402

LATENCY = 0.1
GAMBIT = str(Path(sys.executable).parent / "gambit")


class BenchModel(TimedModelServer):
    """Answers every request after LATENCY seconds: the persona asks, the bot answers."""

    def __init__(self) -> None:
        super().__init__(LATENCY)

    def answer(self, request):
        persona = "synthetic scenario participant" in json.dumps(request.body)
        text = "Where is my order A1002?" if persona else "It ships tomorrow."
        return Reply(text=text, delay_before=LATENCY)


def write_dedented(folder: Path, rel: str, text: str) -> None:
    """Write `text` (an indented triple-quoted block) to `folder/rel`, making its folders;
    bench_verify.py writes its workload with it too."""
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def workspace(folder: Path) -> Path:
    write = functools.partial(write_dedented, folder)
    write(
        "bot/PROMPT.md",
        """
        +++
        label = "Bench bot"
        startMode = "user"
        modelParams.model = "openresponses/bench"
        [[scenarios]]
        path = "./scenarios/asker/PROMPT.md"
        label = "Asker"
        +++
        Answer the customer.
        """,
    )
    write(
        "bot/scenarios/asker/PROMPT.md",
        """
        +++
        label = "Asker"
        contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
        responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
        modelParams.model = "openresponses/bench"
        +++
        You are a customer asking about an order.

        ![](gambit://snippets/scenario-participant.md)
        """,
    )
    return folder / "bot" / "PROMPT.md"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_round(model: BenchModel, root: Path, runs: int, concurrency: int, env: dict) -> tuple:
    model.reset_counts()
    started = time.perf_counter()
    done = subprocess.run(
        [
            GAMBIT, "scenario", str(root), "--scenario", str(root.parent / "scenarios/asker/PROMPT.md"),
            "--runs", str(runs), "--concurrency", str(concurrency), "--max-turns", "1",
        ],
        capture_output=True, text=True, env=env, cwd=root.parent.parent,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"gambit scenario failed:\n{done.stderr[-2000:]}")
    return wall, model.span() or 0.0, model.calls


class Simulator:
    def __init__(self, folder: Path, env: dict) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (folder / "serve.log").open("w")
        env = {**env, "GAMBIT_SIM_DB": str(folder / "sim" / "bench.sqlite3")}
        for name in ("DATABASE_URL", "REDIS_URL"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [GAMBIT, "serve", str(folder), "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        deadline = time.monotonic() + 60
        while True:
            try:
                self.opener.open(self.url + "/test", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("gambit serve did not start; see serve.log") from None
                time.sleep(0.2)
        self.csrf = next(c.value for c in jar if c.name == "csrftoken")

    def batch(self, runs: int, concurrency: int) -> float:
        form = urllib.parse.urlencode(
            {
                "scenario": "bot/PROMPT.md|bot/scenarios/asker/PROMPT.md",
                "runs": runs,
                "concurrency": concurrency,
                "maxTurns": 1,
            }
        ).encode()
        request = urllib.request.Request(
            self.url + "/test/scenario?format=json",
            data=form,
            headers={"X-CSRFToken": self.csrf, "Origin": self.url},
        )
        started = time.perf_counter()
        batch = json.loads(self.opener.open(request, timeout=30).read())["batch"]
        while True:
            data = json.loads(
                self.opener.open(f"{self.url}/grade/verify/{batch}?format=json", timeout=30).read()
            )
            if data.get("status") in ("completed", "failed", "canceled"):
                break
            time.sleep(0.05)
        if data["status"] != "completed":
            raise SystemExit(f"the batch ended {data['status']}: {data.get('error')}")
        return time.perf_counter() - started

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    limit = args.runs * 2 * LATENCY / args.concurrency
    with BenchModel() as model, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = workspace(folder)
        env = {**os.environ, **model.env()}
        env.pop("GAMBIT_DEMO_DELAY_MS", None)
        sim = Simulator(folder, env)
        results: dict[str, list[tuple[float, float, int]]] = {"cli": [], "simulator": []}
        try:
            for _ in range(args.rounds):
                results["cli"].append(cli_round(model, root, args.runs, args.concurrency, env))
                model.reset_counts()
                wall = sim.batch(args.runs, args.concurrency)
                results["simulator"].append((wall, model.span() or 0.0, model.calls))
        finally:
            sim.stop()
    print(
        f"{args.runs} scenario runs (one persona message and one answer each) at concurrency"
        f" {args.concurrency}, {LATENCY * 1000:.0f} ms model: model-bound limit {limit:.2f} s;"
        f" medians of {args.rounds} rounds"
    )
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        span = statistics.median(r[1] for r in rows)
        calls = rows[-1][2]
        print(
            f"  {name:<10} wall {wall:6.2f} s   request span {span:5.2f} s"
            f" = {span / limit:4.2f}x the limit   ({calls} model calls)"
        )


if __name__ == "__main__":
    main()
