"""A request the server refuses is never silent: htmx swaps nothing for a 4xx (base.html's
responseHandling), so static/decks_app/toasts.js shows the refusal's sentence as an error
toast, and what was typed stays in its field (Chromium, the real server)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.test_browser import _new_session, _send


def test_a_message_over_the_limit_says_why_and_keeps_the_text(page, live_url):
    # Before, the server answered 400 "the message is longer than 100000 characters" and the
    # page showed nothing at all.
    _new_session(page, live_url)
    text = "x" * 100_001
    _send(page, text)
    toast = page.locator("#toasts .toast.error")
    expect(toast).to_have_text("the message is longer than 100000 characters×")
    expect(toast).to_have_attribute("role", "alert")
    assert page.locator("textarea[name=message]").input_value() == text
    toast.locator(".toast-close").click()
    expect(toast).to_have_count(0)


def test_an_unreachable_server_is_said_too(page, live_url):
    _new_session(page, live_url)
    page.route("**/send", lambda route: route.abort())
    _send(page, "hello")
    expect(page.locator("#toasts .toast.error")).to_contain_text("could not be reached")
    assert page.locator("textarea[name=message]").input_value() == "hello"


def test_a_refused_import_keeps_the_page_and_says_why(page, live_url, tmp_path):
    # Before: a page of its own ("Cannot do that") and a way back that lost the chosen files.
    bad = tmp_path / "state.json"
    bad.write_text("not json")
    page.goto(live_url + "/test")
    page.set_input_files("#import-form input[name=state]", str(bad))
    page.click("#import-form button[type=submit]")
    expect(page.locator("#toasts .toast.error")).to_be_visible()
    assert page.url.rstrip("/").endswith("/test")
    assert page.locator("#import-form input[name=state]").evaluate("e => e.files.length") == 1
