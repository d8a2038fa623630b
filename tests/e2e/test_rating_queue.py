"""The rating queue in a real browser, keyboard only: a Verify batch (offline demo model) fills
the queue, a rater names themselves, rates ten items with the number keys (one with a reason,
one skipped, one revisited), and calibration moves with every rating: the queue's progress at
once, and the calibration page's pairs (docs/calibration.md, "The rating queue")."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import examples_site

TONE = "support/graders/tone/PROMPT.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with examples_site(tmp_path_factory.mktemp("rate")) as url:
        yield url


def _tone_pairs(page, site) -> int:
    report = page.request.get(site + "/grade/calibration.json").json()
    return next(g["pairs"] for g in report["graders"] if g["grader"] == TONE and g["current"])


def _run_verify(page, site) -> None:
    """A batch whose scenario sessions each have several graded replies, graded twice."""
    page.goto(site + "/grade/verify")
    page.fill("input[name=runs]", "4")
    page.fill("input[name=repeats]", "2")
    page.fill("input[name=maxTurns]", "3")
    page.click("#run-verify")
    page.wait_for_url(re.compile(r".*/grade/verify/run-[0-9a-f]{24}$"))
    expect(page.locator("#verify-batch [data-status]")).to_have_text("completed", timeout=90_000)


def test_ten_ratings_with_the_keyboard_move_calibration(page, site):
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    _run_verify(page, site)
    assert _tone_pairs(page, site) == 0
    page.goto(site + "/grade")
    page.keyboard.press("Tab")  # the keyboard from here on
    page.goto(site + "/grade/rate")
    expect(page.locator("#rate-item")).to_have_count(0)  # no name, no item
    page.locator("#rater-name").focus()
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    item = page.locator("#rate-item")
    expect(item).to_have_attribute("data-rated", "false")
    queue = page.request.get(site + "/grade/rate.json").json()["queue"]
    assert len(queue) >= 12

    rated: list[str] = []
    skipped = False
    while len(rated) < 10:
        expect(item).to_have_attribute("data-rated", "false")
        target = item.get_attribute("data-target")
        # the graders' scores and reasons are hidden until the rater has rated
        expect(page.locator("#graders-hidden")).to_be_visible()
        expect(page.locator(".grader-reasons")).to_have_count(0)
        if len(rated) == 3 and not skipped:
            page.keyboard.press("s")  # skip this one; it stays in the queue
            skipped = True
            expect(item).not_to_have_attribute("data-target", target)
            continue
        if len(rated) == 2:
            page.keyboard.press("r")
            expect(page.locator("#rate-reason")).to_be_focused()
            page.keyboard.type("polite, but it never names the order")
            page.keyboard.press("Escape")  # back to the item: a score key saves both
        key = str(1 + len(rated) % 7)
        page.keyboard.press(key)
        expect(item).to_have_attribute("data-rated", "true")
        expect(page.locator(".grader-reasons li").first).to_be_visible()
        expect(page.locator(f"#rate-form button[data-key='{key}']")).to_have_attribute(
            "aria-pressed", "true"
        )
        rated.append(target)
        # the progress on the page moved with this rating, and so did calibration
        expect(
            page.locator(f"#rate-progress [data-grader='{TONE}'] [data-pairs]")
        ).to_have_attribute("data-pairs", str(len(rated)))
        if len(rated) == 5:
            page.keyboard.press("p")  # back to the one just rated: it shows as rated
            expect(item).to_have_attribute("data-target", rated[-2])
            expect(item).to_have_attribute("data-rated", "true")
            # a reason added afterwards: Enter saves it with the score already given
            page.keyboard.press("r")
            page.keyboard.type("second look: fine")
            with page.expect_response(lambda r: r.url.endswith("/rating")) as saved:
                page.keyboard.press("Enter")
            assert saved.value.status == 200
            session_id, ref = rated[-2].split("#")
            again = page.request.get(f"{site}/grade/rate/{session_id}/{ref}.json").json()
            assert again["rating"]["reason"] == "second look: fine"
            assert again["rating"]["score"] == 1 + (len(rated) - 2) % 7 - 4
            page.keyboard.press("Escape")
            page.keyboard.press("n")
            expect(item).to_have_attribute("data-target", rated[-1])
        page.keyboard.press("n")
        expect(item).not_to_have_attribute("data-target", rated[-1])

    assert len(set(rated)) == 10
    assert _tone_pairs(page, site) == 10
    ratings = page.request.get(site + "/grade/calibration.json").json()["ratings"]
    assert ratings["raters"] == ["Ada"] and ratings["total"] == 10
    third = rated[2].split("#")
    third_item = page.request.get(f"{site}/grade/rate/{third[0]}/{third[1]}.json").json()
    assert third_item["rating"]["reason"] == "polite, but it never names the order"
    page.goto(site + "/grade/calibration")
    expect(page.locator("article[data-hash] [data-figure='evidence']").first).to_contain_text(
        "too few ratings to judge: rate"
    )
    expect(page.locator("#verdicts")).to_contain_text("Tone")
    # the name is remembered in this browser: a new visit opens the queue as Ada
    page.goto(site + "/grade/rate")
    expect(page.locator("#rater-name")).to_have_value("Ada")
    expect(item).to_have_attribute("data-rated", "false")
    assert errors == []


def test_a_reason_typed_before_a_score_is_kept_and_the_keys_are_listed(page, site):
    # Before, Enter in the reason with no score did nothing that could be seen, and n then p
    # came back to an empty field: the reason was lost.
    if len(page.request.get(site + "/grade/rate.json").json()["queue"]) < 2:
        _run_verify(page, site)
    page.context.add_cookies([{"name": "gambit_rater", "value": "Bea", "url": site}])
    page.goto(site + "/grade/rate")
    item = page.locator("#rate-item")
    expect(item).to_have_attribute("data-rated", "false")
    first = item.get_attribute("data-target")
    page.keyboard.press("r")
    page.keyboard.type("names the order but not the date")
    page.keyboard.press("Enter")
    expect(page.locator("#rate-hint")).to_contain_text("give a score")
    page.keyboard.press("n")
    expect(item).not_to_have_attribute("data-target", first)
    page.keyboard.press("p")
    expect(item).to_have_attribute("data-target", first)
    expect(page.locator("#rate-reason")).to_have_value("names the order but not the date")
    page.keyboard.press("4")  # the score saves the reason with it
    expect(item).to_have_attribute("data-rated", "true")
    session_id, ref = first.split("#")
    saved = page.request.get(f"{site}/grade/rate/{session_id}/{ref}.json").json()["rating"]
    assert (saved["score"], saved["reason"]) == (0, "names the order but not the date")
    # ? lists the queue's own keys
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_contain_text("rate the item −3 … +3")
