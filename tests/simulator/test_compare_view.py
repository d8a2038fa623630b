import pytest

from .conftest import chat_session

pytestmark = pytest.mark.django_db


def _pair(workspace, replay_reply):
    source = chat_session(workspace, reply="same answer", user="q")
    replay = chat_session(workspace, reply=replay_reply, user="q")
    replay.origin, replay.source = "replay", source
    replay.save()
    return source, replay


def test_it_shows_a_replay_beside_its_original(client, workspace):
    source, replay = _pair(workspace, "same answer")
    data = client.get(f"/test/{replay.id}/compare/?format=json").json()
    assert data == client.get(f"/test/{replay.id}/compare.json").json()
    assert (data["source"], data["identical"], len(data["rows"])) == (source.id, True, 2)
    html = client.get(f"/test/{replay.id}/compare/").content.decode()
    assert "identical" in html and f"/test/{source.id}/" in html


def test_it_flags_differences_and_escapes(client, workspace):
    _, replay = _pair(workspace, "<b>other</b>")
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert data["identical"] is False and [r["same"] for r in data["rows"]] == [True, False]
    html = client.get(f"/test/{replay.id}/compare/").content.decode()
    assert "&lt;b&gt;other&lt;/b&gt;" in html and "different" in html


def test_it_renders_the_rows_for_htmx(client, workspace):
    _, replay = _pair(workspace, "x")
    html = client.get(f"/test/{replay.id}/compare/", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<table class="sessions" id="compare-rows">')


def test_it_404s_for_non_replays_and_bad_ids_and_405s_posts(client, workspace):
    source, replay = _pair(workspace, "x")
    assert client.get(f"/test/{source.id}/compare/").status_code == 404
    assert client.get("/test/session-0123456789abcdef01234567/compare/").status_code == 404
    assert client.get("/test/nope/compare.json").status_code == 404
    assert client.post(f"/test/{replay.id}/compare/").status_code == 405
