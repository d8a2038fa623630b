"""Issue 26, in Chromium against `gambit serve`: the sessions list and the Grade tab's picker
search the conversations as you type (no Enter), show the matching line with the match
marked, and an unknown URL is one sentence and the tabs."""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect


def _chat(page, live_url: str, text: str) -> str:
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "offline/echo")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    page.fill("textarea[name=message]", text)
    page.click("#send")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    return page.url.rsplit("/", 1)[-1]


def _console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def test_search_as_you_type_in_the_sessions_list_and_the_grade_picker(page, live_url):
    wanted = _chat(page, live_url, "Hello, my order A1002 arrived with a <b>complaint</b> slip")
    other = _chat(page, live_url, "Where is my parcel, please?")
    errors = _console_errors(page)

    page.goto(live_url + "/test")
    page.locator("input[name=q]").press_sequentially("a1002", delay=40)  # no Enter
    rows = page.locator("#sessions-table tbody tr[data-session]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-session", wanted)
    expect(rows.first.locator(".search-match mark").first).to_have_text("A1002")
    expect(rows.first.locator(".search-match")).to_contain_text("<b>complaint</b> slip")
    expect(page).to_have_url(re.compile(r".*/test\?.*q=a1002"))

    page.goto(live_url + "/grade")
    page.locator("#grade-session-search").press_sequentially("parcel", delay=40)
    choices = page.locator("#grade-session-choices li[data-session]")
    expect(choices).to_have_count(1)
    expect(choices.first).to_have_attribute("data-session", other)
    expect(choices.first.locator("mark")).to_have_text("parcel")
    choices.first.locator("a").click()
    expect(page.locator("#grade-selected")).to_contain_text(other)
    expect(page.locator("#grade-form input[name=session]")).to_have_value(other)
    assert errors == []


def test_an_unknown_url_is_one_sentence_and_the_tabs(page, live_url):
    response = page.goto(live_url + "/no/such/page")
    assert response is not None and response.status == 404
    expect(page.locator("#error")).to_have_text("There is no page at this address.")
    body = page.content()
    assert "admin/" not in body and "URLconf" not in body
    page.get_by_role("link", name="Build").first.click()
    expect(page).to_have_url(re.compile(r".*/build$"))


def test_the_compare_page_fits_a_1440_pixel_window(page, live_url):
    page.set_viewport_size({"width": 1440, "height": 900})
    long_word = "order-" + "A1002x" * 120  # one unbroken token, as JSON or a URL would be
    source = _chat(page, live_url, f"Please look up {long_word} and the refund policy")
    page.goto(f"{live_url}/test/{source}/rerun")
    page.click("#rerun")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    replay = page.url.rsplit("/", 1)[-1]
    assert replay != source
    page.goto(f"{live_url}/test/{replay}/compare")
    expect(page.locator("#verdict")).not_to_have_text("replay in progress", timeout=20_000)
    expect(page.locator("#compare-rows tbody")).to_contain_text("A1002x")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1440, width


def test_older_and_newer_pages_and_the_status_filter(page, live_url):
    _chat(page, live_url, "a finished chat, for the status filter")
    page.goto(live_url + "/test")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for _ in range(55):
        made = page.request.post(
            live_url + "/test/new?format=json",
            form={"deck": "hello/deck.py"},
            headers={"X-CSRFToken": token, "Referer": live_url + "/test"},
        )
        assert made.status == 201, made.text()
    errors = _console_errors(page)
    page.goto(live_url + "/test")
    rows = page.locator("#sessions-table tbody tr[data-session]")
    expect(rows).to_have_count(50)
    first_page = rows.evaluate_all("rs => rs.map(r => r.dataset.session)")
    page.get_by_role("link", name="Older →").click()
    expect(page).to_have_url(re.compile(r".*/test\?before=.+"))
    expect(rows.first).not_to_have_attribute("data-session", first_page[0])
    older = rows.evaluate_all("rs => rs.map(r => r.dataset.session)")
    assert not set(older) & set(first_page)
    page.get_by_role("link", name="← Newer").click()
    expect(rows.first).to_have_attribute("data-session", first_page[0])
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.session)") == first_page
    page.select_option("select[name=status]", "completed")
    expect(page).to_have_url(re.compile(r".*status=completed"))
    expect(rows.first.locator(".badge")).to_have_text("completed")
    assert errors == []


def test_gambit_serve_with_debug_on_still_hides_its_routes(tmp_path):
    """GAMBIT_DEBUG=1 turns Django's debug pages on: an unknown URL still gets our page."""
    import os
    import urllib.error
    import urllib.request

    from tests.e2e.conftest import _free_port, serve_simulator, stop

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"GAMBIT_SIM_DB": str(tmp_path / "sim.sqlite3"), "GAMBIT_DEBUG": "1"})
    port = _free_port()
    with (tmp_path / "serve.log").open("w") as log:
        proc = serve_simulator(env, port, log)
        try:
            for path in ("/no/such/page", "/admin/nope", "/test/nope/trace/calls/9"):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
                    raise AssertionError(f"{path} answered 200")
                except urllib.error.HTTPError as exc:
                    body = exc.read().decode()
                    assert exc.code == 404, (path, exc.code)
                    assert "URLconf" not in body and "admin/" not in body, path
                    assert "Traceback" not in body and "DEBUG = True" not in body, path
        finally:
            stop(proc)


def test_hello_greets_its_context_then_each_message(page, live_url):
    """Issue 26: Hello ignored its context field ("Ada" gave "expects a user message")."""
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "hello/deck.py")
    field = page.locator("#session-context [name=ctx]")
    expect(field).to_be_visible()
    page.wait_for_load_state("networkidle")  # the deck's context form has been swapped in
    field.fill("Ada")
    expect(field).to_have_value("Ada")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    expect(page.locator("#conversation")).to_contain_text("Hello, Ada!", timeout=20_000)
    expect(page.locator("main")).not_to_contain_text("expects a user message")
    page.fill("textarea[name=message]", "go")
    page.click("#send")
    expect(page.locator("#conversation")).to_contain_text("Hello, go!", timeout=20_000)


def test_a_session_cannot_start_before_the_picked_decks_context_fields_arrive(page, live_url):
    """Picking a deck fetches its context fields; until they replace the previous deck's, the
    Start button is disabled, so a quick click never sends one deck's fields for another."""
    page.goto(live_url + "/test")
    held = []
    page.route("**/test/context-form*", lambda route: held.append(route))  # it waits here
    page.select_option("select[name=deck]", "support/PROMPT.md")
    expect(page.locator("#new-session")).to_be_disabled()
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#new-session")).to_be_enabled()
    page.fill("input[name=model]", "offline/echo")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    session = page.request.get(page.url + ".json").json()
    assert "support/PROMPT.md" in json.dumps(session)


def test_the_session_header_names_the_decks_model_or_that_a_compute_deck_has_none(page, live_url):
    """Issue 26: before its first run a session's header said "deck model" whatever the
    deck; it names the deck's model, and says a compute deck (Hello) has none."""
    header = page.locator("#session-model")
    for deck, expected in [
        # the model that will answer: the deck's, or the demo model naming the deck's
        ("support/PROMPT.md", re.compile(r"will answer.*|.*openrouter/openai/gpt-4o-mini.*")),
        ("hello/deck.py", "no model (compute deck)"),
    ]:
        page.goto(live_url + "/test")
        page.select_option("select[name=deck]", deck)
        page.click("#new-session")  # enabled once the deck's context fields have arrived
        page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
        expect(header).to_have_text(expected)
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    expect(header).to_contain_text("openrouter/openai/gpt-4o-mini")
    expect(header).to_contain_text("will answer")


def test_the_session_header_follows_the_model_that_answered_without_a_reload(page, live_url):
    """Seen on a fresh clone with no key: the header kept naming the deck's model after the
    offline demo model had answered (the JSON twin and the trace said offline). The header's
    facts are now swapped in with the rest when a run ends."""
    page.goto(live_url + "/test")
    page.select_option("select[name=deck]", "support/PROMPT.md")
    page.fill("input[name=model]", "offline/echo")
    page.click("#new-session")
    page.wait_for_url(re.compile(r".*/test/session-[0-9a-f]{24}$"))
    header = page.locator("#session-model")
    expect(header).to_have_text("offline/echo will answer (offline)")  # nothing answered yet
    page.fill("textarea[name=message]", "where is my parcel")
    page.click("#send")
    expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
    expect(header).to_have_text("offline/echo (offline)")
    assert page.request.get(page.url + ".json").json()["offline"] is True
