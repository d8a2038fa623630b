"""The simulator exports a run's spans when OTEL_EXPORTER_OTLP_ENDPOINT is set
(docs/observability.md): a grade run executed by the run executor reaches a real OTLP/HTTP
receiver on 127.0.0.1, its grades and model calls nested, the graded session's id as the
conversation."""

from __future__ import annotations

import asyncio

import pytest

from decks_app.runs import executor, queue
from gambit.otel import live
from tests.decks_app.conftest import chat_session
from tests.otel.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

TONE = "support/graders/tone/PROMPT.md"


@pytest.fixture
def receiver(monkeypatch):
    found = Receiver().start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.endpoint)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    yield found
    export = live._EXPORT.pop("process", None)  # the process's pipeline, to this receiver
    if export is not None:
        export.close()
    found.stop()


def test_a_grade_run_in_the_simulator_exports_its_spans(client, workspace, receiver):
    session = chat_session(workspace, reply="Your order A1002 ships today.")
    response = client.post("/grade/run", {"session": session.id, "grader": TONE})
    run_id = response["Location"].rstrip("/").split("/")[-1]
    assert queue.claim_next_run("test-worker") == run_id
    assert asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 30)) == "completed"
    live._EXPORT["process"].close()  # sends what is queued

    spans = receiver.wait_for(1)
    [grade] = [s for s in spans if s.name.startswith("grade ")]
    assert grade.attributes["gen_ai.evaluation.name"] == "Tone: kind, concrete, short"
    assert grade.attributes["gen_ai.evaluation.score.label"] in ("pass", "fail")
    assert receiver.tree(grade)[:3] == [
        "grade Tone: kind, concrete, short",
        "  invoke_agent tone",
        "    execute_tool gambit_context",
    ]
    chats = [s for s in receiver.tree_spans(grade) if s.name.startswith("chat ")]
    assert chats and all(c.attributes["gen_ai.request.model"] for c in chats)
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {session.id}


def test_a_verify_batch_in_the_simulator_exports_each_scenario_run_with_its_grades(
    client, workspace, receiver
):
    form = {
        "deck": "support/PROMPT.md",
        "scenario": "support/scenarios/late_delivery/PROMPT.md",
        "grader": TONE,
        "runs": "2",
        "repeats": "1",
        "concurrency": "2",
        "maxTurns": "1",
        "threshold": "0",
    }
    response = client.post("/grade/verify/run", form)
    run_id = response["Location"].rstrip("/").split("/")[-1]
    assert queue.claim_next_run("test-worker") == run_id
    assert asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60)) == "completed"
    live._EXPORT["process"].close()

    spans = receiver.wait_for(1)
    grades = [s for s in spans if s.name.startswith("grade ")]
    assert len(grades) == 2  # two scenario runs of one graded turn, graded once
    conversations = {g.attributes["gen_ai.conversation.id"] for g in grades}
    assert len(conversations) == 2 and all(c.startswith("vrun-") for c in conversations)
    # Each scenario run's persona and deck turns share its conversation with its grade.
    for conversation in conversations:
        names = {
            s.name for s in spans if s.attributes.get("gen_ai.conversation.id") == conversation
        }
        assert {"invoke_agent support", "invoke_agent late_delivery"} <= names
