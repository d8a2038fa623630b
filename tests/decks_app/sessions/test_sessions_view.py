from pathlib import Path

import pytest

from decks_app.models import Run, Session
from decks_app.sessions.actions import create_session
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db


def test_it_lists_sessions_newest_first(client, workspace):
    a = chat_session(workspace)
    b = chat_session(workspace)
    r = client.get("/test")
    assert r.status_code == 200
    html = r.content.decode()
    assert html.index(b.id) < html.index(a.id)
    data = client.get("/test?format=json").json()
    assert [s["id"] for s in data["sessions"]] == [b.id, a.id]
    assert client.get("/test.json").json()["sessions"] == data["sessions"]
    assert {d["path"] for d in data["decks"]} >= {"hello/deck.py", "support/PROMPT.md"}
    assert any(p["name"] == "offline" and p["configured"] for p in data["providers"])


def test_it_filters_by_status_and_deck(client, workspace):
    s = chat_session(workspace)
    Run.objects.create(session=s, status="failed", model="offline/echo")
    other = chat_session(workspace)
    data = client.get("/test?format=json&status=failed").json()
    assert [x["id"] for x in data["sessions"]] == [s.id]
    assert data["sessions"][0]["status"] == "failed"
    data = client.get("/test?format=json&deck=hello/deck.py").json()
    assert data["sessions"] == []
    data = client.get(f"/test?format=json&q={other.id[-6:]}").json()
    assert [x["id"] for x in data["sessions"]] == [other.id]


def test_it_renders_only_the_table_for_htmx(client, workspace):
    chat_session(workspace)
    r = client.get("/test", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<div id="sessions-list">\n  <table id="sessions-table"')
    assert "<html" not in html


def test_it_creates_a_session_and_redirects(client, workspace):
    r = client.post(
        "/test/new", {"deck": "support/PROMPT.md", "context": '{"customerName": "Ada"}'}
    )
    assert r.status_code == 302
    session = Session.objects.get()
    assert r["Location"] == f"/test/{session.id}"
    assert session.context == {"customerName": "Ada", "tier": "standard"}  # validated, defaults in
    assert not session.runs.exists()  # startMode user: waits for the user


def test_it_rejects_decks_outside_the_workspace(client, workspace):
    for deck in ["../pyproject.toml", "/etc/passwd", "nope/PROMPT.md", ""]:
        r = client.post("/test/new?format=json", {"deck": deck})
        assert r.status_code == 400, deck
    assert not Session.objects.exists()


def test_it_enforces_csrf(csrf_client, workspace):
    assert csrf_client.post("/test/new", {"deck": "support/PROMPT.md"}).status_code == 403
    assert not Session.objects.exists()


def test_it_refuses_get_on_create(client):
    assert client.get("/test/new").status_code == 405


@pytest.mark.parametrize(
    ("form", "message"),
    [
        (
            {"deck": "support/PROMPT.md", "ctx__json": "[" * 50000 + "]" * 50000},
            "nested too deeply",
        ),
        ({"deck": "support/PROMPT.md", "context": "[" * 50000 + "]" * 50000}, "nested too deeply"),
        ({"deck": "x" * 5000}, "no deck at"),
        ({"deck": "support/actions/order_status.py"}, "no deck at"),  # a file, not a listed deck
    ],
)
def test_hostile_session_forms_get_a_400_and_one_sentence(client, workspace, form, message):
    response = client.post("/test/new?format=json", form)
    assert response.status_code == 400 and message in response.json()["error"]
    assert not Session.objects.exists()


def test_a_folder_linking_outside_the_workspace_is_skipped_with_a_warning(tmp_path, client, caplog):
    import shutil

    from django.test import override_settings

    root = tmp_path / "ws"
    shutil.copytree(Path(__file__).resolve().parents[3] / "examples" / "support", root / "support")
    outside = tmp_path / "outside" / "evil"
    shutil.copytree(Path(__file__).resolve().parents[3] / "examples" / "hello", outside)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    with override_settings(GAMBIT_WORKSPACE=str(root)), caplog.at_level("WARNING"):
        for url in ("/test", "/test.json", "/build", "/grade"):
            assert client.get(url).status_code == 200, url
        listed = [d["path"] for d in client.get("/build.json").json()["decks"]]
        assert listed == ["support/PROMPT.md"]
        r = client.post("/test/new?format=json", {"deck": "linked/deck.py"})
        assert r.status_code == 400
    assert "skipped linked: it links to" in caplog.text and "outside the workspace" in caplog.text


def test_rows_are_named_by_their_first_user_message_or_summary(client, workspace):
    # issue 26: names, not ids; relative times with the exact time on hover
    plain = chat_session(workspace)
    plain.messages = [
        {"role": "system", "content": "You are a support bot."},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": [{"type": "input_text", "text": "Where is  order A1002?"}]},
    ]
    plain.save()
    titled = chat_session(workspace)
    titled.messages = [{"role": "user", "content": "My parcel is <late>, " + "very " * 60}]
    titled.meta = {"summary": {"text": "Late parcel complaint", "model": "m"}}
    titled.save()
    empty = create_session(workspace, "support/PROMPT.md")
    # a user message with no content (a /v1 call with input ""): named by its deck, not "null"
    contentless = chat_session(workspace)
    contentless.messages = [{"role": "user", "content": None}]
    contentless.save()
    rows = {r["id"]: r for r in client.get("/test.json").json()["sessions"]}
    assert rows[contentless.id]["title"] == contentless.deck_label
    assert (rows[plain.id]["title"], rows[plain.id]["preview"]) == ("Where is order A1002?", None)
    assert rows[titled.id]["title"] == "Late parcel complaint"
    assert rows[titled.id]["preview"].startswith("My parcel is <late>,")
    assert rows[titled.id]["preview"].endswith("…") and len(rows[titled.id]["preview"]) == 160
    assert rows[empty.id]["title"] == empty.deck_label
    html = client.get("/test").content.decode()
    assert 'class="session-title">Where is order A1002?</a>' in html
    assert "My parcel is &lt;late&gt;," in html and "<late>" not in html
    row = html[html.index(f'data-session="{plain.id}"') :]
    row = row[: row.index("</tr>")]
    assert "<time datetime=" in row and 'title="' in row
    assert "ago" in row or "just now" in row


def test_a_broken_deck_asked_for_says_why_and_where_to_fix_it(tmp_path, client, settings):
    # Before, /test?deck=<broken> preselected the disabled option: Start session sent no deck
    # and answered "no deck at '' in this workspace" on a page of its own.
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken/PROMPT.md").write_text("+++\nlabel = = nope\n+++\nHi.\n")
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok/PROMPT.md").write_text('+++\nmodelParams.model = "offline/echo"\n+++\nHi.\n')
    settings.GAMBIT_WORKSPACE = str(tmp_path)
    html = client.get("/test?deck=broken/PROMPT.md").content.decode()
    assert 'id="broken-deck" role="alert"><code>broken/PROMPT.md</code> does not load' in html
    assert 'href="/build/deck?path=broken/PROMPT.md">Fix it in Build</a>' in html
    assert '<option value="broken/PROMPT.md" disabled>' in html  # offered, never selected
    assert 'id="broken-deck"' not in client.get("/test?deck=ok/PROMPT.md").content.decode()
    # the model suggestions name each model once
    html = client.get("/test").content.decode()
    assert html.count('<option value="offline/echo">') == 1
