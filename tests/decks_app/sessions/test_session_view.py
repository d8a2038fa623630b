import datetime as dt

import pytest

from decks_app.models import Run, TraceEvent
from decks_app.sessions.actions import create_session
from decks_app.workspaces.served import jailed_path
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db


def test_it_shows_the_conversation_and_its_json_twin(client, workspace):
    s = chat_session(workspace, reply="**bold** reply", user="hi")
    r = client.get(f"/test/{s.id}")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<strong>bold</strong> reply" in html
    assert f'ws-connect="/ws/sessions/{s.id}/"' in html
    data = client.get(f"/test/{s.id}?format=json").json()
    assert data == client.get(f"/test/{s.id}.json").json()
    assert [b["kind"] for b in data["conversation"]] == ["user", "assistant"]
    assert data["conversation"][1]["messageRefId"] == "msg-000000000000000000000003"
    assert data["status"] == "idle"


def test_it_escapes_model_and_user_text(client, workspace):
    s = chat_session(
        workspace, reply="<script>alert('x')</script><img src=x onerror=alert(1)>", user="<b>u</b>"
    )
    html = client.get(f"/test/{s.id}").content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert" in html
    assert "<img src=x" not in html
    assert "&lt;b&gt;u&lt;/b&gt;" in html


def test_it_gives_404_for_unknown_and_malformed_ids(client, workspace, django_assert_num_queries):
    assert client.get("/test/session-0123456789abcdef01234567").status_code == 404
    with django_assert_num_queries(0):
        assert client.get("/test/../etc").status_code == 404
        assert client.get("/test/session-XYZ").status_code == 404
        assert client.get("/test/run-0123456789abcdef01234567.json").status_code == 404
        assert client.post("/test/bad/send", {"message": "x"}).status_code == 404


def test_it_renders_the_conversation_fragment_for_htmx(client, workspace):
    s = chat_session(workspace)
    html = client.get(f"/test/{s.id}", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="conversation"')
    assert "<html" not in html


def test_it_enqueues_a_run_when_sending(client, workspace):
    s = chat_session(workspace)
    r = client.post(f"/test/{s.id}/send?format=json", {"message": "hello"})
    assert r.status_code == 202
    run = Run.objects.get(pk=r.json()["runId"])
    assert (run.status, run.params.get("message"), run.model, run.offline) == (
        "queued",
        "hello",
        "offline/echo",
        True,
    )
    # one run at a time per session
    assert client.post(f"/test/{s.id}/send?format=json", {"message": "again"}).status_code == 409
    assert client.post(f"/test/{s.id}/send?format=json", {"message": "  "}).status_code == 400


def test_it_answers_htmx_sends_with_oob_fragments(client, workspace):
    s = chat_session(workspace)
    html = client.post(
        f"/test/{s.id}/send", {"message": "hi"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="status"' in html and 'hx-swap-oob="true"' in html
    assert 'id="composer"' in html and "queued" in html


def test_it_stops_queued_and_running_runs(client, workspace):
    s = chat_session(workspace)
    queued = Run.objects.create(session=s, status="queued")
    r = client.post(f"/test/{s.id}/stop?format=json")
    assert r.status_code == 200 and r.json()["stopped"] == [queued.id]
    queued.refresh_from_db()
    assert queued.status == "canceled"
    running = Run.objects.create(session=s, status="running")
    client.post(f"/test/{s.id}/stop")
    running.refresh_from_db()
    assert running.cancel_requested and running.status == "running"


def test_it_refuses_get_on_commands(client, workspace):
    s = chat_session(workspace)
    for action in ["send", "stop", "notes"]:  # GET .../rerun says whether it is offered
        assert client.get(f"/test/{s.id}/{action}").status_code == 405


def test_it_saves_notes_and_the_conversation_score(client, workspace):
    s = chat_session(workspace)
    r = client.post(f"/test/{s.id}/notes?format=json", {"notes": "good <b>", "score": "2"})
    assert r.status_code == 200
    s.refresh_from_db()
    assert s.notes["text"] == "good <b>" and s.conversation_score["score"] == 2
    client.post(f"/test/{s.id}/notes", {"score": ""})
    s.refresh_from_db()
    assert s.conversation_score is None
    listing = client.get("/test?format=json").json()["sessions"][0]
    assert listing["id"] == s.id


def test_it_starts_assistant_first_decks_at_once(workspace, tmp_path, settings):
    deck = tmp_path / "greeter"
    deck.mkdir()
    (deck / "PROMPT.md").write_text(
        '+++\nlabel = "Greeter"\nstartMode = "assistant"\n+++\n\nGreet.\n'
    )
    settings.GAMBIT_WORKSPACE = str(tmp_path)
    from decks_app.workspaces.served import current_workspace

    ws = current_workspace()
    s = create_session(ws, "greeter/PROMPT.md", model="offline/echo")
    run = s.runs.get()
    assert run.status == "queued" and run.params == {"message": None}


def test_it_shows_live_events_of_the_active_run(client, workspace):
    s = chat_session(workspace)
    run = Run.objects.create(session=s, status="running")
    deck = str(jailed_path(workspace, s.deck_path))
    on_deck = {"runId": "run-1", "deckPath": deck}
    streamed = {"_gambit": {"deck_path": deck}, "item_id": "m1"}
    payloads = [
        {"type": "message.user", **on_deck, "message": {"role": "user", "content": "q<i>"}},
        {"type": "model.call", **on_deck},
        {"type": "response.output_item.added", "item": {"type": "message", "id": "m1"}},
        {"type": "response.output_text.delta", **streamed, "delta": "Hel"},
        {"type": "response.output_text.delta", **streamed, "delta": "lo<x>"},
    ]
    for i, p in enumerate(payloads, 1):
        TraceEvent.objects.create(run=run, session=s, seq=i, type=p["type"], payload=p, ts=0)
    html = client.get(f"/test/{s.id}").content.decode()
    assert "Hello&lt;x&gt;" in html and "q&lt;i&gt;" in html
    data = client.get(f"/test/{s.id}.json").json()
    assert data["activeRunId"] == run.id
    assert data["cursor"] == TraceEvent.objects.latest("id").id
    # Reply text is streaming: the indicator says "responding", with the run's age.
    assert data["activity"]["phase"] == "responding" and data["activity"]["elapsedSeconds"] >= 0
    assert 'id="activity"' in html and 'data-phase="responding"' in html


def test_a_run_without_reply_text_yet_is_thinking_and_a_finished_one_has_no_indicator(
    client, workspace
):
    s = chat_session(workspace)
    run = Run.objects.create(session=s, status="running")
    Run.objects.filter(pk=run.pk).update(created_at=run.created_at - dt.timedelta(seconds=3))
    data = client.get(f"/test/{s.id}.json").json()
    assert data["activity"]["phase"] == "thinking" and data["activity"]["elapsedSeconds"] >= 3
    Run.objects.filter(pk=run.pk).update(status="completed")
    assert client.get(f"/test/{s.id}.json").json()["activity"] is None
    assert 'id="activity"' not in client.get(f"/test/{s.id}").content.decode()


def _add_events(session, payloads, status="completed"):
    run = Run.objects.create(session=session, status=status)
    for i, p in enumerate(payloads, 1):
        TraceEvent.objects.create(run=run, session=session, seq=i, type=p["type"], payload=p, ts=0)
    return run


def test_it_lists_the_raw_events_under_the_trace_escaped(client, workspace):
    s = chat_session(workspace)
    _add_events(
        s,
        [
            {"type": "run.start", "runId": "r"},
            {"type": "log", "message": "<script>alert('e')</script>"},
        ],
    )
    html = client.get(f"/test/{s.id}").content.decode()
    assert 'id="raw-events-panel"' in html and 'id="raw-events"' in html
    assert f'hx-get="/test/{s.id}/events/recent" hx-trigger="toggle once"' in html
    assert f'href="/test/{s.id}/trace"' in html
    assert "<b>log</b>" not in html  # the rows load when the panel opens
    panel = client.get(f"/test/{s.id}/events/recent", HTTP_HX_REQUEST="true").content.decode()
    assert panel.startswith('<ol class="events" id="raw-events"')
    assert panel.index("run.start") < panel.index("<b>log</b>")  # most recent last
    assert "<script>alert(" not in panel
    assert "&lt;script&gt;alert(&#x27;e&#x27;)&lt;/script&gt;" in panel
    assert (
        client.get(f"/test/{s.id}/events/recent?format=json").json()["events"][1]["type"] == "log"
    )
    assert client.post(f"/test/{s.id}/events/recent").status_code == 405
    assert client.get("/test/session-0123456789abcdef01234567/events/recent").status_code == 404
    data = client.get(f"/test/{s.id}.json").json()
    assert [e["type"] for e in data["events"]] == ["run.start", "log"]
    assert data["events"][1]["payload"]["message"] == "<script>alert('e')</script>"
    assert data["events"][1]["seq"] == 2 and data["events"][1]["id"] == data["cursor"]
    assert {"conversation", "trace", "runs", "cursor"} <= data.keys()  # existing keys kept


def test_it_bounds_the_raw_event_list(client, workspace, monkeypatch):
    from decks_app.runs import events as event_log

    monkeypatch.setattr(event_log, "RECENT_LIMIT", 3)
    s = chat_session(workspace)
    _add_events(s, [{"type": "log", "message": f"m{i}"} for i in range(1, 6)])
    data = client.get(f"/test/{s.id}.json").json()
    assert [e["payload"]["message"] for e in data["events"]] == ["m3", "m4", "m5"]
    panel = client.get(f"/test/{s.id}/events/recent", HTTP_HX_REQUEST="true").content.decode()
    row = "&quot;message&quot;:&quot;{}&quot;"
    assert 'data-limit="3"' in panel and row.format("m2") not in panel
    assert row.format("m3") in panel and row.format("m5") in panel


def test_it_limits_request_bodies(client, workspace):
    s = chat_session(workspace)
    r = client.post(f"/test/{s.id}/send", {"message": "x" * (11 * 1024 * 1024)})
    assert r.status_code == 400
    assert not Run.objects.filter(session=s).exists()
    r = client.post(f"/test/{s.id}/send?format=json", {"message": "x" * 100_001})
    assert r.status_code == 400


def test_a_session_is_deleted_only_with_its_id_as_confirmation(client, workspace):
    from decks_app.models import Session as SessionModel
    from tests.decks_app.conftest import chat_session

    session = chat_session(workspace)
    wrong = client.post(f"/test/{session.id}/delete?format=json", {"confirm": "yes"})
    assert wrong.status_code == 400 and "type the session id" in wrong.json()["error"]
    assert SessionModel.objects.filter(pk=session.id).exists()
    done = client.post(f"/test/{session.id}/delete", {"confirm": session.id})
    assert done.status_code == 302 and not SessionModel.objects.filter(pk=session.id).exists()
    assert client.get(f"/test/{session.id}/delete").status_code == 405


def test_errors_are_pages_with_the_navigation(client, workspace):
    page = client.get("/test/session-000000000000000000000000")
    assert page.status_code == 404
    html = page.content.decode()
    assert "<nav" in html and "Not found" in html and "← Back" in html
    bad = client.post("/test/new", {"deck": "nope/PROMPT.md"})
    assert bad.status_code == 400 and "<nav" in bad.content.decode()


def test_a_search_with_no_match_says_so(client, workspace):
    html = client.get("/test?q=zzz-nothing").content.decode()
    assert "No session matches these filters." in html


def _turn_with_tools(workspace):
    """One turn as the runtime saves it: context given, a user message, an action with its
    gambit_complete pair, and the reply (chat messages plus responses items)."""
    s = create_session(workspace, "support/PROMPT.md", model="offline/echo")

    def call(cid, name, args):
        return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}

    s.messages = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": None, "tool_calls": [call("c0", "gambit_context", "{}")]},
        {"role": "tool", "tool_call_id": "c0", "name": "gambit_context", "content": '{"tier": "gold"}'},
        {"role": "user", "content": "Where is A1002?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "order_status", '{"order_id": "A1002"}')]},
        {"role": "tool", "tool_call_id": "c1", "name": "order_status", "content": '{"status": "<late>"}'},
        {"role": "assistant", "content": None, "tool_calls": [call("c2", "gambit_complete", "{}")]},
        {"role": "tool", "tool_call_id": "c2", "name": "gambit_complete", "content": '{"status": 200}'},
        {"role": "assistant", "content": "It is late."},
    ]  # fmt: skip
    s.items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is A1002?"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look the order up."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is late."}]},
    ]  # fmt: skip
    s.format = "responses"
    s.state_version = 1
    s.save()
    return s


def test_tool_calls_and_reasoning_fold_into_one_activity_block_per_turn(client, workspace):
    s = _turn_with_tools(workspace)
    data = client.get(f"/test/{s.id}.json").json()
    kinds = [b["kind"] for b in data["blocks"]]
    assert kinds == ["activity", "user", "activity", "assistant"]
    context, _, turn, _ = data["blocks"]
    assert context["toolCalls"] == 0 and context["internalCalls"] == 1
    assert turn["summary"] == "1 tool call (order_status) · 1 reasoning"
    assert (turn["toolCalls"], turn["internalCalls"]) == (1, 1)
    assert turn["reasoning"] == ["Look the order up."]
    lookup, complete = turn["calls"]
    assert lookup == {"name": "order_status", "arguments": '{"order_id": "A1002"}', "result": '{"status": "<late>"}', "internal": False}  # fmt: skip
    assert complete["name"] == "gambit_complete" and complete["internal"]
    # the flat conversation stays as it was for readers of the twin
    assert [b["kind"] for b in data["conversation"]][:3] == ["context", "user", "tool_call"]

    html = client.get(f"/test/{s.id}").content.decode()
    assert html.count('<details class="activity"') == 2
    assert "1 tool call (order_status) · 1 reasoning" in html and "+1 internal" in html
    # internal calls sit in their own closed block, results are escaped
    assert '<details class="internal"><summary>Internal calls (gambit_complete)</summary>' in html
    assert "&lt;late&gt;" in html and "<late>" not in html
    assert 'class="bubble tool_call"' not in html


def test_a_long_conversation_shows_its_newest_blocks_and_loads_the_rest(
    client, workspace, monkeypatch
):
    from decks_app.sessions import conversation

    monkeypatch.setattr(conversation, "BLOCKS_SHOWN", 4)
    s = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    s.messages = [
        {"role": role, "content": f"{role} {i} <x>"} for i in range(5) for role in ("user", "assistant")
    ]  # fmt: skip
    s.state_version = 1
    s.save()
    html = client.get(f"/test/{s.id}").content.decode()
    assert "user 3 &lt;x&gt;" in html and "user 2 &lt;x&gt;" not in html
    assert (
        f'hx-get="/test/{s.id}/conversation?before=6"' in html and "Show earlier (6 more)" in html
    )
    earlier = client.get(f"/test/{s.id}/conversation?before=6", HTTP_HX_REQUEST="true")
    text = earlier.content.decode()
    assert "user 1 &lt;x&gt;" in text and "assistant 2 &lt;x&gt;" in text and "user 3" not in text
    assert f'hx-get="/test/{s.id}/conversation?before=2"' in text and "<html" not in text
    data = client.get(f"/test/{s.id}/conversation?before=2&format=json").json()
    assert [b["text"] for b in data["blocks"]] == ["user 0 <x>", "assistant 0 <x>"]
    assert data["before"] == 0
    assert client.get(f"/test/{s.id}/conversation?before=x").status_code == 400
    assert client.post(f"/test/{s.id}/conversation?before=2").status_code == 405
    assert (
        client.get("/test/session-0123456789abcdef01234567/conversation?before=2").status_code
        == 404
    )
    # the JSON twin keeps the whole conversation
    assert len(client.get(f"/test/{s.id}.json").json()["conversation"]) == 10


def test_the_trace_panel_shows_the_newest_runs_and_points_at_the_rest(
    client, workspace, monkeypatch
):
    from decks_app.sessions import session_page

    monkeypatch.setattr(session_page, "TREE_RUNS", 2)
    s = chat_session(workspace)
    for i in range(3):
        run = Run.objects.create(session=s, status="completed")
        start = {"type": "run.start", "runId": f"run-{i}", "ts": i}
        TraceEvent.objects.create(run=run, session=s, seq=1, type="run.start", payload=start, ts=i)
    data = client.get(f"/test/{s.id}.json").json()
    assert [n["label"] for n in data["trace"]] == ["run-1", "run-2"]
    assert data["traceOmittedRuns"] == 1
    html = client.get(f"/test/{s.id}").content.decode()
    assert "1 earlier run: " in html and f'href="/test/{s.id}/trace">on the trace page' in html
    assert len(client.get(f"/test/{s.id}/trace.json").json()["tree"]) == 3


def test_notes_and_the_score_come_before_the_trace(client, workspace):
    # issue 26: the notes and the conversation score sat below the trace panel, out of reach
    # once a tree was expanded
    html = client.get(f"/test/{chat_session(workspace).id}").content.decode()
    assert html.index('id="notes"') < html.index('id="trace-panel"')
