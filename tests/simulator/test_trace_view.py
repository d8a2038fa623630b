import pytest

from decks_app.models import Run, TraceEvent
from decks_app.services.trace_tree import build_tree

from .conftest import chat_session

pytestmark = pytest.mark.django_db

EVENTS = [
    {"type": "run.start", "runId": "run-1", "deckPath": "/w/root/PROMPT.md", "ts": 1},
    {"type": "deck.start", "actionCallId": "action-root", "deckPath": "/w/root/PROMPT.md", "ts": 2},
    {"type": "model.call", "actionCallId": "action-root", "model": "m", "messageCount": 2, "ts": 3},
    {
        "type": "model.result",
        "actionCallId": "action-root",
        "model": "m",
        "finishReason": "tool_calls",
        "usage": {"totalTokens": 7, "cost": 0.001},
        "toolCalls": [{"id": "call-1", "name": "lookup", "args": {"q": "<x>"}}],
        "ts": 5,
    },
    {
        "type": "action.start",
        "actionCallId": "call-1",
        "name": "lookup",
        "parentActionCallId": "action-root",
        "ts": 6,
    },
    {
        "type": "tool.call",
        "actionCallId": "call-1",
        "name": "lookup",
        "args": {"q": "<x>"},
        "toolKind": "action",
        "parentActionCallId": "action-root",
        "ts": 6,
    },
    {
        "type": "deck.start",
        "actionCallId": "action-child",
        "deckPath": "/w/child/PROMPT.md",
        "parentActionCallId": "call-1",
        "ts": 7,
    },
    {"type": "deck.end", "actionCallId": "action-child", "ts": 9},
    {
        "type": "tool.result",
        "actionCallId": "call-1",
        "name": "lookup",
        "result": "found",
        "toolKind": "action",
        "ts": 10,
    },
    {"type": "model.call", "actionCallId": "action-root", "model": "m", "ts": 11},
    {
        "type": "model.result",
        "actionCallId": "action-root",
        "model": "m",
        "finishReason": "stop",
        "message": {"role": "assistant", "content": "done"},
        "ts": 12,
    },
    {"type": "deck.end", "actionCallId": "action-root", "ts": 13},
    {
        "type": "run.end",
        "status": "completed",
        "usage": {"totalTokens": 7},
        "durationMs": 12,
        "ts": 14,
    },
]


def test_it_builds_the_tree_deck_model_tool_nested_deck():
    [run] = build_tree(EVENTS)
    assert run.status == "completed"
    [deck] = run.children
    assert [c.kind for c in deck.children] == ["model", "tool", "model"]
    model, tool, _ = deck.children
    assert (model.duration_ms, model.cost, model.usage["totalTokens"]) == (2, 0.001, 7)
    assert model.items == [{"type": "function_call", "name": "lookup", "text": '{"q": "<x>"}'}]
    assert [c.kind for c in tool.children] == ["deck"] and tool.children[
        0
    ].label == "child/PROMPT.md"
    assert tool.items[-1] == {"type": "result", "text": "found"}


def _with_events(workspace):
    s = chat_session(workspace)
    run = Run.objects.create(session=s, status="completed")
    for i, p in enumerate(EVENTS, 1):
        TraceEvent.objects.create(run=run, session=s, seq=i, type=p["type"], payload=p, ts=p["ts"])
    return s


def test_it_shows_the_tree_and_raw_events(client, workspace):
    s = _with_events(workspace)
    html = client.get(f"/test/{s.id}/trace/").content.decode()
    assert "child/PROMPT.md" in html and "&lt;x&gt;" in html and "<x>" not in html
    data = client.get(f"/test/{s.id}/trace.json").json()
    assert data == client.get(f"/test/{s.id}/trace/?format=json").json()
    assert data["count"] == len(EVENTS) and data["events"][0]["type"] == "run.start"
    assert data["tree"][0]["children"][0]["kind"] == "deck"


def test_it_renders_the_event_list_for_htmx(client, workspace):
    s = _with_events(workspace)
    html = client.get(f"/test/{s.id}/trace/", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<ol class="events" id="events">')


def test_it_404s_and_405s(client, workspace):
    assert client.get("/test/session-0123456789abcdef01234567/trace/").status_code == 404
    s = chat_session(workspace)
    assert client.post(f"/test/{s.id}/trace/").status_code == 405
