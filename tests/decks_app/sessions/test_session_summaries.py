"""Session titles and the context gauge (docs/simulator.md, "Session titles"; docs/decks.md,
"Context window and compaction"), with the fake model server as every model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from decks_app.models import Run, Session
from decks_app.runs import executor, queue
from decks_app.sessions import summaries
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace
from tests.support.fake_model_server import Reply


async def _run_next() -> None:
    run_id = await sync_to_async(queue.claim_next_run)("w")
    assert run_id is not None
    assert await asyncio.wait_for(executor.execute_run(run_id), 20) == "completed"


def _use(fake_server, monkeypatch) -> None:
    for key, value in fake_server.env().items():
        monkeypatch.setenv(key, value)


@pytest.mark.django_db(transaction=True)
async def test_a_weak_model_titles_the_session_after_its_first_exchange_without_holding_it(
    fake_server, monkeypatch
):
    _use(fake_server, monkeypatch)
    monkeypatch.setenv(summaries.SUMMARY_MODEL_ENV, "openresponses/weak")
    fake_server.queue(
        Reply(text="Your order 42 ships tomorrow."),
        # The title takes a while: the turn must not wait for it.
        Reply(text="Order 42 shipping date.", delay_before=1.0),
        Reply(text="You are welcome."),
    )
    session, _ = await sync_to_async(
        lambda: (
            s := create_session(current_workspace(), "support/PROMPT.md", model="openresponses/m"),
            send_message(s, "When does order 42 ship?"),
        )
    )()
    await _run_next()
    run = await Run.objects.filter(session=session).alatest("created_at")
    assert run.status == "completed"
    [task] = list(summaries._tasks)
    assert not task.done()  # the turn ended while its title was still being written
    assert await asyncio.wait_for(task, 20) == "Order 42 shipping date"
    title_request = fake_server.requests_to("/responses")[1]
    assert title_request.body["model"] == "weak" and "tools" not in title_request.body
    assert "When does order 42 ship?" in str(title_request.body["input"])

    session = await Session.objects.aget(pk=session.id)
    assert session.meta["summary"]["text"] == "Order 42 shipping date"
    assert session.meta["summary"]["model"] == "openresponses/weak"
    client = AsyncClient(HTTP_HOST="127.0.0.1")
    listed = {s["id"]: s for s in (await client.get("/test.json")).json()["sessions"]}
    assert listed[session.id]["summary"] == "Order 42 shipping date"
    assert "Order 42 shipping date" in (await client.get("/test")).content.decode()
    assert (await client.get(f"/test/{session.id}.json")).json()["summary"] == (
        "Order 42 shipping date"
    )
    found = (await client.get("/test.json?q=shipping")).json()["sessions"]
    assert [s["id"] for s in found] == [session.id]

    # Once titled, the next turn asks for no other title.
    await sync_to_async(send_message)(session, "Thanks!")
    await _run_next()
    assert summaries._tasks == set()
    assert len(fake_server.requests_to("/responses")) == 3


@pytest.mark.django_db(transaction=True)
async def test_no_summary_model_no_title_and_no_request(fake_server, monkeypatch):
    _use(fake_server, monkeypatch)
    monkeypatch.delenv(summaries.SUMMARY_MODEL_ENV, raising=False)
    fake_server.queue(Reply(text="Hello."))
    session, _ = await sync_to_async(
        lambda: (
            s := create_session(current_workspace(), "support/PROMPT.md", model="openresponses/m"),
            send_message(s, "Hi"),
        )
    )()
    await _run_next()
    for task in list(summaries._tasks):
        assert await asyncio.wait_for(task, 20) is None
    assert len(fake_server.requests_to("/responses")) == 1
    session = await Session.objects.aget(pk=session.id)
    assert "summary" not in (session.meta or {})


@pytest.mark.django_db(transaction=True)
async def test_the_session_header_shows_how_full_the_context_is(
    fake_server, monkeypatch, settings, tmp_path: Path
):
    _use(fake_server, monkeypatch)
    monkeypatch.delenv(summaries.SUMMARY_MODEL_ENV, raising=False)
    fake_server.count_usage = True
    deck = tmp_path / "chat" / "PROMPT.md"
    deck.parent.mkdir()
    deck.write_text(
        '+++\n[modelParams]\nmodel = "openresponses/m"\ncontextWindow = 1000\n+++\nBe brief.\n'
    )
    settings.GAMBIT_WORKSPACE = str(tmp_path)
    fake_server.queue(Reply(text="Sure."))
    session, _ = await sync_to_async(
        lambda: (
            s := create_session(current_workspace(), "chat/PROMPT.md"),
            send_message(s, "Hello " * 30),
        )
    )()
    await _run_next()
    sent = fake_server.requests_to("/responses")[0]
    from tests.support.fake_model_server import count_request_tokens

    reported = count_request_tokens(sent.body)
    client = AsyncClient(HTTP_HOST="127.0.0.1")
    data = (await client.get(f"/test/{session.id}.json")).json()
    assert data["contextFill"] == {
        "tokens": reported,
        "window": 1000,
        "percent": round(100 * reported / 1000),
        "source": "reported",
        "compactions": 0,
    }
    page = (await client.get(f"/test/{session.id}")).content.decode()
    assert f"context {round(100 * reported / 1000)}% of 1000" in page
