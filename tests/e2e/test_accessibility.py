"""axe-core (vendored from npm under tests/support/vendor, injected into the page; no CDN) on
every page of the simulator: no serious or critical violation. The data the pages show is
made through the UI with the offline demo model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import examples_site

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe.min.js"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with examples_site(tmp_path_factory.mktemp("a11y")) as url:
        yield url


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


@pytest.mark.parametrize(
    "name",
    [
        "test tab", "session", "trace", "replay", "build tab", "deck", "editor", "grade tab",
        "grade run", "calibration", "verify", "verify batch", "not found", "compare", "rate",
        "rate item rated", "rate without a name",
    ],
)  # fmt: skip
def test_no_serious_or_critical_axe_violation(page, site, pages, name):
    if name.startswith("rate") and name != "rate without a name":
        page.context.add_cookies([{"name": "gambit_rater", "value": "axe", "url": site}])
    page.goto(site + pages[name])
    if name == "rate":
        expect(page.locator("#rate-item")).to_have_attribute("data-rated", "false")
    if name == "editor":
        page.wait_for_function("() => !!window.gambitEditor")
    assert serious_violations(page) == []
