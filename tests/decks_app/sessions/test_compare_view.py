import pytest

from decks_app.models import Run, Session
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db


def _pair(workspace, replay_reply, *, status="completed", error="", user="q"):
    source = chat_session(workspace, reply="same answer", user="q")
    Run.objects.create(session=source, kind="manual", status="completed", params={"message": "q"})
    replay = chat_session(workspace, reply=replay_reply, user=user)
    replay.origin, replay.source = "replay", source
    replay.save()
    Run.objects.create(session=replay, kind="replay", status=status, error=error)
    return source, replay


def test_it_shows_a_replay_beside_its_original(client, workspace):
    source, replay = _pair(workspace, "same answer")
    data = client.get(f"/test/{replay.id}/compare?format=json").json()
    assert data == client.get(f"/test/{replay.id}/compare.json").json()
    assert (data["source"], data["identical"], len(data["rows"])) == (source.id, True, 2)
    assert (data["verdict"], data["differences"], data["firstDifference"]) == (
        "identical",
        [],
        None,
    )
    assert data["status"] == {"original": "completed", "replay": "completed", "replayError": None}
    assert data["turns"] == {"original": 1, "replay": 1}
    html = client.get(f"/test/{replay.id}/compare").content.decode()
    assert "identical" in html and f"/test/{source.id}" in html
    assert 'id="differences"' not in html


def test_it_flags_differences_and_escapes(client, workspace):
    _, replay = _pair(workspace, "<b>other</b>")
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert data["identical"] is False and [r["same"] for r in data["rows"]] == [True, False]
    assert data["verdict"] == "different" and data["firstDifference"] == 1
    (difference,) = data["differences"]
    assert difference["kind"] == "message" and difference["index"] == 1
    assert "Row 2 differs" in difference["message"] and "<b>other</b>" in difference["message"]
    html = client.get(f"/test/{replay.id}/compare").content.decode()
    assert "&lt;b&gt;other&lt;/b&gt;" in html and "different" in html and "<b>other" not in html
    assert 'class="differs first-difference"' in html and 'href="#row-1"' in html


@pytest.mark.parametrize(
    ("status", "error", "sentence"),
    [
        ("failed", "deck PROMPT.md made call 2, but the trace recorded only 1 <call>", "failed"),
        ("canceled", "Run canceled", "canceled"),
        ("interrupted", "", "interrupted"),
    ],
)
def test_a_replay_that_did_not_complete_is_never_identical(
    client, workspace, status, error, sentence
):
    # The same conversation, but the replay ended badly: not "identical".
    _, replay = _pair(workspace, "same answer", status=status, error=error)
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert all(r["same"] for r in data["rows"])
    assert data["identical"] is False and data["verdict"] == "different"
    first = data["differences"][0]
    assert first["kind"] == "status" and first["replay"] == status
    assert first["message"].startswith((f"The replay was {sentence}", f"The replay {sentence}"))
    if error:
        assert error in first["message"]
    html = client.get(f"/test/{replay.id}/compare").content.decode()
    assert ">different</span>" in html and "identical" not in html.split('id="verdict"')[1][:80]
    if "<" in error:  # the error, like all model text, is escaped
        assert "&lt;call&gt;" in html and "<call>" not in html


def test_missing_turns_are_named(client, workspace):
    source, replay = _pair(workspace, "same answer", status="failed", error="exhausted")
    source.messages += [
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
    ]
    source.message_refs += [
        {"id": "msg-000000000000000000000004", "role": "user"},
        {"id": "msg-000000000000000000000005", "role": "assistant"},
    ]
    source.save()
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert data["turns"] == {"original": 2, "replay": 1}
    assert [d["kind"] for d in data["differences"]] == ["status", "missing"]
    missing = data["differences"][1]
    assert (missing["index"], missing["count"], missing["turns"]) == (2, 2, 1)
    assert missing["message"] == (
        "The replay is missing 2 rows of the original from row 3 on (1 of 2 turns)."
    )
    assert data["firstDifference"] == 2 and [r["replay"] for r in data["rows"][2:]] == [None, None]


def test_a_replay_in_progress_is_pending_and_the_page_follows_its_socket(client, workspace):
    _, replay = _pair(workspace, "same answer", status="running")
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert (data["verdict"], data["identical"]) == ("pending", False)
    assert data["differences"][0]["message"] == "The replay is still running."
    html = client.get(f"/test/{replay.id}/compare", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="compare-result"')
    assert "every 1s" not in html and "replay in progress" in html
    page = client.get(f"/test/{replay.id}/compare").content.decode()
    assert f'ws-connect="/ws/sessions/{replay.id}/" data-live-view="compare"' in page
    Run.objects.filter(session=replay).update(status="completed")
    html = client.get(f"/test/{replay.id}/compare", HTTP_HX_REQUEST="true").content.decode()
    assert ">identical</span>" in html


def test_it_renders_the_result_for_htmx(client, workspace):
    _, replay = _pair(workspace, "x")
    html = client.get(f"/test/{replay.id}/compare", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="compare-result"')
    assert '<table class="sessions" id="compare-rows">' in html and "<html" not in html


def test_it_404s_for_non_replays_and_bad_ids_and_405s_posts(client, workspace):
    source, replay = _pair(workspace, "x")
    assert client.get(f"/test/{source.id}/compare").status_code == 404
    assert client.get("/test/session-0123456789abcdef01234567/compare").status_code == 404
    assert client.get("/test/nope/compare.json").status_code == 404
    assert client.get("/test/nope/compare.json").json() == {"error": "no such session"}
    assert client.post(f"/test/{replay.id}/compare").status_code == 405
    assert client.post(f"/test/{replay.id}/compare.json").status_code == 405
    # a session with a source that is not a replay of it (a grading session) is no replay
    grading = Session.objects.create(
        workspace=workspace, deck_path="support/graders/tone/PROMPT.md", origin="grade"
    )
    grading.source = source
    grading.save()
    assert client.get(f"/test/{grading.id}/compare.json").status_code == 404


def test_the_session_page_links_compare_only_for_replays(client, workspace):
    source, replay = _pair(workspace, "x")
    assert 'id="compare-link"' in client.get(f"/test/{replay.id}").content.decode()
    assert 'id="compare-link"' not in client.get(f"/test/{source.id}").content.decode()


def _with_tool_result(session, payload, run_id):
    import json

    envelope = {"runId": run_id, "actionCallId": "call-1", "parentActionCallId": run_id + "-a"}
    session.messages = session.messages[:2] + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call-1", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
            ],
        },
        {"role": "tool", "name": "lookup", "content": json.dumps({**envelope, "payload": payload})},
        session.messages[2],
    ]
    session.message_refs = None
    session.save()


def test_tool_rows_match_whatever_ids_each_run_made(client, workspace):
    source, replay = _pair(workspace, "same answer")
    _with_tool_result(source, {"found": True}, "run-aaaaaaaaaaaaaaaaaaaaaaaa")
    _with_tool_result(replay, {"found": True}, "run-bbbbbbbbbbbbbbbbbbbbbbbb")
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert [r["original"]["kind"] for r in data["rows"]] == [
        "user",
        "tool_call",
        "tool_result",
        "assistant",
    ]
    assert data["verdict"] == "identical", data["differences"]
    _with_tool_result(replay, {"found": False}, "run-bbbbbbbbbbbbbbbbbbbbbbbb")
    data = client.get(f"/test/{replay.id}/compare.json").json()
    assert data["verdict"] == "different" and data["firstDifference"] == 2
    assert data["differences"][0]["message"].startswith("Row 3 differs: the original has tool")
