"""Start-up cost of the `gambit` command, beside a bare `python -c pass`.

Times, as whole processes (interpreter start included), the median of `--runs` runs of:
`python -c pass`, `gambit --help`, and a one-turn `gambit run` of a small model deck against
a scripted Open Responses server on 127.0.0.1 (the same fake server the tests use), so the
figure is start-up, deck loading, one HTTP round trip and the answer, nothing remote.

A last row imports, in a bare `python` with the collector off, every module outside
`gambit` that the one-turn run imported (pydantic, httpx, httpcore, anyio, click, asyncio and
the standard library under them): the part of the run that is Python and the libraries, so
the rest is ours, printed last. Both move with the machine's speed; the difference less so.

The package's `.pyc` files are compiled first, as `pip install` does: with
PYTHONDONTWRITEBYTECODE set (some shells and CI runners set it) an editable checkout would
otherwise recompile its modules on every run.

    .venv/bin/python bench/bench_cli.py [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
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


def timed(rows: list[tuple[str, list[str]]], env: dict[str, str], runs: int) -> list[float]:
    """The median wall time of each command, the rows taken in turn (one run of each, then
    the next round), so that a slower spell of this shared machine falls on all of them."""
    samples: list[list[float]] = [[] for _ in rows]
    for _ in range(runs):
        for index, (_name, command) in enumerate(rows):
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True)
            samples[index].append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    return [statistics.median(row) for row in samples]


# Run in a child: the one-turn run in-process, then the names of every module it imported
# that is not ours, in the order they were first imported.
LIST_MODULES = """
import sys
sys.argv = ["gambit", "run", sys.argv[1], "--message", "hi"]
from gambit.cli.main import main
try:
    main()
except SystemExit:
    pass
ours = ("gambit", "__main__", "__editable__")
print("\\n" + " ".join(m for m in sys.modules if not m.startswith(ours)))
"""

# The libraries alone. httpx's CLI module gets the stand-in gambit.providers gives it.
LIBRARIES_ONLY = """
import gc
gc.disable()
import importlib, sys, types
sys.modules["httpx._main"] = types.ModuleType("httpx._main")
for name in sys.argv[1:]:
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
"""


def library_modules(deck: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES, str(deck)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"listing the run's modules failed:\n{done.stderr}")
    return [name for name in done.stdout.splitlines()[-1].split() if name != "httpx._main"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    gambit = str(Path(sys.executable).parent / "gambit")
    compileall.compile_dir(str(ROOT / "gambit"), quiet=1)
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
            (
                "  of which Python and the libraries",
                [sys.executable, "-c", LIBRARIES_ONLY, *library_modules(deck, env)],
            ),
        ]
        timed(rows, env, 2)  # warm the file cache
        print(f"whole commands, median of {args.runs} runs (interpreter start included)")
        medians = timed(rows, env, args.runs)
        base = medians[0]
        for (name, _command), median in zip(rows, medians, strict=True):
            extra = "" if median is base else f"   (+{(median - base) * 1000:.0f} ms over python)"
            print(f"{name:<38} {median * 1000:7.0f} ms{extra}")
        # The run and its floor move together with the machine's speed; their difference
        # (our modules, the deck, the round trip) is the steadier figure.
        label, own = "  the engine's part (run - floor)", (medians[2] - medians[3]) * 1000
        print(f"{label:<38} {own:7.0f} ms")


if __name__ == "__main__":
    main()
