"""Adapter overhead per streamed response and per delta, against the local fake server.

    .venv/bin/python bench/bench_providers.py [--responses 500] [--deltas 50]

For each path it streams N responses of D text deltas and reports the median and p95 time
per response. The baseline reads the same SSE bytes with a bare `httpx.AsyncClient` (no
parsing); the adapter overhead is adapter minus baseline (median minus median, p95 minus
p95), per response and divided by D per delta. The paths are timed round-robin so that
drift on a shared machine hits them alike. A second table feeds recorded stream bytes
through `httpx.MockTransport` (no sockets), which isolates the adapter's own CPU cost (SSE
decoding, JSON, aggregation, the event callback); it is timed in process CPU time, so
other processes on a busy machine do not inflate its p95. The default run takes about 15 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from gambit.core._openresponses import CreateResponseRequest, message_item  # noqa: E402
from gambit.core._state import new_state  # noqa: E402
from gambit.providers import (  # noqa: E402
    OpenAIResponsesProvider,
    OpenResponsesProvider,
    RetryPolicy,
)
from gambit.providers.openresponses import forget_chat_only_base_urls  # noqa: E402
from tests.support.fake_model_server import (  # noqa: E402
    FakeModelServer,
    Reply,
    _Ids,
    _sse_frames,
    render_chat,
    render_responses,
)

NO_RETRY = RetryPolicy(max_retries=0)


def _stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


async def _timed(n: int, call: Callable[[], Awaitable[object]], warmup: int = 10) -> list[float]:
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def _interleaved(
    n: int,
    calls: dict[str, Callable[[], Awaitable[object]]],
    warmup: int = 10,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Time each call `n` times, round-robin, so drift on a shared machine hits all alike."""
    for _ in range(warmup):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = clock()
            await call()
            samples[name].append(clock() - start)
    return samples


def _request(stream: bool = True) -> CreateResponseRequest:
    return CreateResponseRequest(
        model="m", input=[message_item("system", "s"), message_item("user", "hi")], stream=stream
    )


def _reply(deltas: int) -> Reply:
    return Reply(deltas=[f"tok{i} " for i in range(deltas)])


def _adapter_calls(
    base_url: str, client: httpx.AsyncClient
) -> tuple[OpenResponsesProvider, Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """The openresponses/ adapter, and one streamed call through it and through openai-api/
    (with a state, so its chaining record is written), on `client`."""
    events: list[dict] = []
    adapter = OpenResponsesProvider(base_url=base_url, client=client, retry=NO_RETRY)
    openai = OpenAIResponsesProvider(base_url=base_url, api_key="k", client=client, retry=NO_RETRY)
    state = new_state()

    async def via_adapter() -> None:
        events.clear()
        await adapter.responses(_request(), on_stream_event=events.append)

    async def via_openai() -> None:
        events.clear()
        await openai.responses(_request(), state=state, on_stream_event=events.append)

    return adapter, via_adapter, via_openai


async def over_tcp(n: int, deltas: int) -> dict[str, list[float]]:
    """Responses paths interleaved with their raw baseline, then the chat paths likewise."""
    with FakeModelServer() as server:
        server.default_reply = _reply(deltas)
        body = _request().to_dict() | {"model": "m", "stream": True}
        chat_body = {"model": "m", "messages": [], "stream": True}
        async with httpx.AsyncClient() as client:

            async def read(url: str, payload: dict) -> None:
                async with client.stream("POST", url, json=payload) as r:
                    async for _ in r.aiter_bytes():
                        pass

            _, via_adapter, via_openai = _adapter_calls(server.base_url, client)
            results = await _interleaved(
                n,
                {
                    BASE_TCP: lambda: read(server.base_url + "/responses", body),
                    "openresponses/ (Responses SSE)": via_adapter,
                    "openai-api/ (+ chaining record, cost)": via_openai,
                },
            )
            server.responses_enabled = False
            forget_chat_only_base_urls()
            await via_adapter()  # one 404, then chat is remembered for the process
            results |= await _interleaved(
                n,
                {
                    BASE_TCP_CHAT: lambda: read(server.base_url + "/chat/completions", chat_body),
                    "chat fallback (chunks -> events)": via_adapter,
                },
            )
    return results


def _recorded(deltas: int, api: str) -> bytes:
    reply = _reply(deltas)
    if api == "responses":
        _, events = render_responses(reply, {"model": "m"}, _Ids())
    else:
        _, events = render_chat(reply, {"model": "m"}, _Ids())
    return b"".join(f for f, _ in _sse_frames(events, named=api == "responses", reply=reply))


async def in_process(n: int, deltas: int) -> dict[str, list[float]]:
    payload = {"responses": _recorded(deltas, "responses"), "chat": _recorded(deltas, "chat")}

    def handler(request: httpx.Request) -> httpx.Response:
        api = "responses" if request.url.path.endswith("/responses") else "chat"
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=payload[api]
        )

    transport = httpx.MockTransport(handler)
    async with httpx.AsyncClient(transport=transport) as client:

        async def read(url: str) -> None:
            async with client.stream("POST", url, json={}) as r:
                async for _ in r.aiter_bytes():
                    pass

        adapter, via_adapter, via_openai = _adapter_calls("http://fake/v1", client)
        events: list[dict] = []

        async def via_chat() -> None:
            events.clear()
            await adapter._call_chat(adapter.chat_body(_request(), "m"), on_event=events.append)

        return await _interleaved(
            n,
            {
                BASE_MEM: lambda: read("http://fake/v1/responses"),
                "openresponses/ adapter": via_adapter,
                "openai-api/ adapter": via_openai,
                BASE_MEM_CHAT: lambda: read("http://fake/v1/chat/completions"),
                "chat fallback adapter": via_chat,
            },
            # CPU time of this process: a preemption by another process (a 4 ms tick on a
            # busy machine) does not count, so the p95 is the adapter's, not the machine's.
            clock=time.process_time,
        )


BASE_TCP = "baseline: raw httpx, Responses bytes"
BASE_TCP_CHAT = "baseline: raw httpx, chat bytes"
BASE_MEM = "baseline: MockTransport, Responses bytes"
BASE_MEM_CHAT = "baseline: MockTransport, chat bytes"


def _report(
    title: str, results: dict[str, list[float]], deltas: int, baselines: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """Print one table; return {path: (overhead median s, overhead p95 s)} per response.

    Overhead = the path's median (or p95) minus its baseline's median (or p95).
    """
    print(f"\n{title}")
    head = f"{'path':42} {'median':>8} {'p95':>8} {'overhead':>9} {'overhead':>9} {'per delta':>10} {'per delta':>10}"
    print(head)
    print(
        f"{'':42} {'ms':>8} {'ms':>8} {'median ms':>9} {'p95 ms':>9} {'median us':>10} {'p95 us':>10}"
    )
    overheads: dict[str, tuple[float, float]] = {}
    for name, samples in results.items():
        med, p95 = _stats(samples)
        base = baselines.get(name)
        if base is None:
            print(f"{name:42} {med * 1e3:8.3f} {p95 * 1e3:8.3f}")
            continue
        base_med, base_p95 = _stats(results[base])
        over_med, over_p95 = med - base_med, p95 - base_p95
        overheads[name] = (over_med, over_p95)
        print(
            f"{name:42} {med * 1e3:8.3f} {p95 * 1e3:8.3f} {over_med * 1e3:9.3f} "
            f"{over_p95 * 1e3:9.3f} {over_med / deltas * 1e6:10.1f} {over_p95 / deltas * 1e6:10.1f}"
        )
    return overheads


def large_event(megabytes: int = 4, chunk: int = 1024) -> float:
    """Seconds to decode one event of `megabytes` MB arriving in `chunk`-byte pieces."""
    from gambit.providers._http import SSEDecoder

    data = b"event: big\ndata: " + b"x" * (megabytes << 20) + b"\n\n"
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    best = float("inf")
    for _ in range(3):
        decoder = SSEDecoder()
        started = time.perf_counter()
        events = [e for piece in pieces for e in decoder.feed(piece)]
        best = min(best, time.perf_counter() - started)
        assert len(events) == 1 and len(events[0].data) == megabytes << 20
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=500)
    parser.add_argument("--deltas", type=int, default=50)
    args = parser.parse_args()
    n, d = args.responses, args.deltas
    started = time.perf_counter()
    print(f"{n} streamed responses x {d} text deltas each, paths interleaved round-robin")
    print(f"(Python {sys.version.split()[0]}; overhead = path minus its raw-bytes baseline)")
    tcp = asyncio.run(over_tcp(n, d))
    tcp_over = _report(
        "Over TCP to the fake server on 127.0.0.1 (threaded http.server):",
        tcp,
        d,
        {
            "openresponses/ (Responses SSE)": BASE_TCP,
            "openai-api/ (+ chaining record, cost)": BASE_TCP,
            "chat fallback (chunks -> events)": BASE_TCP_CHAT,
        },
    )
    mem = asyncio.run(in_process(n, d))
    mem_over = _report(
        "In process (httpx.MockTransport, recorded bytes; process CPU time: the adapter's own cost):",
        mem,
        d,
        {
            "openresponses/ adapter": BASE_MEM,
            "openai-api/ adapter": BASE_MEM,
            "chat fallback adapter": BASE_MEM_CHAT,
        },
    )
    tcp_med, tcp_p95 = tcp_over["openresponses/ (Responses SSE)"]
    cpu_med, cpu_p95 = mem_over["openresponses/ adapter"]
    print("\nSummary (openresponses/ adapter, Responses SSE):")
    print(
        f"  over TCP:   {tcp_med * 1e3:.2f} ms per streamed response (p95 {tcp_p95 * 1e3:.2f} ms), "
        f"{tcp_med / d * 1e6:.1f} us per delta (p95 {tcp_p95 / d * 1e6:.1f} us)"
    )
    print(
        f"  CPU only:   {cpu_med * 1e3:.2f} ms per streamed response (p95 {cpu_p95 * 1e3:.2f} ms), "
        f"{cpu_med / d * 1e6:.1f} us per delta (p95 {cpu_p95 / d * 1e6:.1f} us)"
    )
    print(f"  SSE decoder: one 4 MB event in 1 KiB chunks decodes in {large_event() * 1e3:.0f} ms")
    print(f"  (benchmark took {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
