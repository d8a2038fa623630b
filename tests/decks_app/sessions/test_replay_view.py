import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import executor, queue
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace
from tests.decks_app.conftest import chat_session

from .test_trace_view import EVENTS, _with_events

NO_RESULTS = (
    "This session has no recorded model results, so there is nothing a replay could answer from."
)


@pytest.mark.django_db
def test_it_steps_through_the_events(client, workspace):
    s = _with_events(workspace)
    data = client.get(f"/test/{s.id}/replay?step=0&format=json").json()
    assert (data["step"], data["total"], data["conversation"]) == (0, len(EVENTS), [])
    data = client.get(f"/test/{s.id}/replay.json?step=4").json()
    assert data["event"]["type"] == "model.result"
    # the session page's blocks: the tool call in the turn's activity
    [activity] = data["conversation"]
    assert activity["kind"] == "activity" and activity["calls"][0]["name"] == "lookup"
    data = client.get(f"/test/{s.id}/replay.json?step={len(EVENTS)}").json()
    assert data["step"] == len(EVENTS)
    assert data["conversation"][-1]["kind"] == "assistant"
    assert data["conversation"][-1]["text"] == "done"
    html = client.get(f"/test/{s.id}/replay?step=2", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="frame">') and "step 2 / 13" in html
    assert client.get(f"/test/{s.id}/replay?step=999&format=json").json()["step"] == len(EVENTS)


@pytest.mark.django_db
def test_rerun_is_offered_only_where_a_recording_can_answer(client, workspace):
    bare = chat_session(workspace)  # a conversation, but no trace
    recorded = _with_events(workspace)  # a trace with model results
    for page in (f"/test/{bare.id}", f"/test/{bare.id}/replay"):
        assert 'id="rerun"' not in client.get(page).content.decode(), page
    for page in (f"/test/{recorded.id}", f"/test/{recorded.id}/replay"):
        assert 'id="rerun"' in client.get(page).content.decode(), page
    assert client.get(f"/test/{bare.id}.json").json()["rerun"] == {
        "available": False,
        "url": f"/test/{bare.id}/rerun",
        "reason": NO_RESULTS,
    }
    assert client.get(f"/test/{recorded.id}/replay.json").json()["rerun"]["available"] is True
    # GET /test/<id>/rerun says the same: JSON, a page, and for htmx the button's slot alone
    # (the session page asks again when a run starts or ends while it is open)
    assert (
        client.get(f"/test/{bare.id}/rerun.json").json()
        == client.get(f"/test/{bare.id}/rerun?format=json").json()
    )
    assert client.get(f"/test/{bare.id}/rerun.json").json()["reason"] == NO_RESULTS
    page = client.get(f"/test/{bare.id}/rerun").content.decode()
    assert NO_RESULTS in page and 'id="rerun"' not in page and 'href="/grade"' in page
    slot = client.get(f"/test/{recorded.id}/rerun", HTTP_HX_REQUEST="true").content.decode()
    assert slot.startswith(f'<span id="rerun-slot" data-src="/test/{recorded.id}/rerun">')
    assert 'id="rerun"' in slot and "csrfmiddlewaretoken" in slot and "<html" not in slot
    slot = client.get(f"/test/{bare.id}/rerun", HTTP_HX_REQUEST="true").content.decode()
    assert slot == f'<span id="rerun-slot" data-src="/test/{bare.id}/rerun"></span>'
    assert "decks_app/rerun.js" in client.get(f"/test/{bare.id}").content.decode()
    # results recorded only inside an action are not the deck's own answers
    nested = chat_session(workspace)
    run = Run.objects.create(session=nested, status="completed")
    nested.events.create(
        run=run,
        seq=1,
        ts=1,
        type="model.result",
        payload={"type": "model.result", "parentActionCallId": "call-1", "model": "m"},
    )
    assert client.get(f"/test/{nested.id}.json").json()["rerun"]["available"] is False


@pytest.mark.django_db
def test_a_session_whose_last_turn_was_stopped_is_not_offered_a_rerun(client, workspace):
    # Before, it was offered, and the re-run failed with "offline-replay: deck <server
    # path> made call 12, but the trace recorded only 11 model calls for it".
    stopped = _with_events(workspace)
    Run.objects.create(session=stopped, status="canceled")
    rerun = client.get(f"/test/{stopped.id}.json").json()["rerun"]
    assert rerun["available"] is False
    assert rerun["reason"] == (
        "The last turn was stopped (canceled), so not all of its model results were "
        "recorded and a replay could not answer it."
    )
    assert 'id="rerun"' not in client.get(f"/test/{stopped.id}").content.decode()
    assert client.post(f"/test/{stopped.id}/rerun?format=json").status_code == 400


@pytest.mark.django_db
def test_it_refuses_to_rerun_without_recorded_results(client, workspace):
    s = chat_session(workspace)
    r = client.post(f"/test/{s.id}/rerun?format=json")
    assert r.status_code == 400
    assert r.json() == {"error": NO_RESULTS, "code": "not_replayable"}
    page = client.post(f"/test/{s.id}/rerun")  # a page with the navigation and a way back
    html = page.content.decode()
    assert page.status_code == 400 and NO_RESULTS in html
    assert f'href="/test/{s.id}"' in html and 'href="/grade"' in html
    fragment = client.post(f"/test/{s.id}/rerun", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div class="callout error" id="error"')
    assert "<html" not in fragment
    assert Session.objects.filter(origin="replay").count() == 0
    # nor a grading session, whatever its trace holds
    grading = _with_events(workspace)
    grading.origin = "grade"
    grading.save()
    r = client.post(f"/test/{grading.id}/rerun?format=json")
    assert r.status_code == 400 and r.json()["code"] == "not_replayable"
    assert "only conversations can" in r.json()["error"]


@pytest.mark.django_db
def test_rerun_405_403_404_and_409_while_running(client, csrf_client, workspace):
    s = _with_events(workspace)
    assert client.put(f"/test/{s.id}/rerun").status_code == 405
    assert client.delete(f"/test/{s.id}/rerun.json").status_code == 405
    assert csrf_client.post(f"/test/{s.id}/rerun").status_code == 403
    missing = client.post("/test/session-0123456789abcdef01234567/rerun?format=json")
    assert missing.status_code == 404 and missing.json() == {"error": "no such session"}
    assert client.get("/test/session-0123456789abcdef01234567/rerun.json").status_code == 404
    assert client.post("/test/../rerun").status_code == 404
    assert client.post("/test/not-an-id/rerun").status_code == 404
    Run.objects.create(session=s, status="running")
    busy = client.post(f"/test/{s.id}/rerun.json")
    assert busy.status_code == 409 and busy.json()["code"] == "session_busy"
    assert client.get(f"/test/{s.id}.json").json()["rerun"]["available"] is False


@pytest.mark.django_db(transaction=True)
def test_a_replay_of_a_turn_that_called_an_action_is_identical(client, monkeypatch):
    # The offline demo model calls the support deck's order_status action; the action's
    # result carries ids the runtime makes afresh (runId, parentActionCallId), which differ
    # in the replay without making it a different conversation.
    for key in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENRESPONSES_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    source = create_session(current_workspace(), "support/PROMPT.md")
    send_message(source, "Where is order A1002?")
    asyncio.run(_run_next())
    kinds = [b["kind"] for b in client.get(f"/test/{source.id}.json").json()["conversation"]]
    assert "tool_result" in kinds
    r = client.post(f"/test/{source.id}/rerun.json")
    assert r.status_code == 201
    asyncio.run(_run_next())
    compared = client.get(f"/test/{r.json()['id']}/compare.json").json()
    assert compared["verdict"] == "identical", compared["differences"]


async def _run_next(expected: str = "completed") -> None:
    run_id = await sync_to_async(queue.claim_next_run)("w")
    assert run_id is not None
    assert await asyncio.wait_for(executor.execute_run(run_id), 20) == expected


async def _rerun(client: AsyncClient, session_id: str) -> Session:
    r = await client.post(f"/test/{session_id}/rerun?format=json")
    assert r.status_code == 201, r.content
    return await Session.objects.aget(pk=r.json()["id"])


@pytest.mark.django_db(transaction=True)
async def test_it_reruns_a_session_offline_into_a_new_session(fake_server, monkeypatch):
    from tests.support.fake_model_server import Reply

    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(
        Reply(text="first answer", usage={"input_tokens": 10, "output_tokens": 2, "cost": 0.25}),
        Reply(text="second answer", usage={"input_tokens": 20, "output_tokens": 4, "cost": 0.5}),
    )

    def setup():
        s = create_session(current_workspace(), "support/PROMPT.md", model="openresponses/fake")
        return s, send_message(s, "one")

    source, run = await sync_to_async(setup)()
    await _run_next()
    await sync_to_async(send_message)(source, "two")
    await _run_next()
    requests_before = len(fake_server.requests)

    client = AsyncClient(HTTP_HOST="127.0.0.1")
    original = (await client.get(f"/test/{source.id}.json")).json()
    assert (original["model"], original["offline"]) == ("openresponses/fake", False)
    assert original["tokens"] == 36 and original["cost"] == pytest.approx(0.75)

    replay = await _rerun(client, source.id)
    assert replay.origin == "replay" and replay.source_id == source.id
    replay_run = await Run.objects.aget(session=replay)
    assert replay_run.kind == "replay" and replay_run.offline
    await _run_next()
    replay = await Session.objects.aget(pk=replay.id)
    texts = [
        m["content"]
        for m in replay.messages
        if m["role"] in ("user", "assistant") and m.get("content")
    ]
    assert texts == ["one", "first answer", "two", "second answer"]
    assert len(fake_server.requests) == requests_before  # no network

    # The replay provider answered, over both turns: every turn's tokens count; nothing billed.
    data = (await client.get(f"/test/{replay.id}.json")).json()
    assert (data["model"], data["offline"], data["modelOverride"]) == (
        "offline-replay",
        True,
        None,
    )
    assert data["tokens"] == original["tokens"] and data["cost"] == 0
    assert data["runs"][0]["model"] == "offline-replay"
    # its trace names the model that answered, as its header does (not the deck's model)
    calls = [e async for e in TraceEvent.objects.filter(session_id=replay.id)]
    models = {e.payload.get("model") for e in calls if e.type in ("model.call", "model.result")}
    assert models == {"offline-replay"}, models
    assert "costUsd" not in data["runs"][0]["usage"]
    listed = {s["id"]: s for s in (await client.get("/test.json")).json()["sessions"]}
    assert (listed[replay.id]["model"], listed[replay.id]["tokens"]) == ("offline-replay", 36)
    assert (listed[source.id]["model"], listed[source.id]["tokens"]) == ("openresponses/fake", 36)
    page = (await client.get(f"/test/{replay.id}")).content.decode()
    assert "offline-replay (offline)" in page and "36 tokens" in page

    compared = (await client.get(f"/test/{replay.id}/compare.json")).json()
    assert compared["source"] == source.id and compared["identical"] is True
    assert compared["verdict"] == "identical" and compared["differences"] == []
    kinds = [r["original"]["kind"] for r in compared["rows"]]
    assert [k for k in kinds if k in ("user", "assistant")] == ["user", "assistant"] * 2
    html = (await client.get(f"/test/{replay.id}/compare")).content.decode()
    assert ">identical</span>" in html and "second answer" in html
    fragment = await client.get(f"/test/{replay.id}/compare", headers={"HX-Request": "true"})
    assert fragment.content.decode().lstrip().startswith('<div id="compare-result"')
    assert (await client.get(f"/test/{source.id}/compare")).status_code == 404
    assert (await client.post(f"/test/{replay.id}/compare")).status_code == 405

    # A replay replays too: its turns are the ones its trace recorded.
    again = await _rerun(client, replay.id)
    await _run_next()
    compared = (await client.get(f"/test/{again.id}/compare.json")).json()
    assert compared["source"] == replay.id and compared["verdict"] == "identical"
    assert len(fake_server.requests) == requests_before


@pytest.mark.django_db(transaction=True)
async def test_a_replay_that_runs_out_of_recorded_results_is_not_identical(
    fake_server, monkeypatch
):
    from tests.support.fake_model_server import Reply

    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(text="first answer"), Reply.http_error(400, "no <b>luck</b>"))

    def setup():
        s = create_session(current_workspace(), "support/PROMPT.md", model="openresponses/fake")
        return s, send_message(s, "one")

    source, _ = await sync_to_async(setup)()
    await _run_next()
    await sync_to_async(send_message)(source, "two")
    await _run_next("failed")  # the original's second turn got no answer

    client = AsyncClient(HTTP_HOST="127.0.0.1")
    replay = await _rerun(client, source.id)
    await _run_next("failed")  # nothing was recorded for the second turn either
    compared = (await client.get(f"/test/{replay.id}/compare.json")).json()
    assert compared["identical"] is False and compared["verdict"] == "different"
    status = compared["differences"][0]
    assert status["kind"] == "status" and status["replay"] == "failed"
    assert status["message"].startswith("The replay failed: ")
    assert "recorded only 1 model call" in status["message"]
    html = (await client.get(f"/test/{replay.id}/compare")).content.decode()
    assert ">different</span>" in html and "The replay failed" in html


@pytest.mark.django_db(transaction=True)
def test_a_replay_opens_at_step_one_and_steps_by_event_and_by_turn(client, monkeypatch):
    for key in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENRESPONSES_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    s = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    for text in ("first question", "second question"):
        send_message(s, text)
        asyncio.run(_run_next())
    stored = list(
        TraceEvent.objects.filter(session=s).order_by("id").values_list("type", flat=True)
    )
    assert any(t.startswith("response.") for t in stored)
    opened = client.get(f"/test/{s.id}/replay.json").json()
    # step 1 of the events other than the provider's stream, which show at their result
    assert opened["step"] == 1 and opened["event"]["type"] == "run.start"
    assert opened["total"] == sum(1 for t in stored if not t.startswith("response."))
    assert (opened["turn"], opened["turns"]) == (1, 2)
    assert opened["next"] == 2 and opened["prev"] == 0 and opened["prevTurn"] == 0
    second = client.get(f"/test/{s.id}/replay.json?step={opened['nextTurn']}").json()
    assert second["event"]["type"] == "run.start" and second["turn"] == 2
    said = [(b["kind"], b["text"]) for b in second["conversation"] if b["kind"] != "activity"]
    assert said == [("user", "first question"), ("assistant", "You said: first question")]
    assert second["prevTurn"] == 1 and second["nextTurn"] == second["total"]
    end = client.get(f"/test/{s.id}/replay.json?step={second['total']}").json()
    assert [b["text"] for b in end["conversation"] if b["kind"] == "user"] == [
        "first question",
        "second question",
    ]
    assert client.get(f"/test/{s.id}/replay.json?step=x").status_code == 400
