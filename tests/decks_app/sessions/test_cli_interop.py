"""The files the simulator imports and exports are the ones `gambit run` reads and writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from decks_app.models import Session

ROOT = Path(__file__).resolve().parents[3]
DECK = str(ROOT / "examples" / "support" / "PROMPT.md")
GAMBIT = [sys.executable, "-c", "from gambit.cli.main import main; main()"]

pytestmark = pytest.mark.django_db


def _gambit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*GAMBIT, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_cli_session_imports_and_an_export_continues_in_the_cli(client, workspace, tmp_path):
    state, trace = tmp_path / "s.json", tmp_path / "t.jsonl"
    done = _gambit(
        "run",
        DECK,
        "--model-force",
        "offline/echo",
        "--message",
        "hi <there>",
        "--state",
        str(state),
        "--trace",
        str(trace),
    )
    assert done.returncode == 0, done.stderr
    r = client.post(
        "/test/import?format=json",
        {
            "deck": "support/PROMPT.md",
            "state": SimpleUploadedFile("s.json", state.read_bytes()),
            "trace": SimpleUploadedFile("t.jsonl", trace.read_bytes()),
        },
    )
    assert r.status_code == 201, r.content
    session = Session.objects.get(pk=r.json()["id"])
    page = client.get(f"/test/{session.id}.json").json()
    assert [b["text"] for b in page["conversation"] if b["kind"] in ("user", "assistant")] == [
        "hi <there>",
        "You said: hi <there>",
    ]
    assert page["trace"][0]["status"] == "completed"
    assert session.events.count() == len(trace.read_text().splitlines())

    exported = tmp_path / "exported.json"
    exported.write_bytes(client.get(f"/test/{session.id}/export/state.json").content)
    done = _gambit(
        "run", DECK, "--model-force", "offline/echo", "--message", "more", "--state", str(exported)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "You said: more"
    contents = [m.get("content") for m in json.loads(exported.read_text())["messages"]]
    assert contents[-4:] == ["hi <there>", "You said: hi <there>", "more", "You said: more"]


@pytest.mark.django_db(transaction=True)
def test_a_cli_session_imports_with_its_tokens_model_and_grades_and_replays_offline(
    client, workspace, tmp_path
):
    import asyncio

    from decks_app.runs import executor, queue

    state, trace = tmp_path / "s.json", tmp_path / "t.jsonl"
    for message in ("hi", "more <please>"):  # two runs, appended to one trace file
        done = _gambit(
            "run",
            DECK,
            "--model-force",
            "offline/echo",
            "--message",
            message,
            "--state",
            str(state),
            "--trace",
            str(trace),
        )
        assert done.returncode == 0, done.stderr
    grader = str(ROOT / "examples" / "support" / "graders" / "tone" / "PROMPT.md")
    done = _gambit("grade", grader, "--state", str(state), "--model-force", "offline/demo")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    ends = [e["usage"]["totalTokens"] for e in events if e["type"] == "run.end"]
    assert len(ends) == 2

    r = client.post(
        "/test/import?format=json",
        {
            "deck": "support/PROMPT.md",
            "state": SimpleUploadedFile("s.json", state.read_bytes()),
            "trace": SimpleUploadedFile("t.jsonl", trace.read_bytes()),
        },
    )
    assert r.status_code == 201, r.content
    imported = r.json()["id"]
    page = client.get(f"/test/{imported}.json").json()
    assert page["tokens"] == sum(ends)  # both runs, not only the last
    assert (page["model"], page["offline"]) == ("offline/echo", True)
    (grade,) = page["gradingRuns"]
    assert grade["imported"] and grade["status"] == "completed"
    assert [g["id"] for g in client.get(f"/grade.json?session={imported}").json()["imported"]] == [
        grade["id"]
    ]
    assert page["rerun"]["available"] is True

    # Re-run offline: the turns the trace recorded, answered by the recording.
    r = client.post(f"/test/{imported}/rerun?format=json")
    assert r.status_code == 201, r.content
    replay = r.json()["id"]
    run_id = queue.claim_next_run("test-worker")
    assert asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 30)) == "completed"
    compared = client.get(f"/test/{replay}/compare.json").json()
    assert compared["verdict"] == "identical", compared["differences"]
    assert compared["turns"] == {"original": 2, "replay": 2}
    data = client.get(f"/test/{replay}.json").json()
    assert (data["model"], data["tokens"]) == ("offline-replay", sum(ends))
