"""Scenario runs from the Test tab: one run streams into its own session; several are a batch.
Runs execute through the run executor, with the offline model standing in (no API key)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from decks_app.models import Run, Session
from decks_app.runs import executor, queue

pytestmark = pytest.mark.django_db(transaction=True)

SCENARIO = "support/PROMPT.md|support/scenarios/late_delivery/PROMPT.md"


def _execute(run_id: str) -> str:
    assert queue.claim_next_run("test-worker") == run_id
    return asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60))


def test_the_test_tab_lists_the_root_decks_scenarios(client, workspace):
    data = client.get("/test.json").json()
    assert data["scenarios"] == [
        {
            "deck": "support/PROMPT.md",
            "deckLabel": "Acme support bot",
            "path": "support/scenarios/late_delivery/PROMPT.md",
            "label": "Customer whose parcel is late",
            "description": None,
        }
    ]
    assert 'id="run-scenario"' in client.get("/test").content.decode()


def test_one_run_is_a_live_session_of_its_own(client, workspace):
    response = client.post(
        "/test/scenario",
        {"scenario": SCENARIO, "maxTurns": "2", "runs": "1", "context": '{"name": "Sam"}'},
    )
    assert response.status_code == 302
    session = Session.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])
    assert session.origin == "scenario"
    assert session.meta["scenarioPath"] == "support/scenarios/late_delivery/PROMPT.md"
    run = session.runs.get()
    assert (run.kind, run.status) == ("scenario", "queued")
    assert _execute(run.id) == "completed"
    run.refresh_from_db()
    session.refresh_from_db()
    assert run.result == {"turns": 2, "stopped": "max_turns"}
    roles = [m["role"] for m in session.messages if m["role"] in ("user", "assistant")]
    assert roles.count("user") == 2 and "assistant" in roles
    assert session.meta["scenarioRunId"].startswith("scenario-")
    data = client.get(f"/test/{session.id}.json").json()
    assert data["status"] == "completed"
    listed = [s["id"] for s in client.get("/test.json").json()["sessions"]]
    assert session.id in listed


def test_several_runs_are_a_batch(client, workspace):
    response = client.post(
        "/test/scenario", {"scenario": SCENARIO, "maxTurns": "1", "runs": "3", "concurrency": "2"}
    )
    assert response.status_code == 302 and "/grade/verify" in response["Location"]
    batch_id = response["Location"].rstrip("/").split("/")[-1]
    assert _execute(batch_id) == "completed"
    batch = client.get(f"/grade/verify/{batch_id}.json").json()
    assert batch["progress"]["run"]["completed"] == 3 and batch["progress"]["grade"]["total"] == 0
    assert all(r["session"] and r["turns"] == 1 for r in batch["runs"])
    # Its page says what it is: no grader, so not "Verify".
    html = client.get(f"/grade/verify/{batch_id}").content.decode()
    assert "<h1>Scenario batch of support/PROMPT.md" in html
    assert "<title>Scenario batch " in html and "<h1>Verify" not in html


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"scenario": "support/PROMPT.md|support/PROMPT.md"}, "is not a scenario of"),
        ({"scenario": "nope|x"}, "is not a scenario of"),
        ({"scenario": SCENARIO, "maxTurns": "0"}, "max turns must be from 1 to 200"),
        ({"scenario": SCENARIO, "runs": "500"}, "runs must be from 1 to 100"),
    ],
)
def test_bad_requests_are_named(client, workspace, form, message):
    response = client.post("/test/scenario?format=json", form)
    assert response.status_code == 400 and message in response.json()["error"]
    assert not Run.objects.exists()


def test_methods_and_csrf(client, csrf_client, workspace):
    assert client.get("/test/scenario").status_code == 405
    assert csrf_client.post("/test/scenario", {"scenario": SCENARIO}).status_code == 403


def test_a_scenario_run_counts_the_persona_and_replays_offline(client, workspace, monkeypatch):
    for key in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENRESPONSES_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    response = client.post(
        "/test/scenario",
        {"scenario": SCENARIO, "maxTurns": "2", "runs": "1", "context": '{"name": "Sam"}'},
    )
    session = Session.objects.get(pk=response["Location"].rstrip("/").split("/")[-1])
    run = session.runs.get()
    assert _execute(run.id) == "completed"
    run.refresh_from_db()
    # every run_deck call counts: the persona's turns and the deck's
    ends = [
        e.payload["usage"]["totalTokens"] for e in run.events.filter(type="run.end").order_by("id")
    ]
    assert len(ends) > 2 and run.total_tokens == sum(ends)
    # the model shown is the one that answered the deck (the persona has its own calls)
    assert client.get(f"/test/{session.id}.json").json()["model"] == run.model == "offline/demo"
    # the deck's turns, with the persona's recorded messages, replay offline as they were
    replay = client.post(f"/test/{session.id}/rerun.json")
    assert replay.status_code == 201, replay.content
    replay_run = Run.objects.get(session_id=replay.json()["id"])
    assert _execute(replay_run.id) == "completed"
    compared = client.get(f"/test/{replay.json()['id']}/compare.json").json()
    assert compared["verdict"] == "identical", compared["differences"]
    assert compared["turns"]["replay"] == 2


def test_a_scenario_choice_outside_the_listing_loads_nothing(client, tmp_path, settings):
    # A deck.py in a hidden folder (not listed) was imported while reading its context form,
    # before the choice was refused.
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    marker = tmp_path / "imported"
    (root / ".hidden" / "evil").mkdir(parents=True)
    (root / ".hidden" / "evil" / "deck.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'x')\n"
    )
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        response = client.post("/test/scenario?format=json", {"scenario": ".hidden/evil/deck.py|x"})
    assert response.status_code == 400 and "is not a scenario of" in response.json()["error"]
    assert not marker.exists()
