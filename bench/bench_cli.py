"""Start-up cost of the `gambit` command, beside a bare `python -c pass`.

Times, as whole processes (interpreter start included), the median of `--runs` runs of:
`python -c pass`, `gambit --help`, and a one-turn `gambit run` of a small model deck against
a scripted Open Responses server on 127.0.0.1 (the same fake server the tests use), so the
figure is start-up, deck loading, one HTTP round trip and the answer, nothing remote.

    .venv/bin/python bench/bench_cli.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_model_server import FakeModelServer, Reply  # noqa: E402

DECK = """+++
label = "bench"
modelParams.model = "openresponses/bench-model"
+++
You answer in one short sentence.
"""


def timed(command: list[str], env: dict[str, str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True)
        samples.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    gambit = str(Path(sys.executable).parent / "gambit")
    with FakeModelServer() as server, tempfile.TemporaryDirectory() as folder:
        server.default_reply = Reply(text="Hello from the bench.")
        deck = Path(folder) / "PROMPT.md"
        deck.write_text(DECK)
        env = {
            **os.environ,
            "OPENRESPONSES_BASE_URL": server.base_url,
            "GAMBIT_REQUIRE_PROVIDER": "1",
        }
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("gambit --help", [gambit, "--help"]),
            ("gambit run (one turn, local server)", [gambit, "run", str(deck), "--message", "hi"]),
        ]
        timed(rows[-1][1], env, 2)  # warm the file cache and .pyc files
        print(f"whole commands, median of {args.runs} runs (interpreter start included)")
        base = None
        for name, command in rows:
            median = timed(command, env, args.runs)
            base = median if base is None else base
            extra = "" if median is base else f"   (+{(median - base) * 1000:.0f} ms over python)"
            print(f"{name:<38} {median * 1000:7.0f} ms{extra}")


if __name__ == "__main__":
    main()
