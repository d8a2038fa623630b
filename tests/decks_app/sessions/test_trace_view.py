import pytest

from decks_app.models import Run, TraceEvent
from decks_app.sessions.trace_tree import build_tree, request_detail, tree_rows, updates, walk
from tests.decks_app.conftest import chat_session

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
    html = client.get(f"/test/{s.id}/trace").content.decode()
    assert "child/PROMPT.md" in html and "&lt;x&gt;" in html and "<x>" not in html
    data = client.get(f"/test/{s.id}/trace.json").json()
    assert data == client.get(f"/test/{s.id}/trace?format=json").json()
    assert data["count"] == len(EVENTS) and data["events"][0]["type"] == "run.start"
    assert data["tree"][0]["children"][0]["kind"] == "deck"


def test_it_renders_the_event_list_for_htmx(client, workspace):
    s = _with_events(workspace)
    html = client.get(f"/test/{s.id}/trace", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<ol class="events" id="events">')


def test_it_404s_and_405s(client, workspace):
    assert client.get("/test/session-0123456789abcdef01234567/trace").status_code == 404
    s = chat_session(workspace)
    assert client.post(f"/test/{s.id}/trace").status_code == 405


SENT = {
    "type": "model.call",
    "actionCallId": "action-root",
    "model": "openai-api/gpt-x",
    "provider": "openai-api",
    "mode": "responses",
    "stream": True,
    "messageCount": 2,
    "toolCount": 1,
    "items": [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "Be <brief>."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Where is A1?"}],
        },
    ],
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "Find an order"}}],
    "params": {"temperature": 0.2, "max_output_tokens": 300},
    "ts": 3,
}
RETURNED = {
    "type": "model.result",
    "actionCallId": "action-root",
    "model": "openai-api/gpt-x",
    "finishReason": "stop",
    "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On its way."}]}],
    "usage": {"promptTokens": 120, "completionTokens": 30, "totalTokens": 150, "cachedTokens": 100, "reasoningTokens": 12, "costUsd": 0.00042},
    "durationMs": 812,
    "ts": 815,
}  # fmt: skip


def test_a_model_call_shows_what_was_sent_and_what_came_back():
    events = [EVENTS[0], EVENTS[1], SENT, RETURNED]
    [run] = build_tree(events)
    [model] = run.children[0].children
    # The tree keeps the call's size and settings; the items are read on demand.
    assert model.request == {
        "itemCount": 2, "toolCount": 1, "params": {"temperature": 0.2, "max_output_tokens": 300},
        "mode": "responses", "stream": True, "provider": "openai-api",
    }  # fmt: skip
    assert model.tokens == {
        "input": 120,
        "output": 30,
        "cached": 100,
        "reasoning": 12,
        "total": 150,
    }
    assert (model.duration_ms, model.cost) == (812, 0.00042)
    assert model.items == [{"type": "message", "role": "assistant", "text": "On its way."}]
    data = run.to_dict()["children"][0]["children"][0]
    assert data["request"]["params"]["temperature"] == 0.2 and data["tokens"]["cached"] == 100
    detail = request_detail(SENT)
    assert detail["instructions"] == "Be <brief>."
    assert detail["input"] == [{"type": "message", "role": "user", "text": "Where is A1?"}]
    assert detail["tools"] == [
        {"name": "lookup", "description": "Find an order", "parameters": None}
    ]


def _call_session(workspace):
    s = chat_session(workspace)
    run = Run.objects.create(session=s, status="completed")
    ids = []
    for i, p in enumerate([EVENTS[0], EVENTS[1], SENT, RETURNED], 1):
        ids.append(
            TraceEvent.objects.create(
                run=run, session=s, seq=i, type=p["type"], payload=p, ts=p["ts"]
            ).id
        )
    return s, ids[2]


def test_the_trace_page_renders_the_call_summary_and_loads_the_rest(client, workspace):
    s, call = _call_session(workspace)
    html = client.get(f"/test/{s.id}/trace").content.decode()
    assert "Sent · 2 items, 1 tools · responses · streamed · openai-api" in html
    assert f'hx-get="/test/{s.id}/trace/calls/{call}" hx-trigger="toggle once"' in html
    assert "&quot;max_output_tokens&quot;: 300" in html
    assert "Be &lt;brief&gt;" not in html  # not sent with the page
    # input, cached, output, reasoning, latency, cost
    assert "<td>120</td><td>100</td><td>30</td><td>12</td><td>812 ms</td><td>$0.000420</td>" in html
    fragment = client.get(f"/test/{s.id}/trace/calls/{call}", HTTP_HX_REQUEST="true")
    text = fragment.content.decode()
    assert "<html" not in text and "Be &lt;brief&gt;." in text and "<brief>" not in text
    assert "<code>lookup</code>" in text and "Where is A1?" in text
    data = client.get(f"/test/{s.id}/trace/calls/{call}.json").json()
    assert data["instructions"] == "Be <brief>." and data["model"] == "openai-api/gpt-x"
    assert data["params"] == {"temperature": 0.2, "max_output_tokens": 300}
    page = client.get(f"/test/{s.id}/trace/calls/{call}").content.decode()
    assert "Back to the trace" in page


def test_the_call_detail_404s_and_405s(client, workspace):
    s, call = _call_session(workspace)
    other = chat_session(workspace)
    assert client.get(f"/test/{other.id}/trace/calls/{call}").status_code == 404
    assert client.get(f"/test/{s.id}/trace/calls/{call + 1}").status_code == 404  # model.result
    assert (
        client.get(f"/test/session-0123456789abcdef01234567/trace/calls/{call}").status_code == 404
    )
    assert client.post(f"/test/{s.id}/trace/calls/{call}").status_code == 405


def test_the_tree_reads_calls_without_their_conversation(workspace):
    s, call = _call_session(workspace)
    rows = dict(tree_rows(s))
    assert "items" not in rows[call] and "tools" not in rows[call]
    assert rows[call]["messageCount"] == 2 and rows[call]["params"]["temperature"] == 0.2
    assert rows[call + 1]["output"]  # other events are read whole


def test_each_run_has_a_timeline_of_its_calls():
    [run] = build_tree(EVENTS)
    bars = [(b.kind, b.label, b.depth, b.offset_ms, b.duration_ms) for b in run.bars]
    assert bars == [
        ("deck", "root/PROMPT.md", 0, 1, 11),
        ("model", "m", 1, 2, 2),
        ("tool", "lookup", 1, 5, 4),
        ("deck", "child/PROMPT.md", 2, 6, 2),
        ("model", "m", 1, 10, 1),
    ]
    assert run.span_ms == 13  # run.start at 1, run.end at 14
    model = run.bars[1]
    assert (model.left, model.width) == (round(100 * 2 / 13, 2), round(100 * 2 / 13, 2))
    assert run.to_dict()["timeline"][2] == {
        "kind": "tool", "label": "lookup", "status": "done", "depth": 1, "offsetMs": 5, "durationMs": 4,
    }  # fmt: skip


@pytest.mark.parametrize("status", ["failed", "canceled", "interrupted"])
def test_statuses_are_final_when_a_run_fails_is_canceled_or_interrupted(status):
    [run] = build_tree(
        [*EVENTS[:5], {"type": "run.end", "status": status, "error": "boom", "ts": 20}]
    )
    states = {(n.kind, n.label): n.status for n in walk([run])}
    assert states[("run", "run-1")] == status
    assert states[("deck", "root/PROMPT.md")] == status and states[("tool", "lookup")] == status
    assert not {"running", "calling"} & set(states.values())
    assert run.detail.endswith("— boom")


def test_nodes_have_stable_ids_and_report_what_changed_after_an_event():
    rows = [(100 + i, p) for i, p in enumerate(EVENTS)]
    first = build_tree(rows[:4])  # up to model.result of the first call
    assert [n.id for n in walk(first)] == ["tn-100", "tn-101", "tn-102"]
    roots = build_tree(rows)
    assert [n.id for n in walk(roots)][:3] == ["tn-100", "tn-101", "tn-102"]
    update = updates(roots, since=103)
    # the tool (with its nested deck) and the second call are new; the deck and run changed
    assert [n.id for n in update.added] == ["tn-104", "tn-109"]
    assert [n.id for n in update.changed] == ["tn-100", "tn-101"]
    assert [n.parent_id for n in update.added] == ["tn-101", "tn-101"]


def test_the_trace_page_folds_older_runs_and_loads_each_when_opened(client, workspace, monkeypatch):
    from decks_app.sessions.views import trace

    monkeypatch.setattr(trace, "RUNS_OPEN", 1)
    s = chat_session(workspace)
    starts = []
    for i in range(3):
        run = Run.objects.create(session=s, status="completed")
        for seq, p in enumerate(EVENTS, 1):
            p = {**p, "runId": f"run-{i}"} if p["type"] == "run.start" else p
            event = TraceEvent.objects.create(
                run=run, session=s, seq=seq, type=p["type"], payload=p, ts=p["ts"]
            )
            if seq == 1:
                starts.append(event.id)
    html = client.get(f"/test/{s.id}/trace").content.decode()
    # the two older runs are folded: their heads only, the body loads on toggle
    for start in starts[:2]:
        assert f'hx-get="/test/{s.id}/trace/runs/{start}" hx-trigger="toggle once"' in html
    tree = html.split('<section class="panel side">')[0]
    # only the newest run's tree is in the page
    assert f'id="tn-{starts[2]}-children"' in tree
    assert (
        f'id="tn-{starts[0]}-children"' not in tree and f'id="tn-{starts[1]}-children"' not in tree
    )
    body = client.get(f"/test/{s.id}/trace/runs/{starts[0]}", HTTP_HX_REQUEST="true").content
    assert b"child/PROMPT.md" in body and b"<html" not in body
    assert f'id="tn-{starts[0]}-children"'.encode() in body
    data = client.get(f"/test/{s.id}/trace/runs/{starts[1]}.json").json()
    assert data["label"] == "run-1" and data["children"][0]["kind"] == "deck"
    assert b"Back to the trace" in client.get(f"/test/{s.id}/trace/runs/{starts[0]}").content
    assert client.get(f"/test/{s.id}/trace/runs/{starts[0] + 1}").status_code == 404
    assert client.post(f"/test/{s.id}/trace/runs/{starts[0]}").status_code == 405
