import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from decks_app.models import Session
from gambit.core import state_from_dict

from .conftest import chat_session
from .test_trace_view import EVENTS, _with_events

pytestmark = pytest.mark.django_db
REF = "msg-000000000000000000000003"


def test_it_exports_the_saved_state_with_feedback_and_notes(client, workspace):
    s = chat_session(workspace)
    client.post(f"/test/{s.id}/feedback/{REF}", {"score": "-1"})
    client.post(f"/test/{s.id}/feedback/{REF}", {"reason": "terse"})
    client.post(f"/test/{s.id}/notes", {"notes": "n", "score": "1"})
    r = client.get(f"/test/{s.id}/export/state.json")
    assert r.status_code == 200 and "attachment" in r["Content-Disposition"]
    state = json.loads(r.content)
    assert state_from_dict(state).run_id  # the engine reads it
    assert state["messages"][-1]["content"] == "Hi <b>there</b>"
    assert state["messageRefs"][2]["id"] == REF
    assert state["feedback"][0]["score"] == -1 and state["feedback"][0]["reason"] == "terse"
    assert state["notes"]["text"] == "n" and state["conversationScore"]["score"] == 1


def test_it_exports_the_trace_as_json_lines(client, workspace):
    s = _with_events(workspace)
    r = client.get(f"/test/{s.id}/export/trace.jsonl")
    lines = b"".join(r.streaming_content).decode().splitlines()
    assert [json.loads(x)["type"] for x in lines] == [e["type"] for e in EVENTS]


def test_an_exported_session_imports_back_with_its_trace(client, workspace):
    s = _with_events(workspace)
    client.post(f"/test/{s.id}/feedback/{REF}", {"score": "2"})
    state = client.get(f"/test/{s.id}/export/state.json").content
    trace = b"".join(client.get(f"/test/{s.id}/export/trace.jsonl").streaming_content)
    r = client.post(
        "/test/import?format=json",
        {
            "deck": "support/PROMPT.md",
            "state": SimpleUploadedFile("s.json", state),
            "trace": SimpleUploadedFile("t.jsonl", trace),
        },
    )
    assert r.status_code == 201
    new = Session.objects.get(pk=r.json()["id"])
    assert new.origin == "import" and new.messages == s.messages
    assert new.events.count() == len(EVENTS)
    assert new.feedback.get().score == 2
    data = client.get(f"/test/{new.id}.json").json()
    assert data["conversation"][1]["feedback"]["score"] == 2


def test_it_rejects_bad_imports(client, workspace):
    bad = [
        {"state": SimpleUploadedFile("s.json", b"[1]")},
        {"state": SimpleUploadedFile("s.json", b"not json")},
        {"trace": SimpleUploadedFile("t.jsonl", b'{"no": "type"}\n')},
        {},
    ]
    for files in bad:
        r = client.post("/test/import?format=json", {"deck": "support/PROMPT.md", **files})
        assert r.status_code == 400, files
    assert not Session.objects.exists()


def test_it_404s_exports_of_unknown_sessions(client, workspace):
    assert client.get("/test/session-0123456789abcdef01234567/export/state.json").status_code == 404
    assert client.get("/test/x/export/trace.jsonl").status_code == 404
