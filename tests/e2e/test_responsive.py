"""Every main page fits its window, from a 420 px phone-sized window to a 1440 px desktop:
no horizontal page scroll (a too-wide table or code block scrolls inside its own box), and
the session page's chat column keeps a usable width at 420 px. The pages are the ones the
accessibility suite visits, with data made through the UI (offline demo model)."""

from __future__ import annotations

import pytest

PAGES = [
    "test tab", "session", "trace", "replay", "build tab", "deck", "editor", "grade tab",
    "grade run", "calibration", "verify", "verify batch", "not found", "compare",
]  # fmt: skip
WIDTHS = [420, 1440]

OVERFLOW = """() => {
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1)
    .filter(el => !el.closest('.CodeMirror'))
    .slice(0, 5)
    .map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (el.className && typeof el.className === 'string' ? '.' + el.className.trim().replace(/\\s+/g, '.') : '') +
      ' right=' + Math.round(el.getBoundingClientRect().right));
  return {scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, wide};
}"""


def _open(page, url: str, name: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(url)
    if name == "editor":
        page.wait_for_function("() => !!window.gambitEditor")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_no_horizontal_page_overflow(page, site, pages, name, width):
    _open(page, site + pages[name], name, width)
    found = page.evaluate(OVERFLOW)
    assert found["scrollWidth"] <= found["innerWidth"], found


def test_chat_column_is_usable_at_420px(page, site, pages):
    _open(page, site + pages["session"], "session", 420)
    chat = page.locator(".panel.chat").bounding_box()
    assert chat is not None and chat["width"] >= 300, chat
    composer = page.locator("#composer textarea").bounding_box()
    assert composer is not None and composer["width"] >= 260, composer
    # The side panel (trace, notes) follows the chat instead of squeezing it.
    side = page.locator(".panel.side").bounding_box()
    assert side is not None and side["y"] >= chat["y"] + chat["height"] - 1, (chat, side)


def test_tabs_stay_on_screen_at_420px(page, site, pages):
    _open(page, site + pages["test tab"], "test tab", 420)
    for tab in ("Build", "Test", "Grade"):
        box = page.locator(".tabs a", has_text=tab).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420, (tab, box)
