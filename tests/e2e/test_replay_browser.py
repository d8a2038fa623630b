"""The replay page in Chromium: it opens at step 1, steps by event and by turn with its
buttons and keys, and the event's JSON stays inside its box."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.test_browser import _new_session, _send


def _step(page) -> int:
    return int(re.search(r"step (\d+) /", page.locator("#step-label").inner_text()).group(1))


def _turn(page) -> int:
    return int(re.search(r"turn (\d+) /", page.locator("#turn-label").inner_text()).group(1))


def _press(page, key: str, expected_step=None, expected_turn=None) -> None:
    page.keyboard.press(key)
    if expected_step is not None:
        expect(page.locator("#step-label")).to_contain_text(f"step {expected_step} /")
    if expected_turn is not None:
        expect(page.locator("#turn-label")).to_contain_text(f"turn {expected_turn} /")


def test_replay_opens_at_step_one_and_the_keys_step_by_event_and_turn(page, live_url):
    url = _new_session(page, live_url)
    long_word = "x" * 600  # one unbroken line of JSON, far wider than the page
    _send(page, "first " + long_word)
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#conversation .bubble.assistant")).to_have_count(1)
    _send(page, "second question")
    expect(page.locator("#conversation .bubble.assistant")).to_have_count(2, timeout=20_000)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(url + "/replay")
    expect(page.locator("#step-label")).to_contain_text("step 1 /")
    expect(page.locator("#turn-label")).to_contain_text("turn 1 / 2")
    total = int(page.locator("#step-label").inner_text().split("/")[1])
    assert total < 100  # steps are events, not the provider's text deltas (60 of them a reply)
    _press(page, "ArrowRight", expected_step=2)
    _press(page, "ArrowRight", expected_step=3)
    _press(page, "ArrowLeft", expected_step=2)
    _press(page, "Shift+ArrowRight", expected_turn=2)
    turn_two = _step(page)
    expect(page.locator("#current-type")).to_have_text("run.start")
    expect(page.locator("#replay-conversation")).to_contain_text("tok59")  # turn 1's reply
    _press(page, "PageUp", expected_turn=1)
    assert _step(page) == 1
    _press(page, "PageDown", expected_step=turn_two)
    _press(page, "End", expected_step=total)
    expect(page.locator("#next")).to_be_disabled()
    _press(page, "Home", expected_step=0)
    expect(page.locator("#replay-conversation")).to_contain_text("Nothing said yet")
    page.click("#next-turn")
    expect(page.locator("#step-label")).to_contain_text("step 1 /")
    # the step that carries the long message: its JSON wraps inside its box
    for _ in range(total):
        if page.locator("#current-type").inner_text() == "message.user":
            break
        _press(page, "ArrowRight", expected_step=_step(page) + 1)
    box = page.locator("#current-event")
    expect(box).to_contain_text(long_word[:50])
    sizes = box.evaluate(
        "e => ({scroll: e.scrollWidth, client: e.clientWidth,"
        " right: e.getBoundingClientRect().right, page: document.documentElement.scrollWidth})"
    )
    assert sizes["scroll"] <= sizes["client"] + 1, sizes  # wrapped, no sideways scrolling
    wide = page.evaluate(
        "() => [...document.querySelectorAll('body *')].filter(e => e.scrollWidth > e.clientWidth + 1)"
        ".slice(0, 4).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + e.scrollWidth)"
    )
    assert sizes["right"] <= 1280 and sizes["page"] <= 1280, (
        sizes,
        wide,
    )  # nothing runs off the page


def test_re_run_offline_names_the_replay_model_not_the_originals(page, live_url):
    # The offline re-run's calls are answered by the recording: its header and its trace name
    # `offline-replay`, not the model the original session used (openresponses/fake).
    _new_session(page, live_url)
    _send(page, "replay me offline")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(page.locator("#session-model")).to_contain_text("openresponses/fake")
    source = page.url
    page.click("#rerun")
    page.wait_for_url(lambda url: url != source and re.search(r"/test/session-[0-9a-f]{24}$", url))
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    page.reload()  # the header is drawn with the page; the run has now ended
    expect(page.locator("#session-model")).to_have_text("offline-replay (offline)")
    # the trace's model call named the deck's model before the recording resolved every
    # model to itself (the header already read offline-replay then)
    model_call = page.locator("#trace-tree li.node.model summary").first
    expect(model_call).to_contain_text("offline-replay")
    expect(page.locator("#trace-panel")).not_to_contain_text("openresponses/fake")
