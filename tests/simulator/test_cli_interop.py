"""The files the simulator imports and exports are the ones `gambit run` reads and writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from decks_app.models import Session

ROOT = Path(__file__).resolve().parents[2]
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
