"""Browser tests: `gambit serve` in a subprocess, a slow fake model server, system Chromium."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_model_server import FakeModelServer, Reply

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ROOT = Path(__file__).resolve().parents[2]
SERVE = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_simulator(
    env: dict[str, str], port: int, log, *, timeout: float = 30.0, args: tuple[str, ...] = ()
) -> subprocess.Popen:
    """Start `gambit serve` on `port` and wait until it answers; fail with its log if it cannot."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, *args, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/test?format=json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                pytest.fail(
                    f"gambit serve exited with {proc.returncode}:\n" + Path(log.name).read_text()
                )
            time.sleep(0.2)
    proc.kill()
    pytest.fail(
        f"gambit serve did not start within {timeout:.0f} s:\n" + Path(log.name).read_text()
    )


@contextlib.contextmanager
def examples_site(folder: Path, *, timeout: float = 30.0) -> Iterator[str]:
    """`gambit serve` on a copy of the bundled examples with the offline demo model (no API
    key, no delay) and a database of its own in `folder`; yields its base URL."""
    workspace = folder / "ws"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns(".gambit"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update({"GAMBIT_SIM_DB": str(folder / "sim.sqlite3"), "GAMBIT_DEMO_DELAY_MS": "0"})
    port = _free_port()
    with (folder / "serve.log").open("w") as log:
        proc = serve_simulator(env, port, log, timeout=timeout, args=(str(workspace),))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)


def stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _sixty_tokens() -> Reply:
    return Reply(deltas=[f"tok{i} " for i in range(60)], delay=0.04)


@pytest.fixture(scope="session")
def fake_model():
    server = FakeModelServer().start()
    server.default_reply = _sixty_tokens()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fake_model_as_started(request):
    """Each test finds the shared fake model as the session started it: no replies queued by
    an earlier test (a leftover queue answered the next file's chat), the sixty-token default."""
    if "fake_model" in request.fixturenames or "live_url" in request.fixturenames:
        server = request.getfixturevalue("fake_model")
        server.reset()
        server.default_reply = _sixty_tokens()


@pytest.fixture(scope="session")
def live_url(fake_model, tmp_path_factory):
    port = _free_port()
    folder = tmp_path_factory.mktemp("sim")
    db = folder / "sim.sqlite3"
    log_path = folder / "serve.log"
    log = log_path.open("w")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(fake_model.env())
    env.update({"GAMBIT_SIM_DB": str(db), "DJANGO_SETTINGS_MODULE": "simulator.settings"})
    proc = serve_simulator(env, port, log)
    yield f"http://127.0.0.1:{port}"
    stop(proc)
    log.close()


@pytest.fixture(scope="module")
def browser():
    # Module scope: Playwright's sync API keeps an event loop running in this thread while
    # it is started, which would break the asyncio tests collected after tests/e2e.
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (./dev test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


# The served examples with data made through the UI (a session, a rating, a replay, a grade,
# a Verify batch, a rated queue item): the pages the accessibility, design and responsive
# suites visit. Module-scoped: each suite gets its own server.
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with examples_site(tmp_path_factory.mktemp("a11y")) as url:
        yield url


@pytest.fixture(scope="module")
def pages(site, browser):
    """Visit the flows once (a session, a rating, a grade, a Verify batch) and list the pages."""
    from playwright.sync_api import expect  # as `browser` does: loaded by the browser suites only

    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(site + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    session = page.url
    page.fill("#composer textarea[name=message]", "Where is order A1002?")
    page.click("#send")
    expect(page.locator("#status")).to_have_text("completed")
    page.locator("#conversation .feedback button[data-score='2']").first.click()
    session_id = session.rstrip("/").split("/")[-1]
    page.click("#rerun")  # a replay of it, for the compare page
    # the replay's own page (the page is on a session URL already: wait for another one)
    page.wait_for_url(
        lambda url: (
            re.search(r"/test/session-[0-9a-f]{24}$", url) is not None
            and not url.rstrip("/").endswith(session_id)
        )
    )
    expect(page.locator("#status")).to_have_text("completed")
    compare = page.url + "/compare"
    page.goto(f"{site}/grade?session={session_id}")
    page.click("#run-grader")
    page.wait_for_url(re.compile(r".*/grade/runs/run-[0-9a-f]{24}$"))
    expect(page.locator("#grade-result [data-status]")).to_have_text("completed")
    grade_run = page.url
    page.goto(site + "/grade/verify")
    page.fill("input[name=runs]", "1")
    page.fill("input[name=repeats]", "1")
    page.fill("input[name=maxTurns]", "1")
    page.click("#run-verify")
    page.wait_for_url(re.compile(r".*/grade/verify/run-[0-9a-f]{24}$"))
    expect(page.locator("#verify-batch [data-status]")).to_have_text("completed", timeout=60_000)
    batch = page.url
    # the rating queue, as the rater "axe": rate its first item (the rated view shows the
    # graders' reasons); the queue page then opens on the next one
    context.add_cookies([{"name": "gambit_rater", "value": "axe", "url": site}])
    first = page.request.get(site + "/grade/rate.json").json()["queue"][0]
    page.goto(site + first["url"])
    page.locator("#rate-form button[name=score][value='1']").click()
    expect(page.locator("#rate-item")).to_have_attribute("data-rated", "true")
    context.close()
    return {
        "test tab": "/test",
        "session": session.removeprefix(site),
        "trace": session.removeprefix(site) + "/trace",
        "replay": session.removeprefix(site) + "/replay",
        "build tab": "/build",
        "deck": "/build/deck?path=support/PROMPT.md",
        "editor": "/build/file?path=support/PROMPT.md&deck=support/PROMPT.md",
        "grade tab": f"/grade?session={session_id}",
        "grade run": grade_run.removeprefix(site),
        "calibration": "/grade/calibration",
        "verify": "/grade/verify",
        "verify batch": batch.removeprefix(site),
        "not found": "/test/session-000000000000000000000000",
        "compare": compare.removeprefix(site),
        "rate": "/grade/rate",
        "rate item rated": first["url"],
        "rate without a name": "/grade/rate",
    }


# A scratch copy of the examples for the Build tab's suites (they create, break and save
# decks), with the demo model answering at once.
@pytest.fixture(scope="module")
def build_url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("build-sim")
    workspace = folder / "ws"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns(".gambit"))
    log = (folder / "serve.log").open("w")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update({"GAMBIT_SIM_DB": str(folder / "sim.sqlite3"), "GAMBIT_DEMO_DELAY_MS": "0"})
    port = _free_port()
    code = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(workspace), "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(url + "/build.json", timeout=1).read()
            break
        except OSError:
            time.sleep(0.2)
    yield url, workspace
    stop(proc)
    log.close()
