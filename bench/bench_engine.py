"""Engine overhead per model call: time spent outside the provider.

A zero-latency scripted provider answers instantly; the provider's own time is measured
and subtracted, so what remains is the run loop's cost per model call (request building,
tool dispatch, validation, tracing, state publication). Prints median and p95.

The last row exports every run's spans with OpenTelemetry (gambit.otel, the `otel` extra)
to an OTLP/HTTP receiver on 127.0.0.1 that answers at once: the spans are built in the run
and sent by the SDK's batching thread, whose work on this process's CPU counts too.

    .venv/bin/python bench/bench_engine.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from gambit.core import load_deck_tree, run_deck
from gambit.core._runtime import _MISSING
from gambit.providers.offline import Call, ScriptedProvider, Stream

# The front matter's model and compute action (add.py, `ADD` below); bench_pages.py's deck too.
ADD_ACTION = """modelParams.model = "bench-model"
[[actions]]
name = "add"
description = "Add one"
execute = "./add.py"
"""
DECK = f"""+++
label = "bench"
contextSchema = "./in.json"
{ADD_ACTION}+++
You add numbers. ![](gambit://snippets/context.md)
"""
ADD = """
import gambit
deck = gambit.define_deck(
    run=lambda ctx: {"total": ctx.input["n"] + 1},
    context_schema={"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
    response_schema={"type": "object", "properties": {"total": {"type": "number"}}},
)
"""


class TimedProvider(ScriptedProvider):
    """Adds up the time spent inside `responses`, so it can be subtracted."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0.0
        self.calls = 0

    async def responses(self, request, **kwargs):
        started = time.perf_counter()
        try:
            return await super().responses(request, **kwargs)
        finally:
            self.inside += time.perf_counter() - started
            self.calls += 1


async def conversation(tree, turns: int):
    """A SavedState after `turns` turns of the bench conversation (each with a tool call)."""
    state = None
    for turn in range(turns):
        provider = ScriptedProvider()
        provider.enqueue(Call("add", {"n": turn}), f"The total is {turn + 1}.")
        result = await run_deck(
            tree,
            provider=provider,
            context={"q": "x"} if state is None else _MISSING,
            message=f"add one to {turn}",
            state=state,
        )
        state = result.state
    return state


async def measure(
    tree, runs: int, *, trace: bool, stream: bool, resume=None, spans=None
) -> list[float]:
    per_call: list[float] = []
    sink: list[dict] = []

    def traced(event: dict) -> None:
        sink.append(event)
        spans(event)

    for _ in range(runs):
        provider = TimedProvider()
        provider.enqueue(
            Call("add", {"n": 1}),
            Stream(["The ", "total ", "is ", "2."]) if stream else "The total is 2.",
        )
        started = time.perf_counter()
        await run_deck(
            tree,
            provider=provider,
            context={"q": "x"} if resume is None else _MISSING,
            state=resume,
            message="add one to one",
            stream=stream,
            on_trace=(traced if spans is not None else sink.append) if trace else None,
            on_stream_text=(lambda _t: None) if stream else None,
            on_state=lambda _s: None,
        )
        total = time.perf_counter() - started
        per_call.append((total - provider.inside) / provider.calls)
        sink.clear()
    return per_call


@contextlib.contextmanager
def otlp_receiver() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that takes every request at once."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def report(name: str, samples: list[float]) -> None:
    samples = sorted(samples)
    median = statistics.median(samples) * 1e6
    p95 = samples[int(len(samples) * 0.95) - 1] * 1e6
    print(f"{name:<34} median {median:8.0f} µs   p95 {p95:8.0f} µs   per model call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "PROMPT.md").write_text(textwrap.dedent(DECK).lstrip())
        (root / "in.json").write_text('{"type":"object","properties":{"q":{"type":"string"}}}')
        (root / "add.py").write_text(textwrap.dedent(ADD))
        tree = load_deck_tree(root / "PROMPT.md")
        asyncio.run(measure(tree, 20, trace=True, stream=True))  # warm up
        print(
            f"engine overhead, {args.runs} runs of 2 model calls (one compute action, one final answer)"
        )
        for trace, stream in ((False, False), (True, False), (True, True)):
            samples = asyncio.run(measure(tree, args.runs, trace=trace, stream=stream))
            report(
                f"tracing {'on ' if trace else 'off'}, streaming {'on ' if stream else 'off'}",
                samples,
            )
        with otlp_receiver() as endpoint:
            from gambit.otel.live import Export

            export = Export({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, print)
            spans = export.sink()
            inside = [0.0]

            def timed(event: dict) -> None:
                began = time.thread_time()
                spans(event)
                inside[0] += time.thread_time() - began

            asyncio.run(measure(tree, 20, trace=True, stream=True, spans=timed))
            inside[0] = 0.0
            cpu = time.process_time()
            samples = asyncio.run(measure(tree, args.runs, trace=True, stream=True, spans=timed))
            export.close(30)
            cpu = time.process_time() - cpu
            assert export.guarded is not None and export.guarded.failures == 0
            report("tracing+stream, OpenTelemetry on", samples)
            calls = args.runs * 2
            plain = time.process_time()
            asyncio.run(measure(tree, args.runs, trace=True, stream=True))
            plain = time.process_time() - plain
            # CPU time, which a loaded machine does not inflate as it does wall-clock time.
            print(
                f"{'  OpenTelemetry CPU':<34} spans built in the run "
                f"{inside[0] / calls * 1e6:6.0f} µs, whole process (export thread too) "
                f"{(cpu - plain) / calls * 1e6:6.0f} µs per model call"
            )
        for turns in (10, 50):
            resume = asyncio.run(conversation(tree, turns))
            samples = asyncio.run(measure(tree, args.runs, trace=True, stream=True, resume=resume))
            report(f"resumed at {turns} turns, tracing+stream", samples)


if __name__ == "__main__":
    main()
