"""End to end in Chromium against `gambit serve` and a fake model streaming slowly."""

from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import expect

SHOTS = Path("/tmp/gambit-e2e")


def _new_session(page, live_url) -> str:
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    return page.url


def _send(page, text: str) -> None:
    page.fill("textarea[name=message]", text)
    page.click("#send")


def _live_text(page) -> str:
    return page.locator("#live").inner_text()


def _wait_for(page, predicate, timeout=10.0):
    """Poll while letting Playwright dispatch its events (route handlers run then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        page.wait_for_timeout(50)
    raise AssertionError("condition not met in time")


def test_a_reply_streams_in_several_steps(page, live_url):
    _new_session(page, live_url)
    _send(page, "Hi <script>window.pwned=1</script>")
    lengths = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lengths.append(len(_live_text(page)))
        if page.locator("#status").inner_text() == "completed":
            break
        time.sleep(0.1)
    growth = sorted({n for n in lengths if n > 0})
    assert len(growth) >= 4, lengths  # text arrived in several steps, not at once
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("#conversation")).to_contain_text("tok59")
    expect(page.locator("#conversation")).to_contain_text("<script>window.pwned=1</script>")
    assert page.evaluate("window.pwned") is None
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "streamed.png"), full_page=True)


def test_a_reload_mid_stream_shows_everything_and_continues(page, live_url):
    _new_session(page, live_url)
    _send(page, "tell me more")
    _wait_for(page, lambda: "tok10" in _live_text(page))
    page.reload()
    assert "tok5 " in _live_text(page) or "tok5" in page.locator("#conversation").inner_text()
    expect(page.locator("#status")).to_have_text("completed")
    text = page.locator("#conversation").inner_text()
    assert text.count("tok30 ") == 1 and "tok59" in text


def test_stop_cancels_the_run(page, live_url):
    _new_session(page, live_url)
    _send(page, "go on forever")
    _wait_for(page, lambda: "tok3" in _live_text(page))
    # The indicator says the reply is streaming and counts the seconds by itself.
    activity = page.locator("#activity")
    expect(activity.locator(".phase")).to_have_text("responding")
    first = float(activity.locator(".elapsed").inner_text())
    page.wait_for_timeout(600)
    assert float(activity.locator(".elapsed").inner_text()) >= first + 0.4
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("canceled")
    assert "tok59" not in page.locator("#conversation").inner_text()


def test_a_rating_survives_a_reload(page, live_url):
    _new_session(page, live_url)
    _send(page, "rate me")
    expect(page.locator("#status")).to_have_text("completed")
    page.locator("#conversation .feedback button[data-score='2']").first.click()
    expect(page.locator("#conversation .feedback button[data-score='2']").first).to_have_attribute(
        "aria-pressed", "true"
    )
    # wait until htmx has processed the freshly swapped-in textarea, then type
    page.wait_for_function(
        # a function, not an expression: Playwright evals expressions in the page on every
        # poll, which the simulator's CSP (no 'unsafe-eval') refuses
        "() => { const el = document.querySelector('#conversation textarea.reason');"
        " return !!(el && el['htmx-internal-data'] && el['htmx-internal-data'].initHash); }"
    )
    with page.expect_response(lambda r: "/feedback/" in r.url and r.request.method == "POST"):
        page.locator("#conversation textarea.reason").first.fill("clear and short")
    page.reload()
    expect(page.locator("#conversation .feedback button[data-score='2']").first).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(page.locator("#conversation textarea.reason").first).to_have_value("clear and short")
    # clicking the active score clears the rating
    page.locator("#conversation .feedback button[data-score='2']").first.click()
    expect(page.locator("#conversation .feedback button[aria-pressed='true']")).to_have_count(0)
    page.reload()
    expect(page.locator("#conversation .feedback button[aria-pressed='true']")).to_have_count(0)


def test_a_replay_steps_through_the_events(page, live_url):
    url = _new_session(page, live_url)
    _send(page, "replay this")
    expect(page.locator("#status")).to_have_text("completed")
    page.goto(url + "/replay?step=0")
    expect(page.locator("#step-label")).to_contain_text("step 0 /")
    expect(page.locator("#replay-conversation")).to_contain_text("Nothing said yet")
    for step in (1, 2, 3):  # each click once the frame it swaps in has arrived
        page.click("#next")
        expect(page.locator("#step-label")).to_contain_text(f"step {step} /")
    total = int(page.locator("#step-label").inner_text().split("/")[1])
    page.goto(url + f"/replay?step={total}")
    expect(page.locator("#replay-conversation")).to_contain_text("tok59")
    page.click("#prev")
    expect(page.locator("#step-label")).to_contain_text(f"step {total - 1} /")


def test_a_dropped_socket_reconnects_and_resumes_without_duplicates(page, live_url):
    sockets = []

    def proxy(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/sessions/.*"), proxy)
    _new_session(page, live_url)
    page.evaluate("htmx.config.wsReconnectDelay = () => 300")
    _send(page, "keep going")
    _wait_for(page, lambda: "tok8" in _live_text(page))
    sockets[-1].close(code=1006, reason="network drop")  # abnormal closure: htmx reconnects
    _wait_for(page, lambda: len(sockets) >= 2)
    expect(page.locator("#status")).to_have_text("completed")
    text = page.locator("#conversation").inner_text()
    assert text.count("tok20 ") == 1 and "tok59" in text


def test_enter_sends_and_shift_enter_makes_a_new_line(page, live_url):
    _new_session(page, live_url)
    box = page.locator("#message")
    box.focus()
    page.keyboard.press("Enter")  # nothing typed: refused on the spot
    expect(page.locator("#empty-send")).to_be_visible()
    box.type("first line")
    page.keyboard.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "first line\nsecond line"
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#conversation")).to_contain_text("second line")


def test_a_message_typed_during_a_run_stays_in_the_box_until_it_is_sent(page, live_url):
    """Nothing typed is dropped: the box keeps its text through the live updates of a run
    and through a refused send, and is emptied only when the server took that text."""
    _new_session(page, live_url)
    _send(page, "first message")
    box = page.locator("#message")
    expect(box).to_have_value("")  # taken by the server: the box is empty again
    expect(page.locator("#send")).to_be_disabled()  # the first run is going
    box.fill("second message")
    box.press("Enter")  # Send is disabled: the message waits, and the page says so
    expect(page.locator("#busy-send")).to_be_visible()
    # A send the server refuses (the session has a run going: 409) keeps the text, and a
    # toast says why.
    with page.expect_response(re.compile(r".*/send$")) as refused:
        page.evaluate("document.getElementById('composer').requestSubmit()")
    assert refused.value.status == 409
    expect(page.locator("#toasts .toast")).to_contain_text("run")
    expect(box).to_have_value("second message")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#busy-send")).to_be_hidden()  # it can be sent now
    expect(box).to_have_value("second message")  # the live updates re-rendered the composer
    box.press("Enter")
    expect(page.locator("#conversation .bubble.user")).to_have_count(2, timeout=10_000)
    expect(page.locator("#conversation")).to_contain_text("second message")
    expect(box).to_have_value("")
