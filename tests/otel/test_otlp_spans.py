"""A run with an action, a tool call and a grade, exported live to a real OTLP/HTTP receiver
on 127.0.0.1 (tests/otel/receiver.py decodes the protobuf with opentelemetry-proto): the span
tree, names and GenAI attributes (docs/observability.md)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gambit.core import grade_state, load_deck_tree, run_deck, state_from_dict
from gambit.otel import SEMCONV_VERSION
from gambit.otel.live import Export, close_sink
from gambit.providers.offline import Call, Reply, ScriptedProvider, Stream

from .receiver import Receiver, Span

MODEL = 'modelParams.model = "scripted-model"\nmodelParams.temperature = 0.3\n'
ACTION_SCHEMAS = """
contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
"""
GRADER = """
import gambit
deck = gambit.define_deck(
    run=lambda ctx: {"score": 2, "reason": "kind and concrete"},
    context_schema="gambit://schemas/graders/contexts/conversation.zod.ts",
    response_schema="gambit://schemas/graders/grader_output.zod.ts",
)
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def deck(root: Path, rel: str, front: str, body: str = "Be helpful.") -> Path:
    return write(root, rel, f"+++\n{front.strip()}\n+++\n\n{body}\n")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


@pytest.fixture
def otel_env(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team-key=secret-1")
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    return dict(os.environ)


async def run_and_grade(tmp_path: Path, on_trace: Any) -> None:
    """A root deck that calls an LLM action deck and an external tool, streams its answer,
    then a grader's grade of the conversation."""
    deck(tmp_path, "d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    root = deck(
        tmp_path,
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"\n'
        '[[tools]]\nname = "lookup"\ndescription = "d"\n',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Reply(text="let me see", calls=[Call("child", {"input": "x"}), Call("lookup", {"k": 1})]),
        Stream(["child ", "says"]),
        Stream(["all ", "done"]),
    )
    result = await run_deck(
        load_deck_tree(root),
        provider=provider,
        message="where is my order?",
        stream=True,
        on_trace=on_trace,
        on_tool=lambda request: {"found": request["args"]},
    )
    grader = write(tmp_path, "grader.py", GRADER)
    state = state_from_dict(
        {
            "runId": result.state.run_id,
            "messages": [
                {"role": "user", "content": "where is my order?"},
                {"role": "assistant", "content": "all done"},
            ],
        }
    )
    await grade_state(grader, state, provider=provider, threshold=1, on_trace=on_trace)


async def export_run(tmp_path: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    warnings: list[str] = []
    export = Export(env, warnings.append)
    spans = export.sink()
    events: list[dict[str, Any]] = []

    def on_trace(event: dict[str, Any]) -> None:
        events.append(event)
        spans(event)

    await run_and_grade(tmp_path, on_trace)
    close_sink(spans)
    export.close()
    assert warnings == []
    return events


def one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


async def test_a_run_with_an_action_a_tool_call_and_a_grade_arrives_as_a_genai_span_tree(
    tmp_path: Path, receiver: Receiver, otel_env: dict[str, str]
):
    events = await export_run(tmp_path, otel_env)
    spans = receiver.wait_for(1)
    roots = sorted((s for s in spans if not s.parent_id), key=lambda s: s.start_ns)
    assert [receiver.tree(r) for r in roots] == [
        [
            "invoke_agent d",  # the run
            "  invoke_agent d",  # the root deck's turn
            "    chat scripted-model",
            "    invoke_agent child",  # the action
            "      execute_tool child",  # the model's call of it
            "        execute_tool gambit_context",
            "        invoke_agent child",  # the action deck
            "          chat scripted-model",
            "    invoke_agent lookup",
            "      execute_tool lookup",
            "    chat scripted-model",
        ],
        [
            "grade grader",
            "  invoke_agent grader",  # the grader's run (a compute deck: no model call)
        ],
    ]
    # One trace per root; children inside their parents' time.
    by_id = receiver.by_id()
    for span in spans:
        if span.parent_id:
            parent = by_id[span.parent_id]
            assert span.trace_id == parent.trace_id
            assert parent.start_ns <= span.start_ns <= span.end_ns <= parent.end_ns, span.name

    run_id = next(e["runId"] for e in events if e["type"] == "run.start")
    run = roots[0]
    assert run.kind == 1  # INTERNAL
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "d"
    assert run.attributes["gambit.run.status"] == "completed"
    run_end = next(e for e in events if e["type"] == "run.end" and e["runId"] == run_id)
    assert run.attributes["gen_ai.usage.input_tokens"] == run_end["usage"]["promptTokens"]
    for span in receiver.tree_spans(run):
        assert span.attributes["gen_ai.conversation.id"] == run_id, span.name

    chats = [s for s in spans if s.name == "chat scripted-model"]
    results = [e for e in events if e["type"] == "model.result"]
    assert len(chats) == len(results) == 3
    for chat, result in zip(sorted(chats, key=lambda s: s.start_ns), results, strict=True):
        a = chat.attributes
        assert chat.kind == 3  # CLIENT
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "offline"
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "scripted-model"
        assert a["gen_ai.request.temperature"] == 0.3
        assert a["gen_ai.usage.input_tokens"] == result["usage"]["promptTokens"]
        assert a["gen_ai.usage.output_tokens"] == result["usage"]["completionTokens"]
        assert a["gen_ai.response.finish_reasons"] == [result["finishReason"]]
        assert a["gen_ai.response.time_to_first_chunk"] >= 0  # streamed
        assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a
    assert sorted(c.attributes["gen_ai.response.finish_reasons"][0] for c in chats) == [
        "stop",
        "stop",
        "tool_calls",
    ]

    tool = one(spans, "execute_tool lookup")
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "lookup"
    assert tool.attributes["gambit.tool.kind"] == "external"
    call = next(e for e in events if e["type"] == "tool.call" and e["name"] == "lookup")
    assert tool.attributes["gen_ai.tool.call.id"] == call["actionCallId"]
    assert "gen_ai.tool.call.arguments" not in tool.attributes  # content is opt-in

    grade = roots[1]
    g = grade.attributes
    assert g["gen_ai.evaluation.name"] == "grader"
    assert g["gen_ai.evaluation.score.value"] == 2
    assert g["gen_ai.evaluation.score.label"] == "pass"
    assert g["gambit.grade.passed"] is True and g["gambit.grade.threshold"] == 1
    assert g["gen_ai.conversation.id"] == run_id  # the conversation it graded
    assert "gen_ai.evaluation.explanation" not in g
    assert [name for name, _ in grade.events] == ["gen_ai.evaluation.result"]

    # The resource, the scope's schema (the conventions' version) and the standard headers.
    assert run.resource["service.name"] == "gambit"
    assert run.schema_url == f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
    assert all(r["path"] == "/v1/traces" for r in receiver.requests)
    assert {r.get("x-team-key") for r in receiver.requests} == {"secret-1"}


async def test_message_content_only_with_the_standard_opt_in(
    tmp_path: Path,
    receiver: Receiver,
    otel_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
):
    otel_env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    await export_run(tmp_path, otel_env)
    spans = receiver.wait_for(1)
    first = min((s for s in spans if s.name == "chat scripted-model"), key=lambda s: s.start_ns)
    import json

    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert sent[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "where is my order?"}],
    }
    answer = json.loads(first.attributes["gen_ai.output.messages"])
    assert answer[0]["finish_reason"] == "tool_calls"
    assert [p.get("name") for p in answer[0]["parts"] if p["type"] == "tool_call"] == [
        "child",
        "lookup",
    ]
    tool = one(spans, "execute_tool lookup")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"k": 1}
    assert json.loads(tool.attributes["gen_ai.tool.call.result"])["payload"] == {"found": {"k": 1}}
    grade = one(spans, "grade grader")
    assert grade.attributes["gen_ai.evaluation.explanation"] == "kind and concrete"
