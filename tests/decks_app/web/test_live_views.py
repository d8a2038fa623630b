"""One live-update path (docs/simulator.md, "Live updates"): the live views a page may ask
the session socket for are the registered ones, and no page polls or opens a socket of its
own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from decks_app.web import live

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = sorted((ROOT / "decks_app").rglob("templates/**/*.html"))
SCRIPTS = sorted((ROOT / "static" / "decks_app").glob("*.js"))


def test_the_registered_views_are_the_ones_pages_ask_for():
    registered = {v.name for v in live.views()}
    assert registered == {"assistant", "compare", "grade_run", "verify_batch"}
    asked = set()
    for template in TEMPLATES:
        text = template.read_text()
        for tag in re.findall(r"<[^>]*data-live-view=[^>]*>", text):
            if "session_socket" in tag:  # the build page's file socket is another matter
                asked.add(re.search(r'data-live-view="([^"]+)"', tag).group(1))
    assert asked == registered
    assert all(v.description for v in live.views())


def test_a_name_is_registered_once():
    original = live.get("grade_run")

    def other(session_id: str, key: str) -> str:
        return ""

    with pytest.raises(ValueError, match="already registered"):
        live.live_view("grade_run")(other)
    assert live.get("grade_run") == original
    live.live_view("grade_run")(original.render)  # the same function again: a reload
    assert live.get("grade_run") == original
    assert live.get("nope") is None and live.live_html("nope", "session-x", "k") == ""


def test_no_page_polls_or_opens_its_own_socket():
    for template in TEMPLATES:
        assert not re.search(r'hx-trigger="[^"]*every ', template.read_text()), template
    for script in SCRIPTS:
        text = script.read_text()
        assert "new WebSocket" not in text, script
        # one clock, the run timer of the session page, counts on locally (no request)
        intervals = text.count("setInterval")
        assert intervals == (1 if script.name == "session.js" else 0), script
        assert "fetch(" not in text or script.name in ("build.js", "keys.js"), script
