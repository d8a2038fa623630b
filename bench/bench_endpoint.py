"""`/v1/responses` overhead: time to first byte over the upstream, and 50 concurrent streams.

Starts `gambit serve` on a scratch workspace (a deck answering with `offline/echo`) and a fake
Open Responses upstream (tests/support/fake_model_server.py, in a process of its own so its
threads do not compete with the measuring client for the GIL) on 127.0.0.1, then:

1. time to first byte of a streamed response, directly from the upstream and through
   `/v1/responses` proxying the same upstream (`model = "openresponses/bench"`), alternating,
   and prints the medians and p95s, the difference of the two, and the distribution of the
   time added per pair of requests made one after the other (the target is <= 10 ms at p95);
2. 50 clients streaming from a deck at once: every stream must end with `[DONE]`, its
   `sequence_number`s must run 1..n without a gap, and its deltas must join to the answer.

    .venv/bin/python bench/bench_endpoint.py [--samples 300] [--clients 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

KEY = "bench-key"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


async def _ttfb(client: httpx.AsyncClient, url: str, body: dict, headers: dict) -> float:
    started = time.perf_counter()
    async with client.stream("POST", url, json=body, headers=headers) as response:
        async for _ in response.aiter_bytes():
            return (time.perf_counter() - started) * 1000
    return float("nan")


async def _stream(client: httpx.AsyncClient, url: str, text: str) -> str | None:
    """None when the stream is complete and in order; else what went wrong."""
    events = []
    body = {"model": "deck/echo", "input": text, "stream": True}
    async with client.stream(
        "POST", url, json=body, headers={"Authorization": f"Bearer {KEY}"}
    ) as response:
        done = False
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                events.append(json.loads(line[6:]))
    if not done:
        return "no [DONE]"
    if [e["sequence_number"] for e in events] != list(range(1, len(events) + 1)):
        return "a gap in sequence_number"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    if deltas != f"You said: {text}":
        return "lost or duplicated text"
    return None


async def measure(serve_url: str, upstream_url: str, samples: int, clients: int) -> None:
    direct_body = {"model": "bench", "input": "hello", "stream": True}
    proxied_body = {"model": "openresponses/bench", "input": "hello", "stream": True}
    direct, proxied = [], []
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(5):  # warm both paths
            await _ttfb(client, upstream_url + "/responses", direct_body, {})
            await _ttfb(
                client,
                serve_url + "/v1/responses",
                proxied_body,
                {"Authorization": f"Bearer {KEY}"},
            )
        for _ in range(samples):
            direct.append(await _ttfb(client, upstream_url + "/responses", direct_body, {}))
            proxied.append(
                await _ttfb(
                    client,
                    serve_url + "/v1/responses",
                    proxied_body,
                    {"Authorization": f"Bearer {KEY}"},
                )
            )
    print(f"time to first byte, {samples} streamed requests each (ms):")
    print(
        f"  upstream directly     median {statistics.median(direct):7.2f}   p95 {_p95(direct):7.2f}"
    )
    print(
        f"  through /v1/responses median {statistics.median(proxied):7.2f}   p95 {_p95(proxied):7.2f}"
    )
    print(
        f"  difference            median {statistics.median(proxied) - statistics.median(direct):7.2f}"
        f"   p95 {_p95(proxied) - _p95(direct):7.2f}"
    )
    added = [p - d for p, d in zip(proxied, direct, strict=True)]
    print(
        f"  added, per pair       median {statistics.median(added):7.2f}"
        f"   p95 {_p95(added):7.2f}   (target: <= 10 ms at p95)"
    )
    async with httpx.AsyncClient(
        timeout=60, limits=httpx.Limits(max_connections=clients)
    ) as client:
        started = time.perf_counter()
        texts = [" ".join(f"c{c}w{w}" for w in range(40)) for c in range(clients)]
        results = await asyncio.gather(
            *(_stream(client, serve_url + "/v1/responses", t) for t in texts)
        )
        elapsed = time.perf_counter() - started
    failures = [r for r in results if r is not None]
    print(
        f"{clients} concurrent streaming clients: {clients - len(failures)} complete and in order, "
        f"{len(failures)} not ({', '.join(sorted(set(failures))) or 'none'}); {elapsed:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args()
    upstream = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "fake_model_server.py"),
            "--text",
            "hello there",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = upstream.stdout.readline() if upstream.stdout else ""
    if not line.startswith("FAKE_MODEL_SERVER_URL="):
        upstream.kill()
        raise SystemExit(f"the fake upstream did not start: {line!r}")
    upstream_url = line.strip().split("=", 1)[1] + "/v1"
    folder = Path(tempfile.mkdtemp(prefix="gambit-bench-endpoint-"))
    (folder / "decks" / "echo").mkdir(parents=True)
    (folder / "decks" / "echo" / "PROMPT.md").write_text(
        '+++\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n'
    )
    port = _port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(
        {
            "GAMBIT_API_KEYS": KEY,
            "GAMBIT_SIM_DB": str(folder / "sim.sqlite3"),
            "GAMBIT_DEMO_DELAY_MS": "0",
            "OPENRESPONSES_BASE_URL": upstream_url,
        }
    )
    code = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"
    log = (folder / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(folder / "decks"), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(url + "/test/?format=json", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        asyncio.run(measure(url, upstream_url, args.samples, args.clients))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        upstream.terminate()
        upstream.wait(timeout=10)


if __name__ == "__main__":
    main()
