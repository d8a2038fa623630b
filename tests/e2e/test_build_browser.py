"""The Build tab in Chromium: create a deck, break its PROMPT.md and see the error at its
line as you type, fix it, save with Ctrl+S, then run the new deck's scenario from the Test tab.
The server serves a scratch copy of the examples, so nothing in the repository changes."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect


def test_create_break_fix_and_run_a_deck(page, build_url):
    url, workspace = build_url
    page.goto(url + "/build")
    page.fill("#new-deck-name", "concierge")
    page.click("#create-deck")
    page.wait_for_url(re.compile(r".*/build/file\?path=concierge/PROMPT\.md.*"))
    expect(page.locator("#problems")).to_contain_text("The deck loads cleanly.")
    page.wait_for_function("() => !!window.gambitEditor")
    # front matter is highlighted as TOML (keys and strings), the body as Markdown
    assert page.evaluate("window.gambitEditor.getOption('mode')") == "gambit-deck"
    expect(page.locator(".CodeMirror .cm-string").first).to_be_visible()
    lines = page.evaluate("window.gambitEditor.getValue()").split("\n")
    line = next(i for i, text in enumerate(lines) if text.startswith("startMode"))
    # Type a broken startMode: the error appears at that line, from the draft, unsaved.
    page.evaluate(
        f"window.gambitEditor.replaceRange('startMode = \"sideways\"', {{line: {line}, ch: 0}},"
        f" {{line: {line}, ch: {len(lines[line])}}})"
    )
    problem = page.locator("#problems li.error")
    expect(problem).to_contain_text("startMode")
    expect(problem).to_have_attribute("data-line", str(line + 1))
    expect(page.locator(".CodeMirror .problem-line-error")).to_have_count(1)
    assert 'startMode = "assistant"' in (workspace / "concierge/PROMPT.md").read_text()
    # Save it broken (it is always saved), then fix it and save with Ctrl+S.
    page.click("#save-file")
    expect(page.locator("#save-status")).to_contain_text("Saved, with 1 error in the deck")
    assert "sideways" in (workspace / "concierge/PROMPT.md").read_text()
    page.evaluate(
        f"window.gambitEditor.replaceRange('startMode = \"assistant\"', {{line: {line}, ch: 0}},"
        f" {{line: {line}, ch: {len(lines[line]) + 2}}})"
    )
    page.locator(".CodeMirror textarea").focus()
    page.keyboard.press("Control+S")
    expect(page.locator("#save-status")).to_have_text("Saved.")
    expect(page.locator("#problems")).to_contain_text("The deck loads cleanly.")
    # The new deck's scenario runs from the Test tab with no restart.
    page.goto(url + "/test")
    page.select_option(
        "#scenario-choice", value="concierge/PROMPT.md|concierge/scenarios/first_visit/PROMPT.md"
    )
    page.fill("#scenario-form input[name=maxTurns]", "2")
    page.click("#run-scenario")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    expect(page.locator("#status")).to_have_text("completed", timeout=30_000)
    Path("/tmp/gambit-e2e").mkdir(exist_ok=True)


def test_an_edit_on_disk_shows_up_in_the_open_page(page, build_url):
    url, workspace = build_url
    target = workspace / "support" / "INTENT.md"
    target.write_text("# Intent\n\nFirst version.\n")
    page.goto(f"{url}/build/file?path=support/INTENT.md&deck=support/PROMPT.md")
    page.wait_for_function("() => !!window.gambitEditor")
    assert "First version." in page.evaluate("window.gambitEditor.getValue()")
    page.wait_for_timeout(500)  # the page's websocket is connected
    target.write_text("# Intent\n\nChanged by another editor.\n")
    page.wait_for_function(
        "() => window.gambitEditor.getValue().includes('Changed by another editor.')",
        timeout=5_000,
    )
    expect(page.locator("#save-status")).to_have_text("Reloaded: the file changed on disk.")


def test_the_build_assistant_patches_the_deck_and_the_tab_shows_and_checks_it(page, build_url):
    url, workspace = build_url
    page.goto(f"{url}/build/file?path=support/PROMPT.md&deck=support/PROMPT.md")
    page.wait_for_function("() => !!window.gambitEditor")
    page.fill(
        "#assistant-message",
        'Please replace "Keep answers short" with "Keep answers brief" in PROMPT.md',
    )
    page.select_option("#assistant-grant", "write")
    page.click("#assistant-send")
    diff = page.locator(".assistant-change pre.diff")
    expect(diff).to_contain_text("+- Keep answers brief, kind and concrete.", timeout=30_000)
    # the change on disk reaches the editor, and the deck is checked again
    page.wait_for_function(
        "() => window.gambitEditor.getValue().includes('Keep answers brief')", timeout=10_000
    )
    expect(page.locator("#problems")).to_contain_text("The deck loads cleanly.")
    page.get_by_role("button", name="Undo this change").click()
    page.wait_for_function(
        "() => window.gambitEditor.getValue().includes('Keep answers short')", timeout=10_000
    )
    assert "Keep answers short" in (workspace / "support/PROMPT.md").read_text()
