"""A compute deck's context in the Test tab (docs/decisions.md, "A compute root in a
conversation"): examples/hello greets the name its context gives as soon as the session opens;
each message after that is its next input, as in `gambit repl --context`."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from decks_app.models import Session
from decks_app.runs import executor, queue
from decks_app.sessions.actions import send_message

pytestmark = pytest.mark.django_db(transaction=True)

HINT = "This deck expects a user message"


async def _run_next() -> None:
    run_id = await sync_to_async(queue.claim_next_run)("w1")
    assert run_id is not None
    assert await asyncio.wait_for(executor.execute_run(run_id), 20) == "completed"


async def test_hello_greets_its_context_first_then_each_message():
    client = Client(HTTP_HOST="127.0.0.1")
    created = await sync_to_async(client.post)(
        "/test/new?format=json", {"deck": "hello/deck.py", "ctx": "Ada"}
    )
    assert created.status_code == 201, created.content
    session = await Session.objects.aget(pk=created.json()["id"])
    assert session.context == "Ada"
    await _run_next()  # queued when the session was created
    session = await Session.objects.aget(pk=session.pk)
    assert session.messages == [{"role": "assistant", "content": "Hello, Ada!"}]
    page = await sync_to_async(client.get)(f"/test/{session.pk}")
    assert HINT not in page.content.decode()
    await sync_to_async(send_message)(session, "go")
    await _run_next()
    session = await Session.objects.aget(pk=session.pk)
    assert session.messages[1:] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Hello, go!"},
    ]


async def test_hello_without_a_context_waits_for_a_message():
    client = Client(HTTP_HOST="127.0.0.1")
    created = await sync_to_async(client.post)("/test/new?format=json", {"deck": "hello/deck.py"})
    assert created.status_code == 201, created.content
    assert await sync_to_async(queue.claim_next_run)("w1") is None
    page = await sync_to_async(client.get)(f"/test/{created.json()['id']}")
    assert HINT in page.content.decode()
