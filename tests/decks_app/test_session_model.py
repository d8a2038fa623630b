"""The model a session shows is the one that answered: read from its runs' model.result
events (offline/demo when the deck's own model is not configured, the replay provider for
a replay), on the session page, its JSON twin and the session list."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from decks_app.models import Run
from decks_app.runs import executor, queue
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace

from .conftest import chat_session

PROVIDER_KEYS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENRESPONSES_BASE_URL")


def _execute(run_id: str) -> str:
    assert queue.claim_next_run("test-worker") == run_id
    return asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 30))


@pytest.mark.django_db(transaction=True)
def test_a_deck_whose_model_is_not_configured_shows_the_offline_model(client, monkeypatch):
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    session = create_session(current_workspace(), "support/PROMPT.md")  # no override
    run = send_message(session, "Where is my order?")
    assert _execute(run.id) == "completed"
    data = client.get(f"/test/{session.id}.json").json()
    assert (data["model"], data["offline"], data["modelOverride"]) == (
        "offline/demo",
        True,
        None,
    )
    assert data["runs"][0]["model"] == "offline/demo"
    html = client.get(f"/test/{session.id}").content.decode()
    assert '<span id="session-model" title="The model that answered">offline/demo (offline)' in html
    (row,) = client.get("/test.json").json()["sessions"]
    assert (row["model"], row["offline"]) == ("offline/demo", True)


@pytest.mark.django_db(transaction=True)
def test_a_deck_that_names_no_model_is_answered_by_the_demo_model(
    client, monkeypatch, tmp_path, settings
):
    # As in the CLI (docs/decisions.md): the first deck a new user writes names no model.
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    (root / "plain").mkdir()
    (root / "plain/PROMPT.md").write_text('+++\nlabel = "plain"\n+++\nYou help.\n')
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        session = create_session(current_workspace(), "plain/PROMPT.md")
        run = send_message(session, "Hello?")
        assert _execute(run.id) == "completed"
        data = client.get(f"/test/{session.id}.json").json()
    assert (data["model"], data["offline"]) == ("offline/demo", True)
    assert "offline demo model" in str(data["conversation"])


@pytest.mark.django_db(transaction=True)
def test_a_run_records_the_model_that_answered_not_the_one_planned(client):
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    run = Run.objects.create(session=session, params={"message": "hi"}, model="openrouter/planned")
    assert _execute(run.id) == "completed"
    run.refresh_from_db()
    assert (run.model, run.offline) == ("offline/echo", True)
    assert client.get(f"/test/{session.id}.json").json()["model"] == "offline/echo"


@pytest.mark.django_db
def test_the_page_shows_the_latest_runs_model_and_escapes_it(client, workspace):
    session = chat_session(workspace)
    session.model = ""
    session.save()
    Run.objects.create(session=session, status="completed", model="first/model")
    Run.objects.create(session=session, status="completed", model="<b>second</b>", offline=True)
    Run.objects.create(session=session, status="failed", model="")  # nothing answered
    data = client.get(f"/test/{session.id}.json").json()
    assert (data["model"], data["offline"]) == ("<b>second</b>", True)
    html = client.get(f"/test/{session.id}").content.decode()
    assert "&lt;b&gt;second&lt;/b&gt; (offline)" in html and "<b>second</b>" not in html
    (row,) = client.get("/test.json").json()["sessions"]
    assert row["model"] == "<b>second</b>"
    assert "&lt;b&gt;second&lt;/b&gt;" in client.get("/test").content.decode()


@pytest.mark.django_db
def test_a_session_without_runs_shows_its_override_or_the_deck_model(
    client, workspace, monkeypatch
):
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    with_override = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    without = create_session(workspace, "support/PROMPT.md")
    assert client.get(f"/test/{with_override.id}.json").json()["model"] == "offline/echo"
    assert client.get(f"/test/{without.id}.json").json()["model"] is None
    # issue 26: the header said "deck model" whatever the deck; before the first run it
    # names the model that will answer: here the demo model, since the deck's has no key
    # (it named the deck's model, under the title "The model that answered")
    html = client.get(f"/test/{without.id}").content.decode()
    assert (
        'title="The model that will answer the first message (nothing has answered yet)">'
        "offline/demo will answer (offline: openrouter/openai/gpt-4o-mini has no configured "
        "provider)</span>"
    ) in html
    assert "deck model" not in html
    assert client.get(f"/test/{without.id}.json").json()["modelLabel"] == (
        "offline/demo will answer (offline: openrouter/openai/gpt-4o-mini has no configured "
        "provider)"
    )
    monkeypatch.setenv("OPENROUTER_API_KEY", "k")
    html = client.get(f"/test/{without.id}").content.decode()
    assert ">openrouter/openai/gpt-4o-mini will answer</span>" in html
    html = client.get(f"/test/{with_override.id}").content.decode()
    assert ">offline/echo will answer (offline)</span>" in html
    hello = create_session(workspace, "hello/deck.py")
    html = client.get(f"/test/{hello.id}").content.decode()
    assert ">no model (compute deck)</span>" in html
