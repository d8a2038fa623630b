"""Adapter overhead per streamed response and per delta, against the local fake server.

    .venv/bin/python bench/bench_providers.py [--responses 200] [--deltas 50]

For each path it streams N responses of D text deltas and reports the median and p95 time
per response. The baseline reads the same SSE bytes with a bare `httpx.AsyncClient` (no
parsing); the adapter overhead is adapter minus baseline. A second table feeds recorded
stream bytes through `httpx.MockTransport` (no sockets), which isolates the adapter's own
CPU cost (SSE decoding, JSON, aggregation, the event callback).
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


def _request(stream: bool = True) -> CreateResponseRequest:
    return CreateResponseRequest(
        model="m", input=[message_item("system", "s"), message_item("user", "hi")], stream=stream
    )


def _reply(deltas: int) -> Reply:
    return Reply(deltas=[f"tok{i} " for i in range(deltas)])


async def over_tcp(n: int, deltas: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    with FakeModelServer() as server:
        server.default_reply = _reply(deltas)
        body = _request().to_dict() | {"model": "m", "stream": True}

        async with httpx.AsyncClient() as client:

            async def raw() -> None:
                async with client.stream("POST", server.base_url + "/responses", json=body) as r:
                    async for _ in r.aiter_bytes():
                        pass

            results["baseline: raw httpx, bytes only"] = await _timed(n, raw)

            events: list[dict] = []
            adapter = OpenResponsesProvider(base_url=server.base_url, client=client, retry=NO_RETRY)

            async def via_adapter() -> None:
                events.clear()
                await adapter.responses(_request(), on_stream_event=events.append)

            results["openresponses/ (Responses SSE)"] = await _timed(n, via_adapter)

            openai = OpenAIResponsesProvider(
                base_url=server.base_url, api_key="k", client=client, retry=NO_RETRY
            )
            state = new_state()

            async def via_openai() -> None:
                await openai.responses(_request(), state=state, on_stream_event=events.append)

            results["openai-api/ (+ chaining record, cost)"] = await _timed(n, via_openai)

            server.responses_enabled = False
            forget_chat_only_base_urls()
            chat_body = {"model": "m", "messages": [], "stream": True}

            async def raw_chat() -> None:
                async with client.stream(
                    "POST", server.base_url + "/chat/completions", json=chat_body
                ) as r:
                    async for _ in r.aiter_bytes():
                        pass

            results["baseline: raw httpx, chat bytes"] = await _timed(n, raw_chat)
            results["chat fallback (chunks -> events)"] = await _timed(n, via_adapter)
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

    results: dict[str, list[float]] = {}
    transport = httpx.MockTransport(handler)
    async with httpx.AsyncClient(transport=transport) as client:

        async def raw() -> None:
            async with client.stream("POST", "http://fake/v1/responses", json={}) as r:
                async for _ in r.aiter_bytes():
                    pass

        results["baseline: MockTransport bytes"] = await _timed(n, raw)
        adapter = OpenResponsesProvider(base_url="http://fake/v1", client=client, retry=NO_RETRY)
        events: list[dict] = []

        async def via_adapter() -> None:
            events.clear()
            await adapter.responses(_request(), on_stream_event=events.append)

        results["openresponses/ adapter"] = await _timed(n, via_adapter)
    return results


def _report(title: str, results: dict[str, list[float]], deltas: int, baseline_keys: dict) -> None:
    print(f"\n{title}")
    print(f"{'path':40} {'median ms':>10} {'p95 ms':>9} {'overhead ms':>12} {'us/delta':>9}")
    for name, samples in results.items():
        med, p95 = _stats(samples)
        base = baseline_keys.get(name)
        if base is None:
            print(f"{name:40} {med * 1e3:10.3f} {p95 * 1e3:9.3f}")
            continue
        base_med, _ = _stats(results[base])
        over = med - base_med
        print(
            f"{name:40} {med * 1e3:10.3f} {p95 * 1e3:9.3f} {over * 1e3:12.3f} "
            f"{over / deltas * 1e6:9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=200)
    parser.add_argument("--deltas", type=int, default=50)
    args = parser.parse_args()
    n, d = args.responses, args.deltas
    print(f"{n} streamed responses x {d} text deltas each (Python {sys.version.split()[0]})")
    tcp = asyncio.run(over_tcp(n, d))
    _report(
        "Over TCP to the fake server on 127.0.0.1 (threaded http.server, TCP_NODELAY):",
        tcp,
        d,
        {
            "openresponses/ (Responses SSE)": "baseline: raw httpx, bytes only",
            "openai-api/ (+ chaining record, cost)": "baseline: raw httpx, bytes only",
            "chat fallback (chunks -> events)": "baseline: raw httpx, chat bytes",
        },
    )
    mem = asyncio.run(in_process(n, d))
    _report(
        "In process (httpx.MockTransport, recorded bytes; the adapter's own CPU cost):",
        mem,
        d,
        {"openresponses/ adapter": "baseline: MockTransport bytes"},
    )


if __name__ == "__main__":
    main()
