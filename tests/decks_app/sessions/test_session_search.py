"""Issue 26: old sessions stayed unreachable (the list stopped at 200 rows, silently) and the
search matched ids, deck labels and models only. Every session is reachable by keyset pages
that do not shift when sessions start, and the search looks into the conversations through
the database's full-text index (here SQLite's FTS5; PostgreSQL in test_session_search_pg.py)."""

from __future__ import annotations

import pytest

from decks_app.models import Run, Session
from decks_app.sessions.actions import create_session
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db


def _all_pages(client, url: str) -> list[list[str]]:
    pages = []
    while url:
        data = client.get(url).json()
        pages.append([s["id"] for s in data["sessions"]])
        url = data["page"]["olderUrl"]
    return pages


def test_every_session_is_reachable_page_by_page(client, workspace):
    made = {create_session(workspace, "hello/deck.py").id for _ in range(230)}
    pages = _all_pages(client, "/test.json")
    assert [len(p) for p in pages] == [50, 50, 50, 50, 30]
    seen = [sid for page in pages for sid in page]
    assert len(seen) == len(set(seen)) == 230 and set(seen) == made


def test_pages_do_not_shift_when_sessions_start(client, workspace):
    for _ in range(120):
        create_session(workspace, "hello/deck.py")
    first = client.get("/test.json").json()
    for _ in range(7):  # started while the reader looks at the first page
        create_session(workspace, "hello/deck.py")
    second = client.get(first["page"]["olderUrl"]).json()
    ordered = list(
        Session.objects.exclude(id__in=[s["id"] for s in first["sessions"]])
        .filter(created_at__lte=first["sessions"][-1]["createdAt"])
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
    )
    assert [s["id"] for s in second["sessions"]] == ordered[:50]
    # "newer" from the second page is the first page as it was read; newer still are the
    # seven started since, and that is the newest page, full
    back = client.get(second["page"]["newerUrl"]).json()
    assert back["sessions"] == first["sessions"]
    top = client.get(back["page"]["newerUrl"]).json()
    assert top["sessions"][0]["id"] == Session.objects.order_by("-created_at", "-id")[0].id
    assert top["page"]["newer"] is None and len(top["sessions"]) == 50


def test_the_page_links_keep_the_filters(client, workspace):
    for _ in range(60):
        chat_session(workspace, user="about the order A1002 please")
    html = client.get("/test?q=A1002").content.decode()
    assert 'rel="next"' in html and "q=A1002" in html and "before=" in html
    assert 'rel="prev"' not in html  # nothing newer than the newest page


def test_a_broken_cursor_is_a_400_with_a_way_back(client, workspace):
    response = client.get("/test?before=not-a-cursor&q=x")
    assert response.status_code == 400
    assert "start again from the newest" in response.content.decode()
    assert client.get("/test.json?after=%00%01").status_code == 400


def test_the_search_finds_words_of_the_conversation_and_shows_the_line(client, workspace):
    wanted = chat_session(
        workspace,
        user="Hi, I have a complaint about order Q1002.\nIt came <b>broken</b>.",
        reply="Sorry to hear that.",
    )
    chat_session(workspace, user="Where is my parcel?", reply="On its way.")
    for q in ("Q1002", "complaint", "q1002 complain", "BROKEN"):
        data = client.get("/test.json", {"q": q}).json()
        assert [s["id"] for s in data["sessions"]] == [wanted.id], q
    match = client.get("/test.json", {"q": "Q1002"}).json()["sessions"][0]["match"]
    assert match["text"].startswith("Hi, I have a complaint about order Q1002.")
    assert "\n" not in match["text"]  # the matching line, not the conversation
    start, end = match["highlights"][0]
    assert match["text"][start:end] == "Q1002"
    html = client.get("/test", {"q": "broken"}).content.decode()
    assert "It came &lt;b&gt;<mark>broken</mark>&lt;/b&gt;." in html
    assert "<b>broken</b>" not in html


def test_the_search_leaves_out_the_system_prompt(client, workspace):
    chat_session(workspace, user="hello there")  # its system message is "sys"
    assert client.get("/test.json", {"q": "sys"}).json()["sessions"] == []


def test_the_index_follows_changes_and_deletions(client, workspace):
    session = chat_session(workspace, user="first words")
    session.messages = [*session.messages, {"role": "user", "content": "zebra crossing"}]
    session.save()
    assert [s["id"] for s in client.get("/test.json?q=zebra").json()["sessions"]] == [session.id]
    Session.objects.filter(pk=session.pk).update(messages=[{"role": "user", "content": "none"}])
    assert client.get("/test.json?q=zebra").json()["sessions"] == []
    session.delete()
    assert client.get("/test.json?q=none").json()["sessions"] == []


def test_items_and_tool_output_are_searched(client, workspace):
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    session.items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hola"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "ticket T-778 opened"},
    ]
    session.save()
    for q in ("hola", "T-778"):
        assert [s["id"] for s in client.get("/test.json", {"q": q}).json()["sessions"]] == [
            session.id
        ], q


def test_query_syntax_is_never_passed_through(client, workspace):
    chat_session(workspace, user='quote " and star * and NEAR(a b) OR -x')
    for q in ['"', "*", "NEAR(", "a OR", ")(", "-x", "'; DROP TABLE x; --"]:
        assert client.get("/test.json", {"q": q}).status_code == 200, q


def test_the_status_filter_runs_in_the_database(client, workspace):
    done = [chat_session(workspace) for _ in range(3)]
    for s in done:
        Run.objects.create(session=s, kind="manual", status="completed")
    failed = chat_session(workspace)
    Run.objects.create(session=failed, kind="manual", status="completed")
    Run.objects.create(session=failed, kind="manual", status="failed")
    for _ in range(60):  # newer, idle: the old code looked at 2 x 200 rows only
        create_session(workspace, "hello/deck.py")
    ids = [s["id"] for s in client.get("/test.json?status=failed").json()["sessions"]]
    assert ids == [failed.id]
    done_ids = {s["id"] for s in client.get("/test.json?status=completed").json()["sessions"]}
    assert done_ids == {s.id for s in done}
