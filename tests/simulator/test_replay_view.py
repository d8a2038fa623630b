import asyncio

import pytest
from asgiref.sync import sync_to_async

from decks_app.models import Run, Session
from decks_app.services import execution
from decks_app.services.sessions import create_session, send_message
from decks_app.services.workspaces import current_workspace

from .test_trace_view import EVENTS, _with_events


@pytest.mark.django_db
def test_it_steps_through_the_events(client, workspace):
    s = _with_events(workspace)
    data = client.get(f"/test/{s.id}/replay/?step=0&format=json").json()
    assert (data["step"], data["total"], data["conversation"]) == (0, len(EVENTS), [])
    data = client.get(f"/test/{s.id}/replay.json?step=4").json()
    assert data["event"]["type"] == "model.result"
    assert [r["kind"] for r in data["conversation"]] == ["tool_call"]
    data = client.get(f"/test/{s.id}/replay.json").json()
    assert data["step"] == len(EVENTS)
    assert data["conversation"][-1] == {"kind": "assistant", "text": "done"}
    html = client.get(f"/test/{s.id}/replay/?step=2", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="frame">') and "step 2 / 13" in html
    assert client.get(f"/test/{s.id}/replay/?step=999&format=json").json()["step"] == len(EVENTS)


@pytest.mark.django_db
def test_it_refuses_to_rerun_without_recorded_results(client, workspace):
    from .conftest import chat_session

    s = chat_session(workspace)
    assert client.post(f"/test/{s.id}/rerun?format=json").status_code == 409
    assert client.get(f"/test/{s.id}/rerun").status_code == 405


@pytest.mark.django_db(transaction=True)
async def test_it_reruns_a_session_offline_into_a_new_session(fake_server, monkeypatch):
    from tests.support.fake_model_server import Reply

    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(text="first answer"), Reply(text="second answer"))

    def setup():
        s = create_session(current_workspace(), "support/PROMPT.md", model="openresponses/fake")
        return s, send_message(s, "one")

    source, run = await sync_to_async(setup)()
    await sync_to_async(execution.claim_next_run)("w")
    assert await asyncio.wait_for(execution.execute_run(run.id), 20) == "completed"
    run2 = await sync_to_async(send_message)(source, "two")
    await sync_to_async(execution.claim_next_run)("w")
    assert await asyncio.wait_for(execution.execute_run(run2.id), 20) == "completed"
    requests_before = len(fake_server.requests)

    from django.test import AsyncClient

    client = AsyncClient(HTTP_HOST="127.0.0.1")
    r = await client.post(f"/test/{source.id}/rerun?format=json")
    assert r.status_code == 201
    replay = await Session.objects.aget(pk=r.json()["id"])
    assert replay.origin == "replay" and replay.source_id == source.id
    replay_run = await Run.objects.aget(session=replay)
    assert replay_run.kind == "replay" and replay_run.offline
    await sync_to_async(execution.claim_next_run)("w")
    assert await asyncio.wait_for(execution.execute_run(replay_run.id), 20) == "completed"
    replay = await Session.objects.aget(pk=replay.id)
    texts = [
        m["content"]
        for m in replay.messages
        if m["role"] in ("user", "assistant") and m.get("content")
    ]
    assert texts == ["one", "first answer", "two", "second answer"]
    assert len(fake_server.requests) == requests_before  # no network
    compared = (await client.get(f"/test/{replay.id}/compare.json")).json()
    assert compared["source"] == source.id and compared["identical"] is True
    assert len(compared["rows"]) == 4
    html = (await client.get(f"/test/{replay.id}/compare/")).content.decode()
    assert "identical" in html and "second answer" in html
    fragment = await client.get(f"/test/{replay.id}/compare/", headers={"HX-Request": "true"})
    assert (
        fragment.content.decode().lstrip().startswith('<table class="sessions" id="compare-rows">')
    )
    assert (await client.get(f"/test/{source.id}/compare/")).status_code == 404
    assert (await client.post(f"/test/{replay.id}/compare/")).status_code == 405
