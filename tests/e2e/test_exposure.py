"""Exposure: the Content-Security-Policy holds in Chromium (no violation while chatting and
editing), and `gambit serve --host 0.0.0.0` needs its access token, checks host names and
says what it exposes."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest
from playwright.sync_api import expect

from .conftest import ROOT, SERVE, _free_port, stop


def test_no_csp_violation_while_chatting_building_and_grading(page, live_url):
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    response = page.goto(live_url + "/test")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    page.fill("textarea[name=message]", "under a CSP")
    page.keyboard.press("Enter")
    # (expect, not wait_for_function: Playwright's string polling needs eval, which the CSP
    # refuses, as it should)
    expect(page.locator("#status")).to_have_text("completed", timeout=15_000)
    page.goto(live_url + "/build/file?path=support/PROMPT.md&deck=support/PROMPT.md")
    expect(page.locator(".CodeMirror")).to_be_visible()
    page.goto(live_url + "/grade/verify")
    assert problems == []


def _serve_exposed(tmp_path, *extra: str) -> tuple[subprocess.Popen, int, str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["GAMBIT_SIM_DB"] = str(tmp_path / "sim.sqlite3")
    env.pop("GAMBIT_ACCESS_TOKEN", None)
    log_path = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, "--host", "0.0.0.0", "--port", str(port), *extra],
        cwd=ROOT, env=env, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while "?token=" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            pytest.fail("gambit serve --host 0.0.0.0 did not start:\n" + log_path.read_text())
        time.sleep(0.2)
    time.sleep(1)
    return proc, port, log_path.read_text()


def test_a_non_loopback_server_needs_its_token_and_checks_host_names(tmp_path):
    proc, port, banner = _serve_exposed(tmp_path, "--allowed-host", "gambit.test")
    try:
        assert "EXPOSED: listening on 0.0.0.0" in banner
        token = re.search(r"\?token=([\w-]+)", banner).group(1)
        names = banner.split("accepted host names:")[1].split("(add")[0]
        assert "gambit.test" in names and "*" not in names
        base = f"http://127.0.0.1:{port}"
        # Without the token: refused, whatever the page.
        for path in ("/", "/test", "/test.json", "/build", "/grade"):
            r = httpx.get(base + path)
            assert r.status_code == 401 and "access token" in r.text, path
        assert httpx.get(base + "/?token=wrong").status_code == 401
        # The link from the banner sets the cookie, then everything opens.
        client = httpx.Client(base_url=base, follow_redirects=False)
        r = client.get(f"/test?token={token}")
        assert r.status_code == 302 and r.headers["location"] == "/test"
        assert "httponly" in r.headers["set-cookie"].lower()
        assert client.get("/test").status_code == 200
        # Host names are checked (no wildcard: a rebinding DNS name is refused).
        assert client.get("/test", headers={"Host": "evil.example"}).status_code == 400
        assert client.get("/test", headers={"Host": f"gambit.test:{port}"}).status_code == 200
        # /v1/* keeps its API keys, not the token.
        assert httpx.get(base + "/v1/models").status_code == 401
        assert "error" in httpx.get(base + "/v1/models").json()
        # Static files are served with nosniff; the admin is hidden until a user exists.
        r = client.get("/static/decks_app/app.css")
        assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"
        assert client.get("/admin/").status_code == 404
    finally:
        stop(proc)


def _ws_handshake(port: int, origin: str, cookie: str = "") -> str:
    """The status line of a websocket handshake to a session socket (raw, like a browser)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        request = (
            f"GET /ws/build/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
            + (f"Cookie: {cookie}\r\n" if cookie else "")
            + "\r\n"
        )
        s.sendall(request.encode())
        return s.recv(4096).split(b"\r\n")[0].decode()


def test_websockets_need_the_same_origin_with_its_port_and_the_token(tmp_path):
    proc, port, banner = _serve_exposed(tmp_path)
    try:
        token = re.search(r"\?token=([\w-]+)", banner).group(1)
        same = f"http://127.0.0.1:{port}"
        assert " 101 " in _ws_handshake(port, same, f"gambit_token={token}")
        assert " 403 " in _ws_handshake(port, same)  # no token
        other_port = f"http://127.0.0.1:{port + 1}"  # another local app
        assert " 403 " in _ws_handshake(port, other_port, f"gambit_token={token}")
        assert " 403 " in _ws_handshake(port, "http://evil.example", f"gambit_token={token}")
    finally:
        stop(proc)
