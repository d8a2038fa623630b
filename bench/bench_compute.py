"""The cost of calling a compute deck's `run(ctx)`: a root compute deck that returns at once,
run through `run_deck`, sync and async, tracing on. What is measured is the engine's part of
a compute call (context, the thread the deck code runs in, validation, the trace).

    .venv/bin/python bench/bench_compute.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gambit.core import load_deck_tree, run_deck
from gambit.providers.offline import ScriptedProvider

SYNC = """
import gambit
def run(ctx):
    return {"total": ctx.input["n"] + 1}
deck = gambit.define_deck(
    run=run,
    context_schema={"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
    response_schema={"type": "object", "properties": {"total": {"type": "number"}}},
)
"""
ASYNC = SYNC.replace("def run(ctx)", "async def run(ctx)")


async def measure(tree, runs: int) -> list[float]:
    samples: list[float] = []
    sink: list[dict] = []
    provider = ScriptedProvider()
    for _ in range(runs):
        started = time.perf_counter()
        await run_deck(tree, provider=provider, context={"n": 1}, on_trace=sink.append)
        samples.append(time.perf_counter() - started)
        sink.clear()
    return samples


def report(name: str, samples: list[float]) -> None:
    samples = sorted(samples)
    median = statistics.median(samples) * 1e6
    p95 = samples[int(len(samples) * 0.95) - 1] * 1e6
    print(f"{name:<22} median {median:7.0f} µs   p95 {p95:7.0f} µs   per run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "sync.py").write_text(SYNC)
        (root / "async.py").write_text(ASYNC)
        trees = {name: load_deck_tree(root / f"{name}.py") for name in ("sync", "async")}
        for tree in trees.values():
            asyncio.run(measure(tree, 50))  # warm up
        print(f"a root compute deck run through run_deck, {args.runs} runs, tracing on")
        for name, tree in trees.items():
            report(f"{name} run(ctx)", asyncio.run(measure(tree, args.runs)))


if __name__ == "__main__":
    main()
