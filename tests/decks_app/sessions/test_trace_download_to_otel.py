"""A session's trace downloaded from the simulator (`/test/<id>/export/trace.jsonl`) is what
`gambit export otel` sends later (docs/observability.md, "A run made offline, sent later"):
the run's spans reach a real OTLP/HTTP receiver on 127.0.0.1 with the session as the
conversation."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decks_app.runs import executor, queue
from decks_app.sessions.actions import create_session, send_message
from tests.otel.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

GAMBIT = str(Path(sys.executable).parent / "gambit")


def test_a_downloaded_session_trace_exports_its_spans(client, workspace, tmp_path):
    session = create_session(workspace, "support/PROMPT.md", model="offline/demo")
    run = send_message(session, "where is order A1002?")
    assert queue.claim_next_run("test-worker") == run.id
    assert asyncio.run(asyncio.wait_for(executor.execute_run(run.id), 30)) == "completed"
    response = client.get(f"/test/{session.id}/export/trace.jsonl")
    assert response.status_code == 200
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b"".join(response.streaming_content))

    receiver = Receiver().start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        sent = subprocess.run(
            [GAMBIT, "export", "otel", str(trace), "--endpoint", receiver.endpoint]
            + ["--conversation-id", session.id],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        spans = receiver.wait_for(1)
    finally:
        receiver.stop()
    assert sent.stdout.startswith(f"sent {len(spans)} spans")
    names = {s.name for s in spans}
    assert "invoke_agent support" in names and "chat offline/demo" in names
    assert "execute_tool order_status" in names
    # grouped with the session's live spans (without the option: the run's own id)
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {session.id}
