"""Built-in `gambit://schemas/...` schemas (docs/decks.md, "Graders"): their URIs, legacy forms,
shapes, and the grader compatibility rule."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gambit.core._builtin_schemas import (
    BUILTIN_SCHEMA_PATHS,
    GRADER_CONTEXT_SCHEMA_URIS,
    GRADER_OUTPUT_SCHEMA_URI,
    PLAIN_CHAT_INPUT_OPTIONAL_URI,
    PLAIN_CHAT_OUTPUT_URI,
    BuiltinSchemaRef,
    UnknownBuiltinSchema,
    builtin_schema,
    grader_compatibility_problems,
    resolve_builtin_schema_uri,
)
from gambit.core._schema import Schema, SchemaValidationError, schema_from_json

PREFIX = "gambit://schemas/"
ALL_URIS = [PREFIX + path for path in BUILTIN_SCHEMA_PATHS]


def test_the_built_in_set():
    assert BUILTIN_SCHEMA_PATHS == (
        "graders/respond.zod.ts",
        "graders/grader_output.zod.ts",
        "graders/contexts/conversation.zod.ts",
        "graders/contexts/turn.zod.ts",
        "graders/contexts/conversation_tools.zod.ts",
        "graders/contexts/turn_tools.zod.ts",
        "graders/contexts/tools.zod.ts",
        "scenarios/plain_chat_output.zod.ts",
        "scenarios/plain_chat_input_optional.zod.ts",
    )
    assert GRADER_CONTEXT_SCHEMA_URIS == (
        "gambit://schemas/graders/contexts/turn.zod.ts",
        "gambit://schemas/graders/contexts/turn_tools.zod.ts",
        "gambit://schemas/graders/contexts/conversation_tools.zod.ts",
        "gambit://schemas/graders/contexts/conversation.zod.ts",
    )
    assert GRADER_OUTPUT_SCHEMA_URI == "gambit://schemas/graders/grader_output.zod.ts"
    assert PLAIN_CHAT_OUTPUT_URI == "gambit://schemas/scenarios/plain_chat_output.zod.ts"
    assert (
        PLAIN_CHAT_INPUT_OPTIONAL_URI
        == "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
    )


@pytest.mark.parametrize("uri", ALL_URIS)
def test_every_built_in_is_a_valid_inlined_json_schema(uri):
    schema = builtin_schema(uri)
    assert isinstance(schema, Schema)
    assert schema.source == uri
    assert "$ref" not in str(schema.json)
    # Passing through the normaliser changes nothing (valid, no refs, nothing to rewrite).
    assert schema_from_json(schema.json, source=uri).json == schema.json


def test_builtin_schema_returns_independent_copies():
    first = builtin_schema(GRADER_OUTPUT_SCHEMA_URI)
    first.json["properties"]["score"]["maximum"] = 100
    assert builtin_schema(GRADER_OUTPUT_SCHEMA_URI).json["properties"]["score"]["maximum"] == 3


# ---- URI resolution ---------------------------------------------------------------------------


def test_canonical_uris_resolve_without_deprecation():
    for uri in ALL_URIS:
        assert resolve_builtin_schema_uri(uri) == BuiltinSchemaRef(
            canonical_uri=uri, deprecated_reason=None
        )


def test_legacy_ts_suffix_is_rewritten_with_a_deprecation():
    ref = resolve_builtin_schema_uri("gambit://schemas/graders/respond.ts")
    assert ref.canonical_uri == "gambit://schemas/graders/respond.zod.ts"
    assert ref.deprecated_reason == (
        '"gambit://schemas/graders/respond.ts" is deprecated; '
        'use "gambit://schemas/graders/respond.zod.ts"'
    )
    assert "deprecated" in ref.deprecated_reason and ".ts" in ref.deprecated_reason
    schema = builtin_schema("gambit://schemas/graders/respond.ts")
    assert schema.source == "gambit://schemas/graders/respond.zod.ts"


def test_legacy_contexts_path_is_rewritten_with_a_deprecation():
    ref = resolve_builtin_schema_uri("gambit://schemas/contexts/conversation.zod.ts")
    assert ref.canonical_uri == "gambit://schemas/graders/contexts/conversation.zod.ts"
    assert ref.deprecated_reason is not None and "deprecated" in ref.deprecated_reason


def test_both_legacy_rewrites_combine():
    ref = resolve_builtin_schema_uri("gambit://schemas/contexts/turn_tools.ts")
    assert ref.canonical_uri == "gambit://schemas/graders/contexts/turn_tools.zod.ts"
    assert ref.deprecated_reason == (
        '"gambit://schemas/contexts/turn_tools.ts" is deprecated; '
        'use "gambit://schemas/graders/contexts/turn_tools.zod.ts"'
    )


def test_tools_alias_is_turn_tools():
    ref = resolve_builtin_schema_uri("gambit://schemas/graders/contexts/tools.zod.ts")
    assert ref.deprecated_reason is None
    tools = builtin_schema(ref.canonical_uri).json
    assert tools == builtin_schema("gambit://schemas/graders/contexts/turn_tools.zod.ts").json


@pytest.mark.parametrize(
    "uri",
    [
        "gambit://schemas/",
        "gambit://schemas/graders/nope.zod.ts",
        "gambit://schemas/graders/respond.zod.js",
        "gambit://snippets/respond.md",
        "./local.json",
        "",
    ],
)
def test_unknown_uris_list_the_available_ones(uri):
    with pytest.raises(UnknownBuiltinSchema) as info:
        resolve_builtin_schema_uri(uri)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    for available in ALL_URIS:
        assert available in message
    with pytest.raises(UnknownBuiltinSchema):
        builtin_schema(uri)


def test_empty_specifier_message():
    with pytest.raises(
        UnknownBuiltinSchema, match="Invalid gambit schema specifier: gambit://schemas/"
    ):
        resolve_builtin_schema_uri("gambit://schemas/")


# ---- what each built-in schema accepts -----------------------------------------------------------


def test_respond_schema_parses_a_status_envelope():
    schema = builtin_schema("gambit://schemas/graders/respond.zod.ts")
    assert schema.validate({"status": 200}) == {"status": 200}


def test_respond_envelope_shape():
    schema = builtin_schema("gambit://schemas/graders/respond.zod.ts")
    envelope = {
        "payload": {"anything": [1, "two"]},
        "status": 201,
        "message": "ok",
        "code": "created",
        "meta": {"k": {"nested": True}},
        "runId": "run-x",
    }
    expected = {k: v for k, v in envelope.items() if k != "runId"}
    assert schema.validate(envelope) == expected
    assert schema.validate({}) == {}
    with pytest.raises(SchemaValidationError, match="status"):
        schema.validate({"status": "200"})
    with pytest.raises(SchemaValidationError, match="status"):
        schema.validate({"status": 200.5})


def test_legacy_conversation_context_parses_unchanged():
    # The legacy `contexts/` form resolves to the same schema.
    schema = builtin_schema("gambit://schemas/contexts/conversation.zod.ts")
    value = {"session": {"messages": [{"role": "user", "content": "hello"}]}}
    assert schema.validate(value) == value


def test_turn_tools_accepts_tool_calls():
    schema = builtin_schema("gambit://schemas/graders/contexts/turn_tools.zod.ts")
    value = {
        "session": {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bot_write", "arguments": '{"a": 1}'},
                        }
                    ],
                }
            ]
        },
        "messageToGrade": {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "bot_write"}}],
        },
    }
    assert schema.validate(value) == value
    with pytest.raises(SchemaValidationError) as info:
        schema.validate(
            {**value, "messageToGrade": {"role": "assistant", "tool_calls": [{"function": {}}]}}
        )
    assert info.value.path == "messageToGrade.tool_calls.0.function.name"
    with pytest.raises(SchemaValidationError) as info:
        bad = copy.deepcopy(value)
        bad["session"]["messages"][0]["tool_calls"][0]["function"]["arguments"] = {"a": 1}
        schema.validate(bad)
    assert info.value.path == "session.messages.0.tool_calls.0.function.arguments"


def test_conversation_tools_accepts_tool_calls():
    schema = builtin_schema("gambit://schemas/graders/contexts/conversation_tools.zod.ts")
    value = {
        "session": {
            "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "bot_write"}}]}]
        }
    }
    assert (
        schema.validate(value)["session"]["messages"][0]["tool_calls"][0]["function"]["name"]
        == "bot_write"
    )


def test_messages_strip_unknown_keys_like_the_typescript_schemas():
    schema = builtin_schema("gambit://schemas/graders/contexts/turn.zod.ts")
    value = {
        "session": {
            "runId": "run-1",
            "messages": [
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "x"}}]},
                {"role": "tool", "content": "42", "tool_call_id": "c1"},
            ],
            "meta": {"kept": {"deep": 1}},
            "notes": {"text": "n", "other": 1},
            "feedback": [],
        },
        "messageToGrade": {
            "role": "assistant",
            "content": "hi",
            "name": "bot",
            "messageRefId": "m1",
        },
    }
    assert schema.validate(value) == {
        "session": {
            "messages": [{"role": "assistant", "content": None}, {"role": "tool", "content": "42"}],
            "meta": {"kept": {"deep": 1}},
            "notes": {"text": "n"},
        },
        "messageToGrade": {"role": "assistant", "content": "hi", "name": "bot"},
    }


def test_turn_requires_message_to_grade_and_session():
    schema = builtin_schema("gambit://schemas/graders/contexts/turn.zod.ts")
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"session": {}})
    assert str(info.value) == (
        "Schema validation failed: messageToGrade: 'messageToGrade' is a required property"
    )
    conversation = builtin_schema("gambit://schemas/graders/contexts/conversation.zod.ts")
    with pytest.raises(SchemaValidationError, match="session"):
        conversation.validate({})
    assert conversation.validate({"session": {}}) == {"session": {}}


def test_grader_output_shape():
    schema = builtin_schema(GRADER_OUTPUT_SCHEMA_URI)
    assert schema.required_fields() == ["score", "reason"]
    for score in (-3, 0, 3):
        assert schema.validate({"score": score, "reason": "r"}) == {"score": score, "reason": "r"}
    assert schema.validate({"score": 1, "reason": "r", "evidence": ["a"], "x": 1}) == {
        "score": 1,
        "reason": "r",
        "evidence": ["a"],
    }
    for bad, path in (
        ({"score": 4, "reason": "r"}, "score"),
        ({"score": -4, "reason": "r"}, "score"),
        ({"score": 1.5, "reason": "r"}, "score"),
        ({"score": 1}, "reason"),
        ({"score": 1, "reason": "r", "evidence": [1]}, "evidence.0"),
    ):
        with pytest.raises(SchemaValidationError) as info:
            schema.validate(bad)
        assert info.value.path == path


def test_plain_chat_schemas():
    output = builtin_schema(PLAIN_CHAT_OUTPUT_URI)
    assert output.is_string and not output.is_optional
    assert output.validate("hello") == "hello"
    with pytest.raises(SchemaValidationError):
        output.validate(None)
    optional = builtin_schema(PLAIN_CHAT_INPUT_OPTIONAL_URI)
    assert optional.is_string and optional.is_optional
    assert optional.validate(None) is None
    assert optional.validate("hi") == "hi"
    with pytest.raises(SchemaValidationError):
        optional.validate({"text": "hi"})
    assert optional.to_json_schema() == {"type": "string"}


def test_context_schemas_as_tool_parameters_are_objects():
    for uri in GRADER_CONTEXT_SCHEMA_URIS:
        params = builtin_schema(uri).to_tool_parameters()
        assert params["type"] == "object" and "session" in params["properties"]


# ---- grader compatibility -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri", [*GRADER_CONTEXT_SCHEMA_URIS, PREFIX + "graders/contexts/tools.zod.ts"]
)
def test_built_in_contexts_are_compatible(uri):
    assert grader_compatibility_problems(
        builtin_schema(uri), builtin_schema(GRADER_OUTPUT_SCHEMA_URI)
    ) == ([], [])


def test_optional_extensions_are_compatible():
    context = copy.deepcopy(builtin_schema(GRADER_CONTEXT_SCHEMA_URIS[0]).json)
    context["properties"]["rubric"] = {"type": "string"}
    context["properties"]["messageToGrade"]["properties"]["messageRefId"] = {"type": "string"}
    response = copy.deepcopy(builtin_schema(GRADER_OUTPUT_SCHEMA_URI).json)
    response["properties"]["confidence"] = {"type": "number"}
    response["properties"]["score"]["description"] = "my own words"
    assert grader_compatibility_problems(Schema(context, "c"), Schema(response, "r")) == ([], [])


def test_incompatible_grader_schemas_name_the_closest_built_in():
    context = copy.deepcopy(
        builtin_schema("gambit://schemas/graders/contexts/turn_tools.zod.ts").json
    )
    context["properties"]["messageToGrade"]["properties"]["role"] = {"type": "number"}
    response = copy.deepcopy(builtin_schema(GRADER_OUTPUT_SCHEMA_URI).json)
    response["properties"]["confidence"] = {"type": "number"}
    response["required"] = ["score", "reason", "confidence"]
    context_problems, response_problems = grader_compatibility_problems(
        Schema(context, "c"), Schema(response, "r")
    )
    assert context_problems == [
        '"messageToGrade.role": type is "number", expected "string" (compared with '
        "gambit://schemas/graders/contexts/turn_tools.zod.ts, the closest built-in context schema)"
    ]
    assert response_problems == [
        f'"confidence": added fields must be optional (compared with {GRADER_OUTPUT_SCHEMA_URI})'
    ]


def test_required_made_optional_is_flagged_against_the_built_in():
    response = copy.deepcopy(builtin_schema(GRADER_OUTPUT_SCHEMA_URI).json)
    response["required"] = ["score"]
    _, problems = grader_compatibility_problems(
        builtin_schema(GRADER_CONTEXT_SCHEMA_URIS[3]), Schema(response, "r")
    )
    assert problems == [
        f'"reason": required in the built-in schema but optional here (compared with {GRADER_OUTPUT_SCHEMA_URI})'
    ]


def test_a_string_grader_output_is_incompatible():
    _, problems = grader_compatibility_problems(
        builtin_schema(GRADER_CONTEXT_SCHEMA_URIS[0]), builtin_schema(PLAIN_CHAT_OUTPUT_URI)
    )
    assert problems == [
        f'"(root)": type is "string", expected "object" (compared with {GRADER_OUTPUT_SCHEMA_URI})'
    ]


# ---- robustness -----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "session",
                    "messages",
                    "role",
                    "content",
                    "messageToGrade",
                    "tool_calls",
                    "function",
                    "name",
                    "score",
                    "reason",
                    "evidence",
                    "status",
                    "meta",
                    "x",
                ]
            )
            | st.text(max_size=5),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@pytest.mark.parametrize("uri", ALL_URIS)
@settings(max_examples=60, deadline=None)
@given(value=JSON_VALUES)
def test_validate_returns_or_raises_schema_validation_error_only(uri, value):
    schema = builtin_schema(uri)
    snapshot = copy.deepcopy(value)
    try:
        result = schema.validate(value)
    except SchemaValidationError as exc:
        assert str(exc).startswith("Schema validation failed: ")
    else:
        # A coerced value validates again to itself (coercion is idempotent).
        assert schema.validate(result) == result
    assert value == snapshot
