"""Open Responses models (https://www.openresponses.org/): construction, round trips, extras
kept, helpers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from gambit.core._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputTextContent,
    MessageItem,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    OutputTextContent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseError,
    ResponseFailedEvent,
    ResponseTextConfig,
    ResponseToolDefinition,
    ResponseUsage,
    ToolChoiceFunction,
    UnknownContent,
    UnknownItem,
    UnknownResponseEvent,
    event_from_dict,
    event_to_dict,
    function_call_item,
    function_call_output_item,
    item_from_dict,
    item_text,
    item_to_dict,
    items_from_json,
    items_to_json,
    json_schema_text_format,
    message_item,
    output_text,
)

SEED_REQUEST = {
    "model": "openai/gpt-4.1-mini",
    "input": [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "Be helpful."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Summarize this."}],
        },
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "gambit_respond",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ],
}

SEED_RESPONSE = {
    "id": "resp_123",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Here is the summary."}],
        }
    ],
}


def test_seed_request_example_round_trips():
    req = CreateResponseRequest.model_validate(SEED_REQUEST)
    assert isinstance(req.input[0], MessageItem)
    assert req.input[0].role == "system"
    assert isinstance(req.input[0].content[0], InputTextContent)
    assert isinstance(req.tools[0], ResponseToolDefinition)
    assert req.tools[0].function.name == "gambit_respond"
    assert req.to_dict() == SEED_REQUEST


def test_seed_response_example_round_trips():
    resp = CreateResponseResponse.model_validate(SEED_RESPONSE)
    assert resp.object == "response"
    assert output_text(resp) == "Here is the summary."
    assert resp.to_dict() == SEED_RESPONSE


@pytest.mark.parametrize(
    "item",
    [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "yo"}],
            "id": "msg_1",
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": 1}'},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "lookup",
            "arguments": "{}",
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "c1", "output": '{"ok":true}'},
        {"type": "function_call_output", "call_id": "c1", "output": "", "id": "fco_1"},
    ],
)
def test_each_item_type_round_trips(item):
    model = item_from_dict(item)
    assert item_to_dict(model) == item
    assert items_to_json(items_from_json([item])) == [item]


def test_item_models_are_discriminated_on_type():
    items = items_from_json(
        [
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "s"}]},
            {"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x"},
        ]
    )
    assert [type(i) for i in items] == [MessageItem, FunctionCallItem, FunctionCallOutputItem]


def test_unknown_fields_are_preserved_on_items_and_parts():
    raw = {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "hi", "annotations": [], "logprobs": None},
        ],
        "id": "msg_9",
    }
    item = item_from_dict(raw)
    assert item.model_extra == {"status": "completed"}
    assert item.content[0].model_extra == {"annotations": [], "logprobs": None}
    # Extra fields are written back even when null; declared optional fields are omitted.
    assert item_to_dict(item) == raw


def test_unknown_item_and_content_types_are_kept_verbatim():
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "t"}],
    }
    extension = {"type": "gambit:followups", "data": {"zeta": 7, "alpha": {"b": 2, "a": 1}}}
    refusal = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "no"}],
    }
    items = items_from_json([reasoning, extension, refusal])
    assert isinstance(items[0], UnknownItem) and items[0].id == "rs_1"
    assert isinstance(items[1], UnknownItem) and items[1].type == "gambit:followups"
    assert isinstance(items[2].content[0], UnknownContent)
    assert items_to_json(items) == [reasoning, extension, refusal]


def test_nested_raw_json_values_are_untouched():
    params = {"type": "object", "properties": {"x": {"default": None}}, "required": []}
    tool = ResponseToolDefinition.model_validate(
        {"type": "function", "function": {"name": "f", "parameters": params}}
    )
    assert tool.to_dict()["function"]["parameters"] == params
    req = CreateResponseRequest(model="m", input=[], metadata={"a": None, "b": [None]})
    assert req.to_dict()["metadata"] == {"a": None, "b": [None]}


def test_wrong_shapes_are_rejected():
    with pytest.raises(ValidationError):
        item_from_dict({"type": "message", "role": "tool", "content": []})
    with pytest.raises(ValidationError):
        item_from_dict({"type": "function_call", "call_id": "c", "name": "n", "arguments": {}})
    with pytest.raises(ValidationError):
        item_from_dict({"type": "function_call_output", "call_id": "c"})
    with pytest.raises(ValidationError):
        item_from_dict({"no_type": True})


def test_lenient_inputs_are_normalised():
    easy = item_from_dict({"role": "user", "content": "hello"})
    assert isinstance(easy, MessageItem)
    assert easy.content == [InputTextContent(text="hello")]
    assistant = item_from_dict({"type": "message", "role": "assistant", "content": "hi"})
    assert assistant.content == [OutputTextContent(text="hi")]
    req = CreateResponseRequest.model_validate({"model": "m", "input": "ping"})
    assert req.input == [message_item("user", "ping")]
    flat = ResponseToolDefinition.model_validate(
        {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}
    )
    assert flat.to_dict() == {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
    }
    choice = CreateResponseRequest.model_validate(
        {"model": "m", "input": [], "tool_choice": {"type": "function", "name": "f"}}
    ).tool_choice
    assert isinstance(choice, ToolChoiceFunction) and choice.function.name == "f"


def test_request_with_every_field_round_trips():
    data = {
        "model": "openrouter/openai/gpt-4o-mini",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
        ],
        "instructions": "be brief",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "does f",
                    "parameters": {"type": "object"},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "stream": True,
        "max_output_tokens": 256,
        "metadata": {"k": "v"},
        "params": {"temperature": 0.2, "reasoning": {"effort": "high"}},
        "text": {
            "format": {
                "type": "json_schema",
                "name": "answer",
                "strict": True,
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
            }
        },
        "previous_response_id": "resp_1",
        "store": False,
    }
    req = CreateResponseRequest.model_validate(data)
    assert req.text.format.schema_["type"] == "object"
    assert req.model_extra == {"store": False}
    assert req.to_dict() == data
    for choice in ("auto", "required"):
        assert CreateResponseRequest(model="m", input=[], tool_choice=choice).tool_choice == choice


def test_json_schema_text_format_helper():
    config = json_schema_text_format("out", {"type": "object"})
    assert isinstance(config, ResponseTextConfig)
    assert config.to_dict() == {
        "format": {
            "type": "json_schema",
            "name": "out",
            "strict": True,
            "schema": {"type": "object"},
        }
    }


def test_usage_uses_camel_case_keys():
    usage = ResponseUsage(
        prompt_tokens=11, completion_tokens=7, total_tokens=18, reasoning_tokens=4
    )
    assert usage.to_dict() == {
        "promptTokens": 11,
        "completionTokens": 7,
        "totalTokens": 18,
        "reasoningTokens": 4,
    }
    parsed = ResponseUsage.model_validate(
        {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3, "cachedTokens": 1}
    )
    assert parsed.cached_tokens == 1
    assert parsed.to_dict()["cachedTokens"] == 1


def test_response_with_every_field_round_trips():
    data = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "created": 1700000000,
        "status": "incomplete",
        "output": [
            {"type": "function_call", "call_id": "c", "name": "gambit_respond", "arguments": "{}"}
        ],
        "usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3},
        "error": {"code": "max_tokens", "message": "cut"},
        "updatedState": {"runId": "run-1"},
    }
    resp = CreateResponseResponse.model_validate(data)
    assert resp.status == "incomplete"
    assert resp.to_dict() == data
    with pytest.raises(ValidationError):
        CreateResponseResponse.model_validate({**data, "status": "exploded"})


EVENTS = [
    (
        ResponseCreatedEvent,
        {"type": "response.created", "response": {"id": "r", "object": "response", "output": []}},
    ),
    (
        OutputTextDeltaEvent,
        {"type": "response.output_text.delta", "output_index": 0, "delta": "hé", "item_id": "m1"},
    ),
    (
        OutputTextDoneEvent,
        {"type": "response.output_text.done", "output_index": 0, "text": "héllo"},
    ),
    (
        OutputItemAddedEvent,
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "call_id": "c", "name": "n", "arguments": ""},
        },
    ),
    (
        OutputItemDoneEvent,
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"},
            "sequence_number": 5,
        },
    ),
    (
        ResponseCompletedEvent,
        {"type": "response.completed", "response": {"id": "r", "object": "response", "output": []}},
    ),
    (ResponseFailedEvent, {"type": "response.failed", "error": {"code": "x", "message": "boom"}}),
    (
        UnknownResponseEvent,
        {"type": "response.reasoning.delta", "delta": "think", "output_index": 0},
    ),
    (UnknownResponseEvent, {"type": "codex.event", "payload": {"a": 1}}),
]


@pytest.mark.parametrize(("model", "data"), EVENTS)
def test_stream_events_round_trip(model, data):
    event = event_from_dict(data)
    assert type(event) is model
    assert event_to_dict(event) == data


def test_stream_event_extras_are_kept():
    data = {
        "type": "response.output_text.delta",
        "output_index": 0,
        "content_index": 0,
        "delta": "a",
        "logprobs": [],
        "obfuscation": "zz",
    }
    event = event_from_dict(data)
    assert event.model_extra == {"logprobs": [], "obfuscation": "zz"}
    assert event_to_dict(event) == data


def test_failed_event_takes_error_from_response():
    event = event_from_dict(
        {"type": "response.failed", "response": {"id": "r", "error": {"message": "quota"}}}
    )
    assert event.error == ResponseError(message="quota")


def test_item_constructors_and_text_helpers():
    assert message_item("system", "s").content == [InputTextContent(text="s")]
    assert message_item("user", "u").content == [InputTextContent(text="u")]
    assert message_item("assistant", "a", id="msg_1").to_dict() == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a"}],
        "id": "msg_1",
    }
    assert function_call_item("c", "n", "{}").to_dict() == {
        "type": "function_call",
        "call_id": "c",
        "name": "n",
        "arguments": "{}",
    }
    assert function_call_output_item("c", "o").output == "o"
    multi = MessageItem(
        role="assistant",
        content=[
            OutputTextContent(text="The new coworker lives at "),
            OutputTextContent(text="INTENT.md"),
        ],
    )
    assert item_text(multi) == "The new coworker lives at INTENT.md"
    assert item_text(function_call_item("c", "n", "{}")) == ""


def test_output_text_concatenates_assistant_messages_only():
    resp = CreateResponseResponse(
        id="r",
        output=[
            message_item("assistant", "a"),
            message_item("user", "x"),
            function_call_item("c", "n", "{}"),
            message_item("assistant", "b"),
        ],
    )
    assert output_text(resp) == "ab"
    assert output_text(resp.output) == "ab"


def test_serialised_json_is_plain_json():
    item = function_call_item("call-1", "gambit_context", '{"q": "日本語",  "n": 1 }')
    text = json.dumps(item_to_dict(item), ensure_ascii=False)
    assert json.loads(text)["arguments"] == '{"q": "日本語",  "n": 1 }'


# ---- fast paths: the same results as pydantic's --------------------------------------------


def _dump(model) -> str:
    """pydantic's own serialisation, as a JSON text (key order included)."""
    return json.dumps(model.model_dump(mode="json", by_alias=True))


@pytest.mark.parametrize(
    "item",
    [
        message_item("user", "hi"),
        MessageItem(role="user", content=[{"type": "input_text", "text": "x"}], n=float("inf")),
        MessageItem(role="user", content=[{"type": "input_text", "text": "x"}], t=(1, 2)),
        MessageItem(role="user", content=[{"type": "input_text", "text": "x"}], d={1: "a"}),
        message_item("assistant", "yo", id="msg_1"),
        message_item("system", ""),
        MessageItem(
            role="assistant",
            content=[{"type": "output_text", "text": "a"}, {"type": "input_text", "text": "b"}],
        ),
        MessageItem(role="user", content=[{"type": "refusal", "refusal": "no"}]),
        MessageItem(role="user", content=[{"type": "input_text", "text": "x", "extra": 1}]),
        MessageItem(role="user", content="plain", id="m", vendor={"k": None}),
        FunctionCallItem(call_id="c", name="n", arguments="{}"),
        FunctionCallItem(call_id="c", name="n", arguments='{"a": "é"}', id="fc_1"),
        FunctionCallOutputItem(call_id="c", output="o"),
        FunctionCallOutputItem(call_id="c", output="o", id="x", status="completed"),
    ],
    ids=lambda item: item.type,
)
def test_item_to_dict_matches_pydantic(item):
    assert json.dumps(item_to_dict(item)) == _dump(item)


def _wire_models() -> list:
    """Every kind of wire model the tests know, read from their example data."""
    from gambit.core._state import state_from_dict
    from gambit.core._trace import trace_event_from_dict

    from .test_state import CHAT_ONLY, FULL, RESPONSES_ONLY
    from .test_trace import CATALOGUE

    models = [trace_event_from_dict(data) for _, data in CATALOGUE]
    models += [state_from_dict(data) for data in (RESPONSES_ONLY, CHAT_ONLY, FULL)]
    models += [model.model_validate(data) for model, data in EVENTS]
    models += [
        CreateResponseRequest.model_validate(SEED_REQUEST),
        CreateResponseResponse.model_validate(SEED_RESPONSE),
    ]
    return models


def test_to_dict_matches_pydantic_for_every_model_kind():
    for model in _wire_models():
        assert repr(model.to_dict()) == repr(model.model_dump(mode="json", by_alias=True))


_ODD_VALUES = st.sampled_from(
    [float("inf"), float("nan"), (1, 2), {1: "a"}, b"x", {"k": [1.5, None, {"z": True}]}]
)
_EXTRA_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | _ODD_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=5),
    extras=st.dictionaries(st.sampled_from(["x", "vendor", "n"]), _EXTRA_VALUES, max_size=2),
    item_id=st.none() | st.text(max_size=3),
)
def test_to_dict_matches_pydantic_on_any_extra(text, extras, item_id):
    from gambit.core._messages import ChatMessage

    for model in (
        MessageItem(
            role="user", content=[{"type": "input_text", "text": text, **extras}], id=item_id
        ),
        FunctionCallItem(call_id="c", name="n", arguments=text, id=item_id, **extras),
        ChatMessage(role="assistant", content=None, **extras),
        ResponseUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3, **extras),
    ):
        assert repr(model.to_dict()) == repr(model.model_dump(mode="json", by_alias=True))


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
@pytest.mark.parametrize("item_id", [None, "msg_1"])
def test_message_item_is_the_validated_instance(role, item_id):
    made = message_item(role, "text", id=item_id)
    part = OutputTextContent(text="text") if role == "assistant" else InputTextContent(text="text")
    validated = MessageItem(role=role, content=[part], id=item_id)
    assert made == validated and repr(made) == repr(validated)
    assert made.model_fields_set == validated.model_fields_set
    assert made.content[0].model_fields_set == validated.content[0].model_fields_set
    assert made.model_extra == validated.model_extra == {}
    with pytest.raises(ValidationError):
        message_item("tool", "text")  # type: ignore[arg-type]


class _WithFactory(BaseModel):
    tags: list[str] = Field(default_factory=list)
    name: str


def test_construct_is_model_construct():
    from gambit.core._openresponses import construct
    from gambit.core._state import SavedState

    for cls, values in [
        (CreateResponseRequest, {"model": "m", "input": [], "stream": None, "params": {"t": 1}}),
        (SavedState, {"format": "responses", "run_id": "run-1", "items": []}),
        (ResponseUsage, {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}),
    ]:
        made, reference = construct(cls, **values), cls.model_construct(**values)
        assert made == reference and repr(made) == repr(reference)
        assert list(made.__dict__) == list(reference.__dict__)
        assert made.model_fields_set == reference.model_fields_set
        assert made.model_extra == reference.model_extra
        assert made.__pydantic_private__ == reference.__pydantic_private__
    # A field with a default factory gets a fresh value from it (FieldInfo's
    # default_factory_takes_validated_data decides whether the plan may call it).
    made = construct(_WithFactory, name="n")
    assert made == _WithFactory.model_construct(name="n") and made.tags == []
    assert made.tags is not construct(_WithFactory, name="n").tags
    # A missing required field or an unknown name: model_construct's own behaviour.
    assert construct(SavedState, format="chat").model_fields_set == {"format"}
    assert (
        construct(ResponseUsage, prompt_tokens=1, completion_tokens=2, total_tokens=3, x=1).x == 1
    )
