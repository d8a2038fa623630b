"""axe-core (vendored from npm under tests/support/vendor, injected into the page; no CDN) on
every page of the simulator: no serious or critical violation. The data the pages show is
made through the UI with the offline demo model."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ROOT, _free_port, stop

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe.min.js"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("a11y")
    workspace = folder / "ws"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns(".gambit"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update({"GAMBIT_SIM_DB": str(folder / "sim.sqlite3"), "GAMBIT_DEMO_DELAY_MS": "0"})
    port = _free_port()
    code = "import sys; from gambit.cli._serve import serve_command; serve_command(sys.argv[1:])"
    log = (folder / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(workspace), "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(url + "/test.json", timeout=1).read()
            break
        except OSError:
            time.sleep(0.2)
    yield url
    stop(proc)
    log.close()


def serious_violations(page) -> list[dict]:
    # Evaluated through the DevTools protocol: the page's CSP allows no inline <script>.
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.fixture(scope="module")
def pages(site, browser):
    """Visit the flows once (a session, a rating, a grade, a Verify batch) and list the pages."""
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
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
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
    }


@pytest.mark.parametrize(
    "name",
    [
        "test tab", "session", "trace", "replay", "build tab", "deck", "editor", "grade tab",
        "grade run", "calibration", "verify", "verify batch", "not found", "compare",
    ],
)  # fmt: skip
def test_no_serious_or_critical_axe_violation(page, site, pages, name):
    page.goto(site + pages[name])
    if name == "editor":
        page.wait_for_function("() => !!window.gambitEditor")
    assert serious_violations(page) == []
