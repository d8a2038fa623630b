"""The session page while a run is live is the same rendering of the same events as when it
has finished: the saved conversation plus what the run added since its last checkpoint,
never a message twice, never a scenario persona's instructions (docs/simulator.md, "Live
updates").

Each test runs a real turn or scenario through the run executor against a fake model server
that streams slowly, and looks at the page every time the trace writer notifies the page's
socket (that is when a browser would update it).
"""

from __future__ import annotations

import asyncio
import html
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from decks_app.models import Session
from decks_app.runs import events as event_log
from decks_app.runs import executor, queue, writer
from decks_app.sessions.actions import create_session, send_message
from tests.support.fake_model_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

SCENARIO = "support/PROMPT.md|support/scenarios/late_delivery/PROMPT.md"
PERSONA_INSTRUCTION = "Start the conversation as the user"
CHAT = re.compile(r'<section class="panel chat">(.*?)</section>', re.S)


def _said(data: dict) -> list[tuple[str, str]]:
    """The things said on the page (conversation, then the live area), from its JSON twin."""
    blocks = data["blocks"] + data["live"]
    return [(b["kind"], b["text"]) for b in blocks if b["kind"] in ("user", "assistant")]


def _shown(said: list[tuple[str, str]], text: str) -> int:
    """How often `text` is on the page if each message said is there once."""
    return sum(t.count(text) for _, t in said)


def _watch(session_id: str, monkeypatch) -> list[tuple[dict, str]]:
    """The page (JSON twin, chat column text) at every notification of the session."""
    client = Client(HTTP_HOST="127.0.0.1")
    seen: list[tuple[dict, str]] = []
    notify = event_log.notify

    def look() -> None:
        data = client.get(f"/test/{session_id}.json").json()
        page = client.get(f"/test/{session_id}").content.decode()
        chat = CHAT.search(page).group(1)  # its text, as a reader sees it
        seen.append((data, html.unescape(re.sub(r"<[^>]+>", "", chat))))

    async def notify_and_look(sid: str) -> None:
        await notify(sid)
        if sid == session_id:
            await sync_to_async(look)()

    monkeypatch.setattr(writer, "LINGER_SECONDS", 0.0)
    monkeypatch.setattr(event_log, "notify", notify_and_look)
    return seen


def _execute(run_id: str) -> str:
    assert queue.claim_next_run("test-worker") == run_id
    return asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60))


@pytest.fixture
def fake(fake_server, monkeypatch):
    """Every provider (the deck's, a persona's) answers from the fake model server."""
    for key, value in fake_server.env().items():
        monkeypatch.setenv(key, value)
    return fake_server


def _slowly(text: str) -> Reply:
    # slower than a look at the page, which holds the trace writer up while it looks
    words = text.split(" ")
    return Reply(deltas=[w + " " for w in words[:-1]] + words[-1:], delay=0.4)


def _streaming(seen: list[tuple[dict, str]]) -> list[dict]:
    """The moments a reply was streaming (the live area held text still arriving)."""
    return [d for d, _ in seen if any(b.get("status") == "streaming" for b in d["live"])]


def test_the_users_message_shows_once_while_the_reply_streams(workspace, fake, monkeypatch):
    fake.queue(_slowly("Your parcel left this morning"))
    session = create_session(workspace, "support/PROMPT.md", model="openresponses/fake")
    run = send_message(session, "where is my parcel")
    seen = _watch(session.id, monkeypatch)
    assert _execute(run.id) == "completed"
    assert len(_streaming(seen)) >= 3
    for data, chat in seen:
        said = _said(data)
        assert said.count(("user", "where is my parcel")) == 1, said
        assert chat.count("where is my parcel") == 1, chat
    final = Client(HTTP_HOST="127.0.0.1").get(f"/test/{session.id}.json").json()
    assert final["live"] == [] and _said(final)[-1][1].startswith("Your parcel left")


def test_a_scenario_run_reads_live_as_it_reads_finished(client, workspace, fake, monkeypatch):
    fake.queue(
        _slowly("My order is late"),  # the persona
        _slowly("Sorry, it ships today"),  # the deck
        _slowly("And the shipping fee?"),
        _slowly("It is refunded, Sam"),
    )
    response = client.post(
        "/test/scenario",
        {
            "scenario": SCENARIO,
            "maxTurns": "2",
            "runs": "1",
            "context": '{"name": "Sam"}',
            "model": "openresponses/fake",
        },
    )
    session = Session.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])
    seen = _watch(session.id, monkeypatch)
    assert _execute(session.runs.get().id) == "completed"
    final = _said(client.get(f"/test/{session.id}.json").json())
    # the persona's two messages and the deck's two replies, alternating
    assert [kind for kind, _ in final] == ["user", "assistant", "user", "assistant"], final
    assert final[0] == ("user", "My order is late")
    assert final[1] == ("assistant", "Sorry, it ships today")
    assert len(_streaming(seen)) >= 6
    for data, chat in seen:
        said = _said(data)
        # what the page says at any moment is the start of what it says at the end (the
        # last message maybe still streaming)
        if said:
            n = len(said)
            assert said[: n - 1] == final[: n - 1], (said, final)
            assert said[-1][0] == final[n - 1][0] and final[n - 1][1].startswith(said[-1][1])
        assert PERSONA_INSTRUCTION not in chat
        for _, text in said:  # each message once, in its own bubble
            assert chat.count(text) == _shown(said, text), (text, chat)
