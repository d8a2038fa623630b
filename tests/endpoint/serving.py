"""A real `gambit serve` on 127.0.0.1 for the endpoint tests, and a raw SSE reader."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-0123456789"
SERVE = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def serve(folder: Path, *extra: str, env_extra: dict | None = None):
    port = free_port()
    log = (folder / "serve.log").open("w")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(
        {
            "GAMBIT_API_KEYS": KEY,
            "GAMBIT_SIM_DB": str(folder / "sim.sqlite3"),
            "GAMBIT_DEMO_DELAY_MS": "30",
            **(env_extra or {}),
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(folder / "decks"), "--port", str(port), *extra],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/test/?format=json", timeout=1).read()
            return proc, url, log
        except OSError:
            if proc.poll() is not None:
                pytest.fail((folder / "serve.log").read_text())
            time.sleep(0.2)
    proc.kill()
    pytest.fail("gambit serve did not start:\n" + (folder / "serve.log").read_text())


def read_sse(server: str, body: dict) -> list[tuple[str | None, str]]:
    """(event name, data) pairs of a streamed response, read raw."""
    frames = []
    with httpx.stream(
        "POST",
        server + "/v1/responses",
        json={**body, "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                frames.append((event, line[len("data: ") :]))
                event = None
    return frames
