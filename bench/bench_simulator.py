"""Latency from a provider's text delta to the browser's DOM, through the whole simulator.

    .venv/bin/python bench/bench_simulator.py [--sessions 1 20] [--deltas 40] [--interval 0.025]
                                              [--distributed]

The path measured: a model server writes an SSE delta -> the OpenResponses adapter -> the
engine's trace callback -> the worker's event writer (TraceEvent rows first) -> a channel-layer
notification -> the websocket consumer reads the new rows -> an htmx OOB fragment -> the text
node in Chromium's DOM.

A small model server in this process stamps every delta with the wall-clock time at which it
writes it (`T<microseconds>`). A MutationObserver in each page records, for every stamp
that appears in the DOM, `now - stamp`: the server and the browser share one clock. The
simulator itself runs as `gambit serve` in a subprocess (embedded profile, SQLite), or with
`--distributed` as `gambit serve` plus a `gambit worker` process on the machine's PostgreSQL
and Redis. For each concurrency level N, N browser tabs start N sessions and send at the
same moment. The script prints the median and the 95th percentile over every delta of every
session.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fake_model_server import Reply, _Ids, _sse_frames, render_responses  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
TMP = Path(os.environ.get("TMPDIR", "/tmp")) / f"gambit-bench-{os.getpid()}"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
]
SERVE = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"
WORKER = "import sys; from gambit.cli._serve import worker_command; worker_command(sys.argv[1:])"
OBSERVER = r"""
() => {
  window.__lat = []; const seen = new Set();
  const scan = (text) => {
    const now = (performance.timeOrigin + performance.now()) * 1000;
    for (const m of text.matchAll(/T(\d{16})/g)) {
      if (!seen.has(m[1])) { seen.add(m[1]); window.__lat.push((now - Number(m[1])) / 1000); }
    }
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === "characterData") scan(r.target.data || "");
      for (const n of r.addedNodes || []) scan(n.textContent || "");
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    deltas = 40
    interval = 0.025

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        reply = Reply(deltas=[f"@@{i}@@ " for i in range(self.deltas)])
        _, events = render_responses(reply, body, _Ids())
        frames = _sse_frames(events, named=True, reply=reply)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame, _ in frames:
            if b'"response.output_text.delta"' in frame:
                time.sleep(self.interval)
                stamp = f"T{time.time_ns() // 1000:016d}".encode()
                frame = re.sub(rb"@@\d+@@", stamp, frame)
            else:  # the done/completed events repeat the text: no stamp there
                frame = re.sub(rb"@@\d+@@", b"t", frame)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("gambit serve exited; see its log") from None
            time.sleep(0.2)
    raise SystemExit("gambit serve did not start")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_level(browser, url: str, n: int) -> list[float]:
    context = browser.new_context(bypass_csp=True)  # the bench injects its observer script
    pages = []
    for _ in range(n):
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(url + "/test")
        page.select_option("select[name=deck]", "support/PROMPT.md")
        page.fill("input[name=model]", "openresponses/bench")
        page.click("#new-session")
        page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
        page.wait_for_function("document.getElementById('cursor') !== null")
        page.evaluate(OBSERVER)
        page.fill("textarea[name=message]", "go")
        pages.append(page)
    time.sleep(0.5)  # let every socket connect
    for page in pages:
        page.click("#send")
    for page in pages:
        try:
            page.wait_for_function(
                "document.getElementById('status').textContent.trim() === 'completed'",
                timeout=float(os.environ.get("BENCH_TIMEOUT_MS", "120000")),
            )
        except Exception as exc:
            runs = page.request.get(page.url + "?format=json").json()["runs"]
            raise SystemExit(
                f"a session did not complete ({type(exc).__name__}: {str(exc)[:300]}):"
                f" {runs} (logs in {TMP})"
            ) from None
    latencies = [x for page in pages for x in page.evaluate("window.__lat")]
    context.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 20, 50])
    parser.add_argument("--deltas", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.025)
    parser.add_argument("--distributed", action="store_true")
    args = parser.parse_args()
    _Handler.deltas, _Handler.interval = args.deltas, args.interval

    model_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    model_server.daemon_threads = True
    threading.Thread(target=model_server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{model_server.server_address[1]}/v1"

    tmp = TMP
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        {
            "OPENRESPONSES_BASE_URL": base,
            "OPENRESPONSES_API_KEY": "bench",
            "GAMBIT_SIM_DB": str(tmp / "sim.sqlite3"),
            "DJANGO_SETTINGS_MODULE": "simulator.settings",
        }
    )
    procs = []
    dbname = None
    if args.distributed:
        import psycopg

        dbname = f"gambit_bench_{os.getpid()}"
        with psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{dbname}"')
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{dbname}"
        env["REDIS_URL"] = "redis://127.0.0.1:6379/6"
    port = _free_port()
    slots = str(max(args.sessions))
    serve_args = ["--port", str(port)] + ([] if args.distributed else ["--workers", slots])
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, *serve_args],
        cwd=ROOT,
        env=env,
        stdout=(tmp / "serve.log").open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    procs.append(server)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url + "/test?format=json", server)
        if args.distributed:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", WORKER, "--slots", slots],
                    cwd=ROOT,
                    env=env,
                    stdout=(tmp / "worker.log").open("w"),
                    stderr=subprocess.STDOUT,
                )
            )
        from playwright.sync_api import sync_playwright

        profile = (
            "distributed (PostgreSQL + Redis + gambit worker)"
            if args.distributed
            else "embedded (SQLite, in-process workers)"
        )
        print(
            f"profile: {profile}; {args.deltas} deltas every {args.interval * 1000:.0f} ms per session"
        )
        print(f"{'sessions':>8}  {'deltas':>7}  {'median ms':>9}  {'p95 ms':>7}  {'max ms':>7}")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for n in args.sessions:
                lat = run_level(browser, url, n)
                print(
                    f"{n:>8}  {len(lat):>7}  {statistics.median(lat):>9.1f}  "
                    f"{_percentile(lat, 0.95):>7.1f}  {max(lat):>7.1f}",
                    flush=True,
                )
            browser.close()
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        model_server.shutdown()
        if dbname:
            import psycopg

            with psycopg.connect(
                "postgres://postgres@127.0.0.1:5432/postgres", autocommit=True
            ) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


if __name__ == "__main__":
    main()
