import json

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
    # decks are named without their absolute path (here outside any workspace: two parts)
    assert [(c.kind, c.label) for c in tool.children] == [("deck", "child/PROMPT.md")]
    assert tool.items[-1] == {"type": "result", "text": "found"}
    assert (tool.args, tool.result, tool.envelope) == ({"q": "<x>"}, "found", None)
    # tokens and cost on every node: a deck and its run add up their calls
    assert (deck.total_tokens, run.total_tokens) == (7, 7)
    assert model.total_cost == 0.001 and deck.total_cost is None  # the 2nd call has no cost


def _with_events(workspace):
    s = chat_session(workspace)
    run = Run.objects.create(session=s, status="completed")
    for i, p in enumerate(EVENTS, 1):
        TraceEvent.objects.create(run=run, session=s, seq=i, type=p["type"], payload=p, ts=p["ts"])
    return s


def test_it_shows_the_tree_and_raw_events(client, workspace):
    s = _with_events(workspace)
    html = client.get(f"/test/{s.id}/trace").content.decode()
    tree = html.split('<div class="trace-main">')[0]
    assert '<span class="tnav-label">child</span>' in tree and "/w/" not in tree
    assert "&lt;x&gt;" in html and "<x>" not in html
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
    html = client.get(f"/test/{s.id}/trace?node={call}").content.decode()
    detail = html.split('id="trace-detail"')[1]
    assert "2 items, 1 tools · responses · streamed · openai-api" in detail
    assert f'hx-get="/test/{s.id}/trace/calls/{call}" hx-trigger="toggle once"' in detail
    assert "&quot;max_output_tokens&quot;: 300" in detail  # the parameters' JSON (Raw)
    assert "Be &lt;brief&gt;" not in html  # not sent with the page
    assert "input 120 · cached 100 · output 30 · reasoning 12 · total 150" in detail
    assert "<dd>812 ms</dd>" in detail and "$0.00042</dd>" in detail
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
    assert states[("run", "root/PROMPT.md")] == status and run.run_id == "run-1"
    assert states[("deck", "root/PROMPT.md")] == status and states[("tool", "lookup")] == status
    assert not {"running", "calling"} & set(states.values())
    assert run.detail == "boom"


def test_a_scenario_runs_persona_and_deck_are_told_apart_by_their_decks():
    # A scenario run traces the persona's turns and the deck's under one run id: the session
    # page's panel named every one of them by that id ("run-7185… run-7185…").
    persona = {"type": "run.start", "runId": "run-9", "deckPath": "/w/late/PROMPT.md", "ts": 1}
    deck = {"type": "run.start", "runId": "run-9", "deckPath": "/w/support/PROMPT.md", "ts": 3}
    ends = {"type": "run.end", "status": "completed", "ts": 2}
    roots = build_tree([persona, ends, deck, {**ends, "ts": 4}])
    assert [(r.label, r.run_id) for r in roots] == [
        ("late/PROMPT.md", "run-9"),
        ("support/PROMPT.md", "run-9"),
    ]


def test_a_decks_context_call_sits_in_its_deck_though_traced_before_the_deck_starts():
    # The runtime traces an action deck's gambit_context call just before the deck's
    # deck.start, under the deck's own call id: it showed as the run's last child, after the
    # root's final model call.
    def ev(type_, ts, **fields):
        return {"type": type_, "runId": "run-1", "ts": ts, **fields}

    events = [
        ev("run.start", 1, deckPath="/w/root/PROMPT.md"),
        ev("deck.start", 2, deckPath="/w/root/PROMPT.md", actionCallId="a-root"),
        ev("tool.call", 3, name="draft", actionCallId="c-1", parentActionCallId="a-root"),
        ev("tool.call", 4, name="gambit_context", actionCallId="c-2", parentActionCallId="a-1"),
        ev("tool.result", 5, name="gambit_context", actionCallId="c-2", result="{}"),
        ev(
            "deck.start",
            6,
            deckPath="/w/draft/PROMPT.md",
            actionCallId="a-1",
            parentActionCallId="c-1",
        ),  # fmt: skip
        ev("deck.end", 7, actionCallId="a-1"),
        ev("tool.result", 8, name="draft", actionCallId="c-1", result="{}"),
        ev("deck.end", 9, actionCallId="a-root"),
        ev("run.end", 10, status="completed"),
    ]
    [run] = build_tree(events)
    [root] = run.children
    [draft_call] = root.children
    [draft_deck] = draft_call.children
    [context] = draft_deck.children
    assert (draft_deck.label, context.label) == ("draft/PROMPT.md", "gambit_context")
    assert context.parent_id == draft_deck.id and context.status == "done"


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
    # the two older runs are folded: their rows only, the children load when opened
    for start in starts[:2]:
        assert f'aria-expanded="false" data-lazy="/test/{s.id}/trace/runs/{start}"' in html
    tree = html.split('<div class="trace-main">')[0]
    # only the newest run's tree is in the page
    assert f'id="nav-tn-{starts[2]}-children"' in tree
    assert f'id="nav-tn-{starts[0]}-children"' not in tree
    assert f'id="nav-tn-{starts[1]}-children"' not in tree
    # a node selected in an older run opens that run
    html = client.get(f"/test/{s.id}/trace?node={starts[0] + 1}").content.decode()
    assert f'id="nav-tn-{starts[0]}-children"' in html.split('<div class="trace-main">')[0]
    body = client.get(f"/test/{s.id}/trace/runs/{starts[0]}", HTTP_HX_REQUEST="true").content
    assert b'<span class="tnav-label">child</span>' in body and b"<html" not in body
    assert body.decode().startswith(f'<ul role="group" id="nav-tn-{starts[0]}-children"')
    assert b'aria-level="2" aria-selected="false"' in body
    data = client.get(f"/test/{s.id}/trace/runs/{starts[1]}.json").json()
    assert data["runId"] == "run-1" and data["label"] == "root"  # the deck's folder
    assert data["children"][0]["kind"] == "deck"
    assert b"The whole trace" in client.get(f"/test/{s.id}/trace/runs/{starts[0]}").content
    assert client.get(f"/test/{s.id}/trace/runs/{starts[0] + 1}").status_code == 404
    assert client.post(f"/test/{s.id}/trace/runs/{starts[0]}").status_code == 405


# ------------------------------------------------------------------ the trace page's twin


def _action_session(workspace):
    """A run with an action deck inside the workspace: its result is an envelope."""
    root = workspace.root.rstrip("/")
    s = chat_session(workspace)
    s.notes = {"text": "checked the <b>refund</b>"}
    s.conversation_score = {"score": 2}
    s.save()
    envelope = {
        "runId": "run-a",
        "actionCallId": "call-1",
        "parentActionCallId": "action-root",
        "source": {"deckPath": f"{root}/support/PROMPT.md", "actionName": "refund"},
        "status": 200,
        "payload": {"refunded": True, "amount": 12.5},
    }
    events = [
        {"type": "run.start", "runId": "run-a", "deckPath": f"{root}/support/PROMPT.md", "ts": 1_000},
        {"type": "deck.start", "actionCallId": "action-root", "deckPath": f"{root}/support/PROMPT.md", "ts": 1_001},
        {"type": "message.user", "actionCallId": "action-root", "message": {"role": "user", "content": "Refund A1"}, "ts": 1_001},
        {"type": "model.call", "actionCallId": "action-root", "model": "m", "messageCount": 2, "ts": 1_002},
        {"type": "model.result", "actionCallId": "action-root", "model": "m", "finishReason": "tool_calls", "usage": {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15, "costUsd": 0.002}, "durationMs": 40, "ts": 1_042},
        {"type": "tool.call", "actionCallId": "call-1", "name": "refund", "args": '{"order": "A1"}', "toolKind": "action", "parentActionCallId": "action-root", "ts": 1_043},
        {"type": "deck.start", "actionCallId": "action-2", "deckPath": f"{root}/support/actions/refund/PROMPT.md", "parentActionCallId": "call-1", "ts": 1_044},
        {"type": "deck.end", "actionCallId": "action-2", "ts": 1_050},
        {"type": "tool.result", "actionCallId": "call-1", "name": "refund", "result": json.dumps(envelope), "toolKind": "action", "ts": 1_051},
        {"type": "deck.end", "actionCallId": "action-root", "ts": 1_060},
        {"type": "run.end", "status": "completed", "durationMs": 61, "ts": 1_061},
    ]  # fmt: skip
    run = Run.objects.create(session=s, status="completed")
    ids = [
        TraceEvent.objects.create(
            run=run, session=s, seq=i, type=p["type"], payload=p, ts=p["ts"]
        ).id
        for i, p in enumerate(events, 1)
    ]
    return s, ids, envelope


def test_the_twin_has_the_tree_the_selected_node_notes_and_score(client, workspace):
    s, ids, envelope = _action_session(workspace)
    data = client.get(f"/test/{s.id}/trace.json").json()
    assert (data["notes"], data["conversationScore"]) == ("checked the <b>refund</b>", 2)
    assert data["deck"] == s.deck_label and data["createdAt"].startswith("20")
    [run] = data["tree"]
    # names, not ids or paths: the session's deck by its label, another by its folder
    assert (run["label"], run["runId"], run["preview"]) == (s.deck_label, "run-a", "Refund A1")
    deck = run["children"][0]
    assert deck["label"] == s.deck_label
    model, tool = (c for c in deck["children"] if c["kind"] in ("model", "tool"))
    assert tool["children"][0]["label"] == "support/actions/refund"
    assert workspace.root not in json.dumps([run["label"], deck["label"], tool["label"]])
    # every node: its event, when it started in the run, its tokens and cost
    assert (model["eventId"], model["offsetMs"], model["durationMs"]) == (ids[3], 2, 40)
    assert model["totals"] == {"tokens": 15, "costUsd": 0.002}
    assert run["totals"] == {"tokens": 15, "costUsd": 0.002}  # all its calls have a cost
    # an action's result: its payload, with the envelope whole beside it
    assert tool["args"] == {"order": "A1"}
    assert tool["result"] == {"refunded": True, "amount": 12.5}
    assert tool["envelope"] == envelope
    # nothing selected: the newest run is
    assert data["selected"]["id"] == run["id"] and "children" in data["selected"]
    assert data["selected"]["children"][0] == {
        "id": deck["id"],
        "kind": "deck",
        "label": deck["label"],
    }
    picked = client.get(f"/test/{s.id}/trace.json?node={ids[5]}").json()["selected"]
    assert picked["kind"] == "tool" and picked["result"] == {"refunded": True, "amount": 12.5}


def test_a_node_that_is_not_there_is_said_and_the_newest_run_shown(client, workspace):
    s, ids, _ = _action_session(workspace)
    for bad in ("999999", "abc", "1;drop"):
        data = client.get(f"/test/{s.id}/trace.json", {"node": bad}).json()
        assert data["missing"] == bad and data["selected"]["kind"] == "run"
    html = client.get(f"/test/{s.id}/trace", {"node": "<b>x</b>"}).content.decode()
    assert "has no node &lt;b&gt;x&lt;/b&gt;" in html


def test_the_page_shows_the_selection_beside_the_tree_and_the_notes_above(client, workspace):
    s, ids, envelope = _action_session(workspace)
    html = client.get(f"/test/{s.id}/trace?node={ids[5]}").content.decode()
    nav, main = html.split('<div class="trace-main">')
    # the tree: an ARIA tree, the selected row marked, the others reachable by arrows
    assert 'role="tree"' in nav and nav.count('role="treeitem"') == 6
    assert f'id="nav-tn-{ids[5]}" class="tnav-row"' in nav
    row = nav.split(f'id="nav-tn-{ids[5]}"')[1].split("</a>")[0]
    assert 'aria-selected="true" tabindex="0"' in row and 'aria-level="3"' in row
    assert nav.count('tabindex="0"') == 1
    # each row: latency, tokens, cost ("—" unknown, never $0 for unknown)
    model_row = nav.split(f'id="nav-tn-{ids[3]}"')[1].split("</a>")[0]
    assert (
        '<span class="tnav-fig">40 ms</span><span class="tnav-fig">15 tok</span><span class="tnav-fig">$0.002</span>'
        in model_row
    )
    # the notes and the score come before the detail, outside the scrolling tree
    assert main.index('id="notes"') < main.index('id="trace-detail"')
    assert "checked the &lt;b&gt;refund&lt;/b&gt;" in main and '<option value="2" selected>' in main
    detail = main.split('id="trace-detail"')[1]
    # the payload first; the envelope one click away, in a closed <details>
    result = detail.split("<h3>Result</h3>")[1]
    assert result.index("&quot;refunded&quot;") < result.index('<details class="envelope">')
    assert "runId, actionCallId, parentActionCallId, source, status, payload" in result
    assert "&quot;runId&quot;" not in result.split('<details class="envelope">')[0]
    assert "<summary>Envelope" in result
    assert "Copy</button>" in result and "Expand all</button>" in result
    assert f'<li><a href="/test/{s.id}/trace?node={ids[1]}"' in detail  # the breadcrumb


def test_the_detail_of_one_node_page_fragment_and_twin(client, workspace):
    s, ids, envelope = _action_session(workspace)
    url = f"/test/{s.id}/trace/nodes/{ids[5]}"
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<article class="tdetail tool"') and "<html" not in fragment
    assert "&quot;amount&quot;: 12.5" in fragment
    page = client.get(url).content.decode()
    assert "<html" in page and f'href="/test/{s.id}/trace?node={ids[5]}">In the trace' in page
    data = client.get(url + ".json").json()
    assert data["id"] == f"tn-{ids[5]}" and data["envelope"] == envelope
    assert data["children"] == [
        {"id": f"tn-{ids[6]}", "kind": "deck", "label": "support/actions/refund"}
    ]
    run = client.get(f"/test/{s.id}/trace/nodes/{ids[0]}.json").json()
    assert run["kind"] == "run" and run["timeline"][0]["kind"] == "deck"


# One matrix for every trace view: the page, its twin and its htmx variant answer; an unknown
# session or node is a 404 (JSON for the twin); anything but GET is a 405.
TRACE_VIEWS = {
    "trace": ("/test/{s}/trace", '<ol class="events" id="events">'),
    "trace_run": ("/test/{s}/trace/runs/{run}", '<ul role="group"'),
    "trace_node": ("/test/{s}/trace/nodes/{node}", '<article class="tdetail'),
    "trace_call": ("/test/{s}/trace/calls/{call}", '<div class="sent-call">'),
}


@pytest.mark.parametrize("view", TRACE_VIEWS)
def test_each_trace_view_answers_its_page_twin_and_htmx_fragment(client, workspace, view):
    s, ids, _ = _action_session(workspace)
    path, starts = TRACE_VIEWS[view]
    url = path.format(s=s.id, run=ids[0], node=ids[5], call=ids[3])
    page = client.get(url)
    assert page.status_code == 200 and page.content.decode().startswith("<!doctype html>")
    twin = client.get(url + ".json")
    assert twin.status_code == 200 and twin["Content-Type"] == "application/json"
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith(starts) and "<html" not in fragment
    for method in (client.post, client.put, client.delete):
        assert method(url).status_code == 405


@pytest.mark.parametrize("view", TRACE_VIEWS)
def test_each_trace_view_404s_for_an_unknown_session_or_node(client, workspace, view):
    s, ids, _ = _action_session(workspace)
    other = chat_session(workspace)
    path, _ = TRACE_VIEWS[view]
    missing = "session-0123456789abcdef01234567"
    urls = [path.format(s=missing, run=ids[0], node=ids[5], call=ids[3])]
    if view != "trace":
        # another session's event, and an event of the right session of the wrong kind
        urls.append(path.format(s=other.id, run=ids[0], node=ids[5], call=ids[3]))
        urls.append(path.format(s=s.id, run=ids[1], node=999_999, call=ids[4]))
    for url in urls:
        assert client.get(url).status_code == 404, url
        answer = client.get(url + ".json")
        assert answer.status_code == 404 and "error" in answer.json(), url


def test_htmx_restoring_a_pushed_trace_url_gets_the_whole_page(client, workspace):
    # A node's link pushes `trace?node=<key>`; when htmx has no snapshot of it (back after
    # its history cache is gone), it asks again with this header and swaps in the body.
    s, ids, _ = _action_session(workspace)
    html = client.get(
        f"/test/{s.id}/trace?node={ids[5]}",
        HTTP_HX_REQUEST="true",
        HTTP_HX_HISTORY_RESTORE_REQUEST="true",
    ).content.decode()
    assert html.startswith("<!doctype html>") and 'role="tree"' in html


def test_a_graders_trace_names_the_grader_by_its_label(client, workspace):
    from decks_app.models import Session

    root = workspace.root.rstrip("/")
    grader = "support/graders/tone/PROMPT.md"
    s = Session.objects.create(
        workspace=workspace, deck_path=grader, deck_label="Tone check", origin="grade"
    )
    run = Run.objects.create(
        session=s, status="completed", kind="grader", params={"grader": grader}
    )
    for i, p in enumerate(
        [
            {"type": "run.start", "runId": "run-g", "deckPath": f"{root}/{grader}", "ts": 1},
            {"type": "deck.start", "actionCallId": "a", "deckPath": f"{root}/{grader}", "ts": 2},
            {"type": "deck.end", "actionCallId": "a", "ts": 3},
            {"type": "run.end", "status": "completed", "ts": 4},
        ],
        1,
    ):
        TraceEvent.objects.create(run=run, session=s, seq=i, type=p["type"], payload=p, ts=p["ts"])
    data = client.get(f"/test/{s.id}/trace.json").json()
    [node] = data["tree"]
    assert (node["label"], node["children"][0]["label"]) == ("Tone check", "Tone check")
    html = client.get(f"/test/{s.id}/trace").content.decode()
    assert "Trace of Tone check" in html
    # no absolute path in the tree or the detail (the raw events keep the record as it is)
    shown = html.split('<div class="trace-layout">')[1].split('<details class="panel raw-events')[0]
    assert root not in shown


def test_the_session_pages_trace_panel_shows_a_result_as_its_payload(client, workspace):
    # issue 26: every result box was a wall of runId/actionCallId/deckPath
    s, _, _ = _action_session(workspace)
    html = client.get(f"/test/{s.id}").content.decode()
    result = html[html.index('<div class="item result">') :]
    payload = result[: result.index('<details class="envelope">')]
    assert "refunded" in payload and "actionCallId" not in payload
    envelope = result[result.index('<details class="envelope">') : result.index("</details>")]
    assert "actionCallId" in envelope and " open" not in envelope.split(">")[0]
