"""SpanBuilder's placement rules with the SDK's in-memory exporter: grader turns graded
concurrently under one run id (the simulator's grade runs), a run cut short, and events it
cannot place."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from gambit.core import grade_state, state_from_dict
from gambit.otel.spans import SpanBuilder
from gambit.providers.offline import ScriptedProvider

TURN_GRADER = """
import gambit
deck = gambit.define_deck(
    run=lambda ctx: {"score": -1 if "bad" in ctx.input["messageToGrade"]["content"] else 3,
                     "reason": "r"},
    context_schema="gambit://schemas/graders/contexts/turn.zod.ts",
    response_schema="gambit://schemas/graders/grader_output.zod.ts",
)
"""


def pipeline() -> tuple[SpanBuilder, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return SpanBuilder(provider.get_tracer("test")), memory


def test_turns_graded_concurrently_under_one_run_id_each_get_their_own_grade_span(
    tmp_path: Path,
):
    grader = tmp_path / "turns.py"
    grader.write_text(TURN_GRADER, encoding="utf-8")
    state = state_from_dict(
        {
            "runId": "run-graded",
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "good answer"},
                {"role": "user", "content": "b"},
                {"role": "assistant", "content": "bad answer"},
            ],
        }
    )
    builder, memory = pipeline()
    run, _ = asyncio.run(
        grade_state(
            grader,
            state,
            provider=ScriptedProvider(),
            on_trace=builder.on_event,
            run_id="run-shared",  # as the simulator's grade run gives it
        )
    )
    assert run.mode == "turns" and len(run.grades) == 2
    spans = memory.get_finished_spans()
    # Spans start at their events' timestamps, which are milliseconds: two turns that start in
    # the same millisecond tie, and then go in the order of the turns (not of their ends).
    grades = sorted(
        (s for s in spans if s.name.startswith("grade ")),
        key=lambda s: (s.start_time, s.attributes["gambit.grade.message_index"]),
    )
    assert [g.attributes["gambit.grade.message_index"] for g in grades] == [1, 3]
    assert [g.attributes["gen_ai.evaluation.score.label"] for g in grades] == ["pass", "fail"]
    for grade in grades:
        children = [s for s in spans if s.parent and s.parent.span_id == grade.context.span_id]
        assert [c.name for c in children] == ["invoke_agent turns"]
        assert grade.attributes["gen_ai.conversation.id"] == "run-graded"
    assert builder.skipped == 0


def test_a_run_cut_short_ends_its_open_spans_as_errors_and_bad_events_are_skipped():
    builder, memory = pipeline()
    builder.on_event({"type": "run.start", "runId": "r", "ts": 1000, "deckPath": "/d/PROMPT.md"})
    builder.on_event({"type": "deck.start", "runId": "r", "ts": 1001, "actionCallId": "a"})
    builder.on_event({"type": "model.call", "runId": "r", "ts": 1002, "actionCallId": "a"})
    builder.on_event({"type": "tool.result", "runId": "r", "ts": 1003, "actionCallId": "x"})
    builder.on_event({"type": "run.end", "runId": 7, "ts": "soon"})
    builder.on_event({"type": "model.call", "runId": "r", "ts": 1004, "params": "not a dict"})
    assert builder.skipped == 2  # a result without its call, an end without its start
    builder.close(1_005_000_000)
    spans = memory.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat unknown",
        "chat unknown",
        "invoke_agent d",  # the run, named after its deck's folder
        "invoke_agent deck",  # a deck.start that names no deck
    ]
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    assert all(s.end_time == 1_005_000_000 for s in spans)
