"""The one Open Responses event encoder (`gambit.core.provider.ResponseEventEncoder`), and the
streams built on it: every event it writes validates against the specification's own schemas
(`openresponses-types`, through tests/endpoint/conformance.py), in the order the specification
gives; the Chat Completions stream converter follows the same sequence."""

from __future__ import annotations

import json
from typing import Any

from gambit.core.provider import ResponseEventEncoder
from gambit.providers._chat_wire import ChatStreamConverter
from tests.endpoint import conformance


def resource(encoder: ResponseEventEncoder, status: str) -> dict[str, Any]:
    """A whole `ResponseResource` (every field the specification requires) around the
    encoder's output."""
    done = status != "in_progress"
    return {
        **conformance._placeholder_response(),
        "id": "resp-1",
        "status": status,
        "completed_at": 1 if done else None,
        "output": [dict(item) for item in encoder.output],
        "error": {"code": "x", "message": "broke"} if status == "failed" else None,
    }


def as_frames(events: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    return [(e["type"], json.dumps(e)) for e in events] + [(None, "[DONE]")]


def test_a_full_stream_conforms_to_the_specification():
    encoder = ResponseEventEncoder()
    events = encoder.created(resource(encoder, "in_progress"))
    message, opened = encoder.open_message()
    events += opened
    for delta in ["Hel", "lo"]:
        events += encoder.text_delta(message, delta)
    events += encoder.text_delta(message, " again", content_index=1)  # a second part
    events += encoder.close(message)
    call, opened = encoder.open_function_call("call_1", "lookup")
    events += opened + encoder.arguments_delta(call, '{"id":') + encoder.arguments_delta(call, "7}")
    events += encoder.item({"type": "acme:note", "id": "n1", "status": "completed"})
    events += encoder.close_all()
    events.append(encoder.terminal(resource(encoder, "completed")))

    conformance.validate_stream(as_frames(events))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.content_part.added") == 2
    text, args = encoder.output[0], encoder.output[1]
    assert [p["text"] for p in text["content"]] == ["Hello", " again"]
    assert args["arguments"] == '{"id":7}' and args["status"] == "completed"
    # An item's added event shows it as it was then, not as it ended.
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert added[0]["content"] == [] and added[1]["arguments"] == ""
    assert all(item["status"] == "in_progress" for item in added)


def test_a_failed_stream_ends_with_error_then_failed():
    encoder = ResponseEventEncoder()
    events = encoder.created(resource(encoder, "in_progress"))
    index, opened = encoder.open_message()
    events += opened + encoder.text_delta(index, "partial") + encoder.close(index)
    events.append(encoder.error("server_error", "x", "broke"))
    events.append(encoder.terminal(resource(encoder, "failed")))
    conformance.validate_stream(as_frames(events))
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]


def test_the_short_sequence_has_no_in_progress_parts_or_logprobs():
    encoder = ResponseEventEncoder(full=False)
    events = encoder.created({"id": "r", "status": "in_progress"})
    index, opened = encoder.open_message()
    events += opened + encoder.text_delta(index, "hi") + encoder.close(index)
    events += encoder.item({"type": "function_call", "call_id": "c", "name": "f", "arguments": ""})
    events.append(encoder.terminal({"id": "r", "status": "completed"}))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(1, 9))
    assert not any("logprobs" in e for e in events)
    assert "status" not in events[5]["item"]  # a whole item is added as it is


def test_the_chat_stream_converter_follows_the_same_sequence():
    """A Chat Completions stream becomes the specification's sequence: numbered 1..n, every
    event valid, text parts with their `logprobs` (before the shared encoder it numbered from
    0 and its parts had none)."""
    events: list[dict[str, Any]] = []
    converter = ChatStreamConverter(events.append)
    chunks = [
        {"id": "c1", "model": "m", "created": 1, "choices": [{"delta": {"reasoning": "hm"}}]},
        {"choices": [{"delta": {"content": "Hi "}}]},
        {"choices": [{"delta": {"content": "there"}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {"name": "f", "arguments": "{"},
                            }
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    for chunk in chunks:
        converter.feed(chunk)
    response = converter.finish()
    assert [e["sequence_number"] for e in events] == list(range(1, len(events) + 1))
    for number, event in enumerate(events, 1):
        # Not checked here: the converter's resource (partial by design) and the reasoning
        # item's own `status` (chat upstreams' reasoning items carry one, the specification's
        # ReasoningBody has none; the converter keeps what OpenAI's API reports).
        if "response" not in event and (event.get("item") or {}).get("type") != "reasoning":
            conformance.validate_event(event, f"event #{number}")
    kinds = [e["type"] for e in events]
    assert kinds[:3] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert kinds[-1] == "response.completed"
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
