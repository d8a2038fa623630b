"""The trace page in Chromium: a tree to walk with the keyboard, the selected node's detail
beside it, JSON that opens, closes and copies, and an action's envelope one click away."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.axe import serious_violations
from tests.support.fake_model_server import FunctionCall, Reply

USAGE = {"input_tokens": 120, "output_tokens": 30, "cost": 0.00042}


@pytest.fixture
def trace_page(browser, live_url, fake_model):
    # The model looks the order up with the deck's `order_status` action (its result comes
    # back in an envelope), then answers; the provider reports each call's cost.
    fake_model.queue(
        Reply(function_calls=[FunctionCall("order_status", {"order_id": "A1002"})], usage=USAGE),
        Reply(text="It is delayed by a carrier backlog.", usage=USAGE),
    )
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    page.fill("#composer textarea[name=message]", "Where is order A1002?")
    page.click("#send")
    expect(page.locator("#status")).to_have_text("completed", timeout=30_000)
    page.goto(page.url + "/trace")
    yield page
    context.close()


def focused(page) -> str:
    return page.evaluate("document.activeElement.textContent.replace(/\\s+/g, ' ').trim()")


def test_walk_the_tree_select_a_tool_call_and_read_its_result(trace_page):
    page = trace_page
    tree = page.locator("[role=tree]")
    run = tree.locator("[role=treeitem][aria-level='1']").first
    expect(run).to_have_attribute("aria-selected", "true")  # the newest run, at first
    expect(page.locator("#trace-detail h2")).to_contain_text("run")
    # the notes and the score are in view beside the expanded tree, without scrolling
    notes = page.locator("#notes textarea")
    expect(notes).to_be_in_viewport()

    # arrows walk the visible rows; one row at a time is in the tab order
    run.focus()
    for _ in range(12):
        if "order_status" in focused(page):
            break
        page.keyboard.press("ArrowDown")
    assert "order_status" in focused(page)
    assert page.locator("[role=treeitem][tabindex='0']").count() == 1
    page.keyboard.press("Enter")  # shows its detail, keeps the URL
    detail = page.locator("#trace-detail")
    expect(detail.locator("h2")).to_contain_text("order_status")
    expect(page).to_have_url(re.compile(r".*/trace\?node=\d+$"))
    node = page.url.split("?node=")[1]
    expect(page.locator("a[data-twin]")).to_have_attribute(
        "href", re.compile(rf"/trace\.json\?node={node}$")
    )
    selected = tree.locator("[aria-selected=true]")
    expect(selected).to_have_count(1)
    expect(selected).to_contain_text("order_status")

    # Left goes to the parent deck; Left again closes it, Right opens it again
    page.keyboard.press("ArrowLeft")
    assert focused(page).startswith("deck")
    deck = page.locator("[role=treeitem]:focus")
    page.keyboard.press("ArrowLeft")
    expect(deck).to_have_attribute("aria-expanded", "false")
    expect(tree.locator("[role=treeitem]", has_text="order_status")).to_be_hidden()
    page.keyboard.press("ArrowRight")
    expect(deck).to_have_attribute("aria-expanded", "true")
    expect(tree.locator("[role=treeitem]", has_text="order_status")).to_be_visible()

    # the result is the action's payload; the envelope is one click away
    result = detail.locator(".tdetail-result > .json-view")
    expect(result.locator(".json-tree")).to_contain_text('"order_id": "A1002"')
    expect(result.locator(".json-tree")).not_to_contain_text("actionCallId")
    envelope = detail.locator("details.envelope")
    expect(envelope.locator(".json-tree")).to_be_hidden()
    envelope.locator("summary").first.click()
    expect(envelope.locator(".json-tree")).to_contain_text('"actionCallId"')
    expect(envelope.locator(".json-tree")).to_contain_text('"runId"')

    # collapse and expand the JSON, then copy it
    root = result.locator(".json-tree > li > details")
    result.get_by_role("button", name="Collapse all").click()
    expect(root).not_to_have_attribute("open", "")
    expect(result.locator(".jv-key", has_text="order_id")).to_be_hidden()
    result.get_by_role("button", name="Expand all").click()
    expect(result.locator(".jv-key", has_text="order_id")).to_be_visible()
    root.locator("> summary").click()  # a click on a level closes it
    expect(result.locator(".jv-key", has_text="order_id")).to_be_hidden()
    result.get_by_role("button", name="Copy").click()
    expect(result.locator(".json-status")).to_have_text("Copied")
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert copied["order_id"] == "A1002" and "runId" not in copied
    # the page as it now is (a node selected, JSON open, the envelope shown) stays accessible
    assert serious_violations(page) == []
    # and so do a node's own page and a run's
    node_page = selected.get_attribute("hx-get")
    run_event = run.get_attribute("id").removeprefix("nav-tn-")
    trace_url = page.url.split("?")[0]
    for url in (node_page, f"{trace_url}/runs/{run_event}"):
        page.goto(url if url.startswith("http") else trace_url.split("/test/")[0] + url)
        expect(page.locator("#trace-detail h2")).to_be_visible()
        assert serious_violations(page) == [], url


def test_a_model_call_shows_its_figures_and_loads_what_it_sent(trace_page):
    page = trace_page
    model = page.locator("[role=treeitem]", has_text="model").first
    figures = model.locator(".tnav-fig")
    expect(figures.nth(1)).to_have_text("150 tok")
    expect(figures.nth(2)).to_have_text("$0.00042")  # the provider's own figure
    run = page.locator("[role=treeitem][aria-level='1']").first
    expect(run.locator(".tnav-fig").nth(2)).to_have_text("$0.00084")  # both calls
    model.click()
    detail = page.locator("#trace-detail")
    expect(detail.locator("h2")).to_contain_text("fake")
    expect(detail).to_contain_text("input 120 · cached 0 · output 30 · reasoning 0 · total 150")
    started = detail.locator("time")
    expect(started).to_have_attribute("title", re.compile(r"\d{2}:\d{2}:\d{2}"))
    expect(started).to_have_attribute("datetime", re.compile(r"^\d{4}-\d{2}-\d{2}T"))
    detail.locator("details.sent > summary").click()  # loads instructions, items and tools
    expect(detail.locator(".sent-detail")).to_contain_text("instructions")
    # back in the history: the run's detail again (htmx restores the page)
    page.go_back()
    expect(page.locator("#trace-detail h2")).to_contain_text("run")


def test_an_older_run_is_folded_and_opens_from_the_keyboard(page, live_url, fake_model):
    fake_model.queue(*["Noted."] * 4)
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "openresponses/fake")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    for n in range(4):
        page.fill("#composer textarea[name=message]", f"message {n}")
        page.click("#send")
        replies = page.locator("#conversation .bubble.assistant", has_text="Noted.")
        expect(replies).to_have_count(n + 1, timeout=20_000)
        expect(page.locator("#status")).to_have_text("completed")
    page.goto(page.url + "/trace")
    runs = page.locator("[role=tree] [role=treeitem][aria-level='1']")
    expect(runs).to_have_count(4)
    oldest = runs.first
    expect(oldest).to_contain_text("message 0")  # a run shows its first user message
    expect(oldest).to_have_attribute("aria-expanded", "false")  # only the newest 3 are open
    expect(page.locator("[role=treeitem][aria-level='2']")).to_have_count(3 * 2)
    runs.last.focus()
    page.keyboard.press("Home")
    assert "message 0" in focused(page)
    page.keyboard.press("ArrowRight")  # opens it: its children load
    expect(oldest).to_have_attribute("aria-expanded", "true")
    expect(oldest).to_have_attribute("aria-owns", re.compile(r"^nav-tn-\d+-children$"))
    group = page.locator(f"#{oldest.get_attribute('aria-owns')}")
    expect(group.locator("[role=treeitem]").first).to_be_visible()
    page.keyboard.press("ArrowRight")  # to its first child
    assert page.evaluate("document.activeElement.getAttribute('aria-level')") == "2"
    page.keyboard.press("Enter")
    expect(page.locator("#trace-detail .tdetail-path")).to_contain_text("run")
    # the triangle closes a run without selecting it
    selected = page.locator("[aria-selected=true]").get_attribute("id")
    oldest.locator(".twisty").click()
    expect(oldest).to_have_attribute("aria-expanded", "false")
    expect(group).to_be_hidden()
    assert page.locator("[aria-selected=true]").get_attribute("id") == selected
