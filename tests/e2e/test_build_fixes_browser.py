"""Issue 26's Build tab in Chromium: a broken deck always opens in the editor; the folder
name's pattern compiles and a refused name keeps the form; a highlight leaves its line when
the problem is gone; long titles end in an ellipsis; "Delete deck" looks dangerous; new
decks and added files are confirmed; the assistant on the offline model says what it is
and what it can do. A scratch copy of the examples is served (nothing in the repository
changes)."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def _console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def _create(page, url: str, name: str) -> None:
    page.goto(url + "/build")
    page.fill("#new-deck-name", name)
    page.click("#create-deck")
    page.wait_for_url(re.compile(rf".*/build/file\?path={name}/PROMPT\.md.*"))
    page.wait_for_function("() => !!window.gambitEditor")


def _line_of(page, prefix: str) -> int:
    lines = page.evaluate("window.gambitEditor.getValue()").split("\n")
    return next(i for i, text in enumerate(lines) if text.startswith(prefix))


def _set_line(page, line: int, text: str) -> None:
    page.evaluate(
        "([line, text]) => window.gambitEditor.replaceRange(text, {line, ch: 0},"
        " {line, ch: window.gambitEditor.getLine(line).length})",
        [line, text],
    )


def test_the_folder_name_pattern_compiles_and_a_refused_name_keeps_the_form(page, build_url):
    url, _ = build_url
    errors = _console_errors(page)
    page.goto(url + "/build")
    name = page.locator("#new-deck-name")
    name.fill("a/b")
    assert name.evaluate("el => el.validity.patternMismatch") is True  # the pattern works
    name.fill("my-deck_2")
    assert name.evaluate("el => el.validity.valid") is True
    assert not [e for e in errors if "pattern" in e.lower()], errors
    name.fill("support")  # passes the pattern; the server refuses it (it exists)
    page.click("#create-deck")
    expect(page.locator("#new-deck-error")).to_have_text("A folder named support already exists.")
    expect(page.locator("#new-deck-name")).to_have_value("support")
    expect(page).to_have_url(re.compile(r".*/build$"))
    assert errors == []


def test_a_broken_deck_always_opens_with_its_problems(page, build_url):
    url, _ = build_url
    _create(page, url, "brittle")
    expect(page.locator(".build-notice")).to_contain_text("Created the deck brittle.")
    line = _line_of(page, "startMode")
    _set_line(page, line, 'startMode = "sideways"')
    page.click("#save-file")
    expect(page.locator("#save-status")).to_contain_text("Saved, with 1 error in the deck")
    for rel in ("PROMPT.md", "INTENT.md", "policy/README.md", "scenarios/first_visit/PROMPT.md"):
        response = page.goto(f"{url}/build/file?path=brittle/{rel}&deck=brittle/PROMPT.md")
        assert response is not None and response.status == 200, rel
        expect(page.locator("#problems li.error")).to_contain_text("startMode")
        expect(page.locator("#editor-text")).to_be_attached()
    response = page.goto(f"{url}/build/deck?path=brittle/PROMPT.md")
    assert response is not None and response.status == 200
    expect(page.locator("#problems li.error")).to_contain_text("startMode")


def test_a_highlight_leaves_when_its_problem_is_fixed_after_lines_moved(page, build_url):
    url, _ = build_url
    _create(page, url, "shifty")
    line = _line_of(page, "startMode")
    _set_line(page, line, 'startMode = "sideways"')
    expect(page.locator(".CodeMirror .problem-line-error")).to_have_count(1)
    # In one edit: a line typed above it (the highlighted line moves down) and the fix.
    page.evaluate(
        """(line) => { const ed = window.gambitEditor; ed.operation(() => {
            ed.replaceRange('startMode = "assistant"', {line, ch: 0},
                            {line, ch: ed.getLine(line).length});
            ed.replaceRange('# a note\\n', {line: 1, ch: 0});
        }); }""",
        line,
    )
    expect(page.locator("#problems")).to_contain_text("The deck loads cleanly.")
    expect(page.locator(".CodeMirror .problem-line-error")).to_have_count(0)


def test_long_titles_end_in_an_ellipsis_and_delete_looks_dangerous(page, build_url):
    url, _ = build_url
    name = "a_very_long_deck_folder_name_that_goes_on_and_on_for_ever_x"
    _create(page, url, name)
    page.goto(f"{url}/build/deck?path={name}/PROMPT.md")
    title = page.locator("h1.deck-title")
    expect(title).to_have_attribute("title", f"{name}/PROMPT.md")
    box = title.evaluate(
        "el => { const p = el.closest('.panel').getBoundingClientRect();"
        " const r = el.getBoundingClientRect();"
        " return {inside: r.right <= p.right + 0.5, clipped: el.scrollWidth > el.clientWidth,"
        " ellipsis: getComputedStyle(el).textOverflow}; }"
    )
    assert box == {"inside": True, "clipped": True, "ellipsis": "ellipsis"}
    delete = page.locator("#delete-deck").evaluate("el => getComputedStyle(el).backgroundColor")
    add = page.locator("#scaffold").evaluate("el => getComputedStyle(el).backgroundColor")
    assert delete != add and delete == "rgb(176, 0, 32)"
    page.select_option("#scaffold-kind", "scenario")
    page.fill("#scaffold-name", "angry_customer")
    page.click("#scaffold")
    notice = page.locator(".build-notice")
    expect(notice).to_contain_text(f"Added {name}/scenarios/angry_customer/PROMPT.md.")
    notice.get_by_role("link").click()
    page.wait_for_url(re.compile(r".*/build/file\?path=.*angry_customer/PROMPT\.md.*"))


def test_the_offline_assistant_says_which_model_answered_and_what_it_can_do(page, build_url):
    url, workspace = build_url
    before = (workspace / "support/PROMPT.md").read_text()
    page.goto(f"{url}/build/file?path=support/PROMPT.md&deck=support/PROMPT.md")
    page.fill("#assistant-message", "Make the greeting friendlier please")
    page.select_option("#assistant-grant", "write")
    page.click("#assistant-send")
    expect(page.locator("#assistant-answered-by")).to_contain_text("offline/demo", timeout=30_000)
    reply = page.locator("#assistant-conversation li.assistant-assistant").last
    expect(reply).to_contain_text("offline demo model")
    expect(reply).to_contain_text('replace "old text" with "new text" in PROMPT.md')
    expect(reply).not_to_contain_text("not found")
    assert (workspace / "support/PROMPT.md").read_text() == before


def test_leaving_with_unsaved_edits_asks_first(page, build_url):
    # A new user typed, clicked "Test this deck", and the edit was gone without a word.
    url, workspace = build_url
    page.goto(f"{url}/build/file?path=support/PROMPT.md&deck=support/PROMPT.md")
    page.wait_for_function("() => !!window.gambitEditor")
    asked: list[str] = []

    def answer(dialog) -> None:
        asked.append(dialog.type)
        dialog.dismiss()  # stay on the page

    page.on("dialog", answer)
    page.evaluate("window.gambitEditor.replaceRange('unsaved words ', {line: 0, ch: 0})")
    page.click("body")  # a gesture: browsers ask only on a page the user has touched
    page.evaluate("location.href = '/test'")
    page.wait_for_timeout(500)
    assert asked == ["beforeunload"]
    assert "/build/file" in page.url
    assert page.evaluate("window.gambitEditor.getValue()").startswith("unsaved words ")
    # once saved, leaving asks nothing
    page.evaluate("window.gambitEditor.focus()")
    page.keyboard.press("Control+S")
    deadline = 50
    while not (workspace / "support/PROMPT.md").read_text().startswith("unsaved words "):
        deadline -= 1
        assert deadline, "the save did not reach the file"
        page.wait_for_timeout(100)
    page.wait_for_timeout(300)  # the save's answer marks the editor clean
    page.evaluate("location.href = '/test'")
    page.wait_for_url(re.compile(r".*/test$"))
    assert asked == ["beforeunload"]
