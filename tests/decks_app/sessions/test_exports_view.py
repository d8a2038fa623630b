import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from decks_app.models import Session
from gambit.core import state_from_dict
from tests.decks_app.conftest import chat_session

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


def test_a_state_of_another_deck_is_refused_naming_both(client, workspace):
    # A support conversation imported as the hello deck's was accepted without a word.
    s = _with_events(workspace)
    state = client.get(f"/test/{s.id}/export/state.json").content
    r = client.post(
        "/test/import?format=json",
        {"deck": "hello/deck.py", "state": SimpleUploadedFile("s.json", state)},
    )
    assert r.status_code == 400
    assert r.json()["error"] == (
        "these files were recorded with the deck support/PROMPT.md, not hello/deck.py; "
        "choose that deck in the form"
    )
    # the same deck recorded elsewhere (a CLI run's absolute path) is the same deck
    moved = json.loads(state)
    moved["meta"]["deckPath"] = "/home/someone/project/support/PROMPT.md"
    r = client.post(
        "/test/import?format=json",
        {
            "deck": "support/PROMPT.md",
            "state": SimpleUploadedFile("s.json", json.dumps(moved).encode()),
        },
    )
    assert r.status_code == 201, r.content


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


def _start(run_id, message, deck="/elsewhere/examples/support/PROMPT.md"):
    return {"type": "run.start", "runId": run_id, "deckPath": deck, "initialUserMessage": message}


def _result(run_id, model, tokens, cost=None, deck="/elsewhere/examples/support/PROMPT.md", **kw):
    usage = {"promptTokens": tokens - 1, "completionTokens": 1, "totalTokens": tokens}
    if cost is not None:
        usage["costUsd"] = cost
    return {
        "type": "model.result",
        "runId": run_id,
        "deckPath": deck,
        "model": model,
        "provider": "openrouter",
        "usage": usage,
        "message": {"role": "assistant", "content": "ok"},
        **kw,
    }


def _end(run_id, tokens, cost=None):
    usage = {"promptTokens": tokens - 1, "completionTokens": 1, "totalTokens": tokens}
    if cost is not None:
        usage["costUsd"] = cost
    return {"type": "run.end", "runId": run_id, "status": "completed", "usage": usage}


def _import(client, **files):
    uploads = {
        name: SimpleUploadedFile(
            f"{name}.txt", content.encode() if isinstance(content, str) else content
        )
        for name, content in files.items()
    }
    r = client.post("/test/import?format=json", {"deck": "support/PROMPT.md", **uploads})
    assert r.status_code == 201, r.content
    return Session.objects.get(pk=r.json()["id"])


def test_an_imported_trace_counts_every_run_it_recorded(client, workspace):
    # Three `gambit run`s appended to one trace file (recorded on another machine): two
    # ended, one was cut off before its run.end; an action deck answered with another model.
    trace = [
        _start("run-a", "one"),
        _result("run-a", "openrouter/openai/gpt-4o", 10, 0.01),
        _result("run-a", "other/action-model", 3, 0.001, parentActionCallId="call-1"),
        _end("run-a", 13, 0.011),
        _start("run-b", "two"),
        _result("run-b", "openrouter/openai/gpt-4o", 20, 0.02),
        _end("run-b", 20, 0.02),
        _start("run-c", "three"),
        _result("run-c", "openrouter/openai/gpt-4o", 5, 0.005),
    ]
    session = _import(client, trace="\n".join(json.dumps(e) for e in trace))
    data = client.get(f"/test/{session.id}.json").json()
    assert data["tokens"] == 38 and data["cost"] == pytest.approx(0.036)
    assert (data["model"], data["offline"]) == ("openrouter/openai/gpt-4o", False)
    (run,) = data["runs"]
    assert run["usage"]["totalTokens"] == 38 and run["usage"]["promptTokens"] == 35
    (row,) = client.get("/test.json").json()["sessions"]
    assert (row["tokens"], row["model"]) == (38, "openrouter/openai/gpt-4o")
    assert row["cost"] == pytest.approx(0.036)
    html = client.get(f"/test/{session.id}").content.decode()
    assert "38 tokens · $0.03600" in html and "openrouter/openai/gpt-4o" in html


def test_an_import_without_model_results_names_no_model(client, workspace):
    state = {"format": "chat", "runId": "run-1", "messages": [{"role": "user", "content": "hi"}]}
    session = _import(client, state=json.dumps(state))
    data = client.get(f"/test/{session.id}.json").json()
    assert (data["model"], data["tokens"], data["cost"]) == (None, 0, None)
    assert ">no model answered</span>" in client.get(f"/test/{session.id}").content.decode()


CLI_GRADING = {
    "id": "grade-000000000000000000000001",
    "graderId": "tone",
    "graderPath": "/elsewhere/examples/support/graders/tone/PROMPT.md",
    "graderLabel": "Tone <kind>",
    "mode": "turns",
    "status": "completed",
    "runAt": "2026-01-02T03:04:05+00:00",
    "score": 2.0,
    "results": [
        {
            "score": 2,
            "reason": "polite <enough>",
            "evidence": [],
            "messageIndex": 2,
            "messageRefId": REF,
            "payload": {"score": 2, "reason": "polite <enough>"},
        }
    ],
}


def test_imported_grading_runs_are_kept_shown_and_round_trip(client, workspace):
    state = {
        "format": "chat",
        "runId": "run-1",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Hi"},
        ],
        "messageRefs": [
            {"id": "msg-000000000000000000000001", "role": "system"},
            {"id": "msg-000000000000000000000002", "role": "user"},
            {"id": REF, "role": "assistant"},
        ],
        "meta": {"gradingRuns": [CLI_GRADING]},
    }
    session = _import(client, state=json.dumps(state))
    assert session.meta["gradingRuns"] == [CLI_GRADING]
    (summary,) = client.get(f"/test/{session.id}.json").json()["gradingRuns"]
    assert summary == {
        "id": CLI_GRADING["id"],
        "runId": None,
        "grader": "Tone <kind>",
        "graderPath": CLI_GRADING["graderPath"],
        "mode": "turns",
        "status": "completed",
        "score": 2.0,
        "runAt": CLI_GRADING["runAt"],
        "imported": True,
        "url": None,
    }
    page = client.get(f"/test/{session.id}").content.decode()
    assert (
        f'<a href="/grade?session={session.id}" id="grades-link">1 grade (1 imported)</a>' in page
    )
    tab = client.get(f"/grade.json?session={session.id}").json()
    assert tab["runs"] == [] and [g["id"] for g in tab["imported"]] == [CLI_GRADING["id"]]
    html = client.get(f"/grade?session={session.id}").content.decode()
    assert 'id="imported-grades"' in html and "No grade runs for this session yet" not in html
    assert "Tone &lt;kind&gt;" in html and "polite &lt;enough&gt;" in html
    fragment = client.get(f"/grade?session={session.id}", HTTP_HX_REQUEST="true").content.decode()
    assert (
        fragment.lstrip().startswith('<div id="grade-history">') and CLI_GRADING["id"] in fragment
    )
    # export, then import again: the grades come along unchanged
    exported = client.get(f"/test/{session.id}/export/state.json").content
    assert json.loads(exported)["meta"]["gradingRuns"] == [CLI_GRADING]
    again = _import(client, state=exported)
    assert again.meta["gradingRuns"] == [CLI_GRADING]
    assert (
        client.get(f"/grade.json?session={again.id}").json()["imported"][0]["id"]
        == (CLI_GRADING["id"])
    )
