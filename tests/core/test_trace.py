"""Trace events (docs/decks.md, "Traces"), the JSONL writer and reader."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pydantic import ValidationError

from gambit.core._errors import GambitError
from gambit.core._messages import ChatMessage
from gambit.core._openresponses import (
    OutputTextDeltaEvent,
    ResponseUsage,
    UnknownItem,
    function_call_item,
    message_item,
)
from gambit.core._trace import (
    ActionEndEvent,
    ActionStartEvent,
    DeckEndEvent,
    DeckStartEvent,
    GambitEventMeta,
    LogEvent,
    MessageUserEvent,
    ModelCallEvent,
    ModelResultEvent,
    ModelStreamEvent,
    MonologEvent,
    ResponseTraceEvent,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TraceError,
    TraceWriter,
    UnknownTraceEvent,
    now_ms,
    read_trace,
    trace_event_from_dict,
    trace_event_to_dict,
    trace_event_to_json,
)

RUN = "run-0123456789abcdef01234567"
ROOT = "action-aaaaaaaaaaaaaaaaaaaaaaaa"
TS = 1768521600000

CATALOGUE = [
    (
        RunStartEvent,
        {
            "type": "run.start",
            "ts": TS,
            "runId": RUN,
            "deckPath": "/decks/root/PROMPT.md",
            "input": {"question": "hours?"},
            "initialUserMessage": "hi",
            "permissions": {"layers": ["host", "declaration"], "effective": {"read": ["/d"]}},
        },
    ),
    (RunEndEvent, {"type": "run.end", "ts": TS, "seq": 99, "runId": RUN}),
    (
        DeckStartEvent,
        {
            "type": "deck.start",
            "ts": TS,
            "runId": RUN,
            "deckPath": "/decks/root/PROMPT.md",
            "actionCallId": ROOT,
            "permissions": {},
        },
    ),
    (
        DeckEndEvent,
        {
            "type": "deck.end",
            "ts": TS,
            "runId": RUN,
            "deckPath": "/decks/child/PROMPT.md",
            "actionCallId": "action-bbbbbbbbbbbbbbbbbbbbbbbb",
            "parentActionCallId": "call-child",
        },
    ),
    (
        MessageUserEvent,
        {
            "type": "message.user",
            "ts": TS,
            "runId": RUN,
            "actionCallId": ROOT,
            "deckPath": "/d/PROMPT.md",
            "message": {"role": "user", "content": "first turn"},
        },
    ),
    (
        ModelCallEvent,
        {
            "type": "model.call",
            "ts": TS,
            "runId": RUN,
            "actionCallId": ROOT,
            "deckPath": "/d/PROMPT.md",
            "model": "openrouter/openai/gpt-4o-mini",
            "stream": True,
            "messageCount": 2,
            "toolCount": 1,
            "messages": [
                {"role": "system", "content": "Be helpful."},
                {"role": "user", "content": "hi"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "lookup", "parameters": {"type": "object"}},
                }
            ],
            "stateMessages": 0,
            "mode": "responses",
            "items": [
                {
                    "type": "message",
                    "role": "system",
                    "content": [{"type": "input_text", "text": "Be helpful."}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                },
            ],
            "responseItems": [
                {
                    "type": "message",
                    "role": "system",
                    "content": [{"type": "input_text", "text": "Be helpful."}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                },
            ],
        },
    ),
    (
        ModelResultEvent,
        {
            "type": "model.result",
            "ts": TS,
            "runId": RUN,
            "actionCallId": ROOT,
            "deckPath": "/d/PROMPT.md",
            "model": "m",
            "finishReason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q":"x"}'},
                    }
                ],
            },
            "toolCalls": [{"id": "call-1", "name": "lookup", "args": {"q": "x"}}],
            "stateMessages": 3,
            "usage": {
                "promptTokens": 11,
                "completionTokens": 7,
                "totalTokens": 18,
                "reasoningTokens": 4,
            },
            "mode": "responses",
            "output": [
                {
                    "type": "function_call",
                    "call_id": "call-1",
                    "name": "lookup",
                    "arguments": '{"q":"x"}',
                }
            ],
            "responseItems": [
                {
                    "type": "function_call",
                    "call_id": "call-1",
                    "name": "lookup",
                    "arguments": '{"q":"x"}',
                }
            ],
        },
    ),
    (
        ModelStreamEvent,
        {
            "type": "model.stream.event",
            "ts": TS,
            "runId": RUN,
            "actionCallId": ROOT,
            "deckPath": "/d/PROMPT.md",
            "model": "m",
            "event": {"type": "codex.event", "payload": {"a": None}},
        },
    ),
    (
        ActionStartEvent,
        {
            "type": "action.start",
            "ts": TS,
            "runId": RUN,
            "actionCallId": "call-1",
            "name": "lookup",
            "path": "lookup",
            "parentActionCallId": ROOT,
            "permissions": {"read": []},
        },
    ),
    (
        ActionEndEvent,
        {
            "type": "action.end",
            "ts": TS,
            "runId": RUN,
            "actionCallId": "call-1",
            "name": "lookup",
            "path": "lookup",
            "parentActionCallId": ROOT,
        },
    ),
    (
        ToolCallEvent,
        {
            "type": "tool.call",
            "ts": TS,
            "runId": RUN,
            "actionCallId": "call-ctx",
            "name": "gambit_context",
            "args": {},
            "toolKind": "internal",
            "parentActionCallId": ROOT,
        },
    ),
    (
        ToolResultEvent,
        {
            "type": "tool.result",
            "ts": TS,
            "runId": RUN,
            "actionCallId": "call-1",
            "name": "lookup",
            "result": '{"payload":{"value":"action"},"status":200}',
            "toolKind": "action",
            "parentActionCallId": ROOT,
        },
    ),
    (
        LogEvent,
        {
            "type": "log",
            "ts": TS,
            "runId": RUN,
            "deckPath": "/d/deck.py",
            "actionCallId": ROOT,
            "level": "warn",
            "title": "careful",
            "message": "something",
            "body": {"k": [1, 2]},
            "meta": {"source": "x"},
        },
    ),
    (
        MonologEvent,
        {
            "type": "monolog",
            "ts": TS,
            "runId": RUN,
            "deckPath": "/decks/child/PROMPT.md",
            "actionCallId": "action-bbbbbbbbbbbbbbbbbbbbbbbb",
            "parentActionCallId": "call-child",
            "content": "child-internal",
        },
    ),
    (
        ResponseTraceEvent,
        {
            "type": "response.output_text.delta",
            "ts": TS,
            "output_index": 0,
            "delta": "he",
            "sequence_number": 2,
            "_gambit": {
                "run_id": RUN,
                "action_call_id": ROOT,
                "deck_path": "/d/PROMPT.md",
                "model": "dummy-model",
            },
        },
    ),
    (
        ResponseTraceEvent,
        {
            "type": "response.reasoning_summary_text.delta",
            "ts": TS,
            "delta": "thinking",
            "_gambit": {"run_id": RUN, "action_call_id": ROOT, "parent_action_call_id": "call-1"},
        },
    ),
    (UnknownTraceEvent, {"type": "custom.thing", "ts": TS, "anything": [1, None, {"x": None}]}),
]


@pytest.mark.parametrize(("model", "data"), CATALOGUE, ids=[d["type"] for _, d in CATALOGUE])
def test_every_event_type_round_trips(model, data):
    event = trace_event_from_dict(data)
    assert type(event) is model
    assert trace_event_to_dict(event) == data
    assert json.loads(trace_event_to_json(event)) == data
    # Model -> dict -> model is stable too.
    assert trace_event_from_dict(trace_event_to_dict(event)) == event


def test_python_names_are_snake_case_and_json_keys_camel_case():
    event = ToolCallEvent(
        ts=TS,
        run_id=RUN,
        action_call_id="call-1",
        name="lookup",
        args={"query": "hello"},
        tool_kind="mcp_bridge",
        parent_action_call_id=ROOT,
    )
    assert trace_event_to_dict(event) == {
        "type": "tool.call",
        "ts": TS,
        "runId": RUN,
        "actionCallId": "call-1",
        "name": "lookup",
        "args": {"query": "hello"},
        "toolKind": "mcp_bridge",
        "parentActionCallId": ROOT,
    }


def test_model_events_carry_mode_items_and_derived_message():
    call = ModelCallEvent(
        run_id=RUN,
        mode="responses",
        items=[message_item("user", "hi")],
        response_items=[message_item("user", "hi")],
    )
    assert call.input_items == [message_item("user", "hi")]
    assert ModelCallEvent(run_id=RUN, response_items=[]).input_items == []
    result = ModelResultEvent(
        run_id=RUN,
        mode="responses",
        output=[message_item("assistant", "ok")],
        message=ChatMessage(role="assistant", content="ok"),
        usage=ResponseUsage(
            prompt_tokens=11, completion_tokens=7, total_tokens=18, reasoning_tokens=4
        ),
        finish_reason="stop",
    )
    assert result.output_items == [message_item("assistant", "ok")]
    data = trace_event_to_dict(result)
    assert data["usage"] == {
        "promptTokens": 11,
        "completionTokens": 7,
        "totalTokens": 18,
        "reasoningTokens": 4,
    }
    assert data["message"] == {"role": "assistant", "content": "ok"}
    assert data["mode"] == "responses"
    chat = ModelCallEvent(run_id=RUN, mode="chat", messages=[ChatMessage(role="user", content="x")])
    assert chat.input_items is None and trace_event_to_dict(chat)["mode"] == "chat"


def test_model_result_keeps_unknown_items():
    event = trace_event_from_dict(
        {
            "type": "model.result",
            "runId": RUN,
            "ts": TS,
            "responseItems": [{"type": "reasoning", "id": "rs_1", "summary": []}],
        }
    )
    assert isinstance(event.output_items[0], UnknownItem)


def test_response_trace_event_back_to_provider_event():
    event = trace_event_from_dict(CATALOGUE[-3][1])
    assert isinstance(event.gambit, GambitEventMeta)
    assert event.gambit.model == "dummy-model"
    assert event.sequence_number == 2
    provider = event.to_response_event()
    assert isinstance(provider, OutputTextDeltaEvent)
    assert provider.delta == "he" and provider.sequence_number == 2


def test_response_trace_event_requires_response_prefix():
    with pytest.raises(ValidationError):
        ResponseTraceEvent(type="tool.call")


def test_ts_is_integer_epoch_ms_and_stamped_when_missing():
    before = now_ms()
    event = RunEndEvent(run_id=RUN)
    after = now_ms()
    assert isinstance(event.ts, int) and before <= event.ts <= after
    assert abs(event.ts - time.time() * 1000) < 60_000
    parsed = trace_event_from_dict({"type": "run.end", "runId": RUN})
    assert isinstance(parsed.ts, int)
    assert (
        trace_event_from_dict({"type": "run.end", "runId": RUN, "ts": 1.9e12}).ts
        == 1_900_000_000_000
    )
    assert RunEndEvent(run_id=RUN, ts=5, seq=3).seq == 3
    assert RunEndEvent(run_id=RUN).seq is None


def test_log_level_defaults_to_info():
    assert LogEvent(run_id=RUN).level == "info"
    with pytest.raises(ValidationError):
        LogEvent(run_id=RUN, level="loud")


def test_extra_fields_are_kept_on_known_events():
    data = {
        "type": "run.end",
        "runId": RUN,
        "ts": TS,
        "hostNote": {"message": "boom"},
        "nullish": None,
    }
    event = trace_event_from_dict(data)
    assert event.model_extra == {"hostNote": {"message": "boom"}, "nullish": None}
    assert trace_event_to_dict(event) == data


def test_event_without_type_is_rejected():
    with pytest.raises(ValidationError):
        trace_event_from_dict({"runId": RUN})


# --------------------------------------------------------------------------- writer / reader


def test_writer_reader_round_trip(tmp_path):
    path = tmp_path / "traces" / "run.jsonl"
    events = [trace_event_from_dict(d) for _, d in CATALOGUE]
    with TraceWriter(path) as writer:
        writer.write_all(events[:3])
        for event in events[3:]:
            writer(event)  # a writer is a trace callback
    assert read_trace(path) == events
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(events) + 1
    assert all(json.loads(line)["type"] for line in lines[:-1])


def test_writer_flushes_each_event_and_appends(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)
    writer.write(RunStartEvent(run_id=RUN, ts=TS))
    # Visible before close: flushed per event.
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1
    writer.write({"type": "run.end", "runId": RUN, "ts": TS})
    writer.close()
    with TraceWriter(path) as again:
        again.write(RunEndEvent(run_id="run-second", ts=TS))
    assert [e.run_id for e in read_trace(path)] == [RUN, RUN, "run-second"]


def test_writer_keeps_non_ascii_and_raw_strings(tmp_path):
    path = tmp_path / "t.jsonl"
    raw = '{ "q" : "日本語 😀",\n "sep": "\u2028" }'
    event = ModelResultEvent(
        run_id=RUN,
        ts=TS,
        output=[function_call_item("call-1", "gambit_respond", raw)],
    )
    with TraceWriter(path) as writer:
        writer.write(event)
    text = path.read_text(encoding="utf-8")
    assert "日本語 😀" in text and "\\u65e5" not in text
    (back,) = read_trace(path)
    assert back.output[0].arguments == raw


def test_writer_is_thread_safe(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:

        def work(n: int) -> None:
            for i in range(50):
                writer(LogEvent(run_id=RUN, ts=TS, message="x" * 200, meta={"n": n, "i": i}))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(read_trace(path)) == 200


def test_writer_rejects_invalid_dicts(tmp_path):
    with TraceWriter(tmp_path / "t.jsonl") as writer, pytest.raises(ValidationError):
        writer.write({"type": "tool.call", "runId": RUN})


def test_reader_skips_blank_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '\n{"type":"run.end","runId":"r","ts":1}\r\n   \n{"type":"run.end","runId":"s","ts":2}',
        encoding="utf-8",
    )
    assert [e.run_id for e in read_trace(path)] == ["r", "s"]


@pytest.mark.parametrize(
    ("lines", "line_no", "fragment"),
    [
        (['{"type":"run.end","runId":"r"}', '{"type": "run.end", "runId": '], 2, "invalid JSON"),
        (['{"type":"run.end","runId":"r"}', "", "[1, 2]"], 3, "expected a JSON object, got list"),
        (
            ["", "", '{"type":"tool.call","runId":"r"}'],
            3,
            "invalid 'tool.call' event: actionCallId",
        ),
        (['{"runId":"r"}'], 1, "invalid event: type"),
        (['{"type":"log","runId":"r","level":"loud"}'], 1, "level"),
    ],
)
def test_reader_reports_malformed_line_numbers(tmp_path, lines, line_no, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert isinstance(err.value, GambitError)
    assert err.value.file == str(path)
    assert err.value.line == line_no
    assert str(err.value).startswith(f"{path}:{line_no}: ")
    assert fragment in str(err.value)


def test_reader_missing_file(tmp_path):
    path = tmp_path / "none.jsonl"
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(err.value) == f"{path}: trace file not found"
    assert err.value.line is None
