"""The design system in the browser (docs/design-system.md): the dark colour scheme keeps AA
contrast on every page (axe-core, as the accessibility suite does for the light one), the
buttons say which is the main action and which destroys, and a save is confirmed by a toast
that leaves by itself."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.axe import serious_violations

PAGES = [
    "test tab", "session", "trace", "replay", "build tab", "deck", "editor", "grade tab",
    "grade run", "calibration", "verify", "verify batch", "not found", "compare",
]  # fmt: skip


@pytest.fixture
def dark_page(browser):
    context = browser.new_context(color_scheme="dark")
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.mark.parametrize("name", PAGES)
def test_dark_scheme_has_no_serious_or_critical_axe_violation(dark_page, site, pages, name):
    dark_page.goto(site + pages[name])
    if name == "editor":
        dark_page.wait_for_function("() => !!window.gambitEditor")
    background = dark_page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 28)"  # the dark tokens are in force
    assert serious_violations(dark_page) == []


def _colours(page, selector: str) -> tuple[str, str]:
    return page.eval_on_selector(
        selector, "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el).color]"
    )


def test_primary_secondary_and_danger_buttons_differ(page, site, pages):
    page.goto(site + pages["deck"])
    add = _colours(page, "#scaffold")  # a POST form's submit: primary
    delete = _colours(page, "form[action$='/delete'] button[type=submit]")
    assert add[0] == "rgb(36, 81, 184)" and add[1] == "rgb(255, 255, 255)"
    assert delete[0] == "rgb(176, 0, 32)" and delete[1] == "rgb(255, 255, 255)"
    show = _colours(page, "form[method=dialog] button")  # the shortcuts' Close: secondary
    assert show[0] == "rgb(255, 255, 255)" and show[1] == "rgb(29, 35, 48)"
    page.goto(site + pages["grade run"])
    flag = _colours(page, ".flag-form button[type=submit]")  # a toggle in a POST form
    assert flag == show
    page.goto(site + pages["session"])
    assert _colours(page, ".delete-session button[type=submit]") == delete
    assert _colours(page, "#send") == add


def test_saving_in_the_editor_shows_a_toast_that_leaves(page, site, pages):
    page.goto(site + pages["editor"])
    page.wait_for_function("() => !!window.gambitEditor")
    page.click("#save-file")
    toast = page.locator("#toasts .toast")
    # The save checks the whole deck: on a busy machine that takes seconds.
    expect(toast.locator(".toast-text")).to_have_text("Saved.", timeout=30_000)
    expect(toast).to_have_class("toast success")
    assert page.locator("#toasts").get_attribute("role") == "status"
    expect(toast).to_have_count(0, timeout=8_000)  # gone by itself after five seconds


def test_a_toast_can_be_dismissed_at_once(page, site, pages):
    page.goto(site + pages["editor"])
    page.wait_for_function("() => !!window.gambitEditor")
    page.click("#save-file")
    expect(page.locator("#toasts .toast")).to_have_count(1, timeout=30_000)
    page.locator("#toasts .toast .toast-close").click()
    expect(page.locator("#toasts .toast")).to_have_count(0, timeout=1_000)
