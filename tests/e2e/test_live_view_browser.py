"""The session page while a reply streams reads as it will once finished: each message once,
in its own bubble, and a scenario's persona only as the user it plays (Chromium, the real
socket, a fake model streaming slowly)."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from tests.e2e.test_browser import _new_session, _send
from tests.support.fake_model_server import Reply

BUBBLES = """() => [...document.querySelectorAll('#conversation .bubble, #live .bubble')]
  .filter(b => b.classList.contains('user') || b.classList.contains('assistant'))
  .map(b => [b.classList.contains('user') ? 'user' : 'assistant',
             b.querySelector('.text').innerText.trim()])"""


def _slowly(text: str) -> Reply:
    words = text.split(" ")
    return Reply(deltas=[w + " " for w in words[:-1]] + words[-1:], delay=0.12)


def _watch(page, timeout: float = 40.0) -> list[list[list[str]]]:
    """The page's bubbles every 50 ms until the run is over."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen.append(page.evaluate(BUBBLES))
        if page.locator("#status").inner_text() in ("completed", "failed", "canceled"):
            break
        page.wait_for_timeout(50)
    return seen


def test_the_users_message_shows_once_while_the_reply_streams(page, live_url, fake_model):
    _new_session(page, live_url)
    _send(page, "is my parcel lost")
    seen = _watch(page)
    expect(page.locator("#status")).to_have_text("completed")
    streaming = [s for s in seen if s and s[-1][0] == "assistant" and "tok59" not in s[-1][1]]
    assert len(streaming) >= 3, seen  # looked at while the reply was arriving
    for bubbles in seen:  # nothing yet (the send is on its way), then the message, once
        assert [b for b in bubbles if b[0] == "user"] in ([], [["user", "is my parcel lost"]])
    assert [b for b in seen[-1] if b[0] == "user"] == [["user", "is my parcel lost"]]


def test_a_scenario_run_streams_as_its_conversation(page, live_url, fake_model):
    lines = [
        ("user", "Hello, my order A1002 is three days late"),
        ("assistant", "Sorry about that, it left the depot today"),
        ("user", "Will I get the shipping fee back then"),
        ("assistant", "Yes, the fee goes back to your card"),
    ]
    fake_model.queue(*[_slowly(text) for _, text in lines])
    page.goto(live_url + "/test")
    page.fill("#scenario-form input[name=maxTurns]", "2")
    page.click("#run-scenario")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    seen = _watch(page)
    expect(page.locator("#status")).to_have_text("completed")
    final = [tuple(b) for b in page.evaluate(BUBBLES)]
    assert final == lines, final
    assert sum(1 for s in seen if s) >= 4, seen
    for bubbles in seen:
        shown = [tuple(b) for b in bubbles]
        # never the persona's instructions, never two messages glued in one bubble, never a
        # message twice: what shows is the start of the finished conversation
        assert not any("Start the conversation" in text for _, text in shown), shown
        if shown:
            assert shown[:-1] == lines[: len(shown) - 1], shown
            kind, text = shown[-1]
            assert (kind, lines[len(shown) - 1][1].startswith(text)) == (
                lines[len(shown) - 1][0],
                True,
            ), shown
