"""Keyboard only, never a click: start a session (focus lands in the message box), send with
Enter, stop with Esc, list the shortcuts with ?, move through trace events with j/k."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.support.fake_model_server import Reply


def test_a_session_from_the_keyboard_alone(page, live_url, fake_model):
    # This test's own slow answer (the shared fake server may hold other tests' replies).
    fake_model.reset()
    fake_model.default_reply = Reply(deltas=[f"tok{i} " for i in range(60)], delay=0.04)
    fake_model.queue(Reply(deltas=[f"slow{i} " for i in range(200)], delay=0.05))
    page.goto(live_url + "/test")
    page.focus("select[name=deck]")
    page.keyboard.press("ArrowDown")  # hello/deck.py -> support/PROMPT.md
    expect(page.locator('form[action="/test/new"] select[name=deck]')).to_have_value(
        "support/PROMPT.md"
    )
    page.keyboard.press("Tab")  # to the model field
    page.keyboard.type("openresponses/fake")
    # Start session is disabled while the picked deck's context fields load (a disabled
    # button takes no focus)
    expect(page.locator("#new-session")).to_be_enabled()
    page.focus("#new-session")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    box = page.locator("#composer textarea[name=message]")
    expect(box).to_be_focused()  # after Start session, straight into the message box
    page.keyboard.type("a slow answer please")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text(re.compile("queued|running"))
    expect(page.locator("#stop")).to_be_enabled()
    page.keyboard.press("Escape")
    expect(page.locator("#status")).to_have_text("canceled", timeout=10_000)
    # ? lists the shortcuts (outside a text field); Esc closes the list
    expect(page.locator("#composer textarea[name=message]")).to_be_focused()  # back in the box
    page.focus("nav.actions a")  # leave the text field, as Tab would
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()


def test_trace_events_with_j_and_k(page, live_url):
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    # Start session is disabled while the picked deck's context fields load (a disabled
    # button takes no focus)
    expect(page.locator("#new-session")).to_be_enabled()
    page.focus("#new-session")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    page.keyboard.type("hello")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    page.goto(page.url + "/trace")
    page.locator("h1").first.focus()
    page.keyboard.press("j")
    first = page.evaluate("document.activeElement.textContent")
    page.keyboard.press("j")
    second = page.evaluate("document.activeElement.textContent")
    assert first != second and "run.start" in first
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.textContent") == first
    page.keyboard.press("Enter")  # opens the event
    assert page.evaluate("document.activeElement.parentElement.open") is True


def test_a_reply_is_announced_once_and_focus_returns_to_the_box(page, live_url, fake_model):
    fake_model.reset()
    fake_model.default_reply = Reply(deltas=[f"tok{i} " for i in range(60)], delay=0.04)
    fake_model.queue(Reply(deltas=["All ", "good ", "here."], delay=0.05))
    page.goto(live_url + "/test")
    page.select_option('form[action="/test/new"] select[name=deck]', "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    # Start session is disabled while the picked deck's context fields load (a disabled
    # button takes no focus)
    expect(page.locator("#new-session")).to_be_enabled()
    page.focus("#new-session")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    page.keyboard.type("status?")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#announce")).to_have_text("Reply: All good here.")
    expect(page.locator("#composer textarea[name=message]")).to_be_focused()
    # rate it from the keyboard: focus a score, press Enter, tab to the reason, type
    page.focus("#conversation .feedback button[data-score='2']")
    page.keyboard.press("Enter")
    expect(page.locator("#conversation .feedback button[data-score='2']").first).to_have_attribute(
        "aria-pressed", "true"
    )
    page.wait_for_function(
        # a function, not an expression: Playwright evals expressions in the page on every
        # poll, which the simulator's CSP (no 'unsafe-eval') refuses
        "() => { const el = document.querySelector('#conversation textarea.reason');"
        " return !!(el && el['htmx-internal-data'] && el['htmx-internal-data'].initHash); }"
    )
    page.focus("#conversation textarea.reason")
    with page.expect_response(lambda r: "/feedback/" in r.url and r.request.method == "POST"):
        page.keyboard.type("short and right")
    page.reload()
    expect(page.locator("#conversation textarea.reason").first).to_have_value("short and right")


def test_a_scenario_and_a_grader_from_the_keyboard(page, live_url, fake_model):
    fake_model.reset()
    fake_model.default_reply = Reply(deltas=["Fine."], delay=0.0)
    page.goto(live_url + "/test")
    page.focus("#scenario-form input[name=maxTurns]")
    page.keyboard.press("Control+A")
    page.keyboard.type("1")
    page.focus("#run-scenario")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    expect(page.locator("#status")).to_have_text(re.compile("completed|failed"), timeout=30_000)
    session_id = page.url.rstrip("/").split("/")[-1]
    page.goto(f"{live_url}/grade?session={session_id}")
    page.focus("#run-grader")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/grade/runs/run-[0-9a-f]{24}$"))
    expect(page.locator("#grade-result [data-status]")).to_have_text(
        re.compile("completed|failed"), timeout=30_000
    )
