"""Chat <-> Open Responses mapping (docs/providers.md, "Chat mode")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gambit.core._messages import (
    SYNTHETIC_TOOL_NAMES,
    ChatMessage,
    ToolCall,
    ToolCallFunction,
    is_synthetic_tool,
    items_to_messages,
    join_text_parts,
    messages_from_json,
    messages_to_items,
    messages_to_json,
    stringify_response_output,
)
from gambit.core._openresponses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputTextContent,
    MessageItem,
    OutputTextContent,
    function_call_item,
    function_call_output_item,
    items_from_json,
    items_to_json,
    message_item,
)


def call(call_id: str, name: str, arguments: str, item_id: str | None = None) -> ToolCall:
    return ToolCall(
        id=call_id, function=ToolCallFunction(name=name, arguments=arguments), item_id=item_id
    )


# --------------------------------------------------------------------------- messages -> items


def test_messages_to_items_follows_the_seed_rules():
    messages = [
        ChatMessage(role="system", content="Be helpful."),
        ChatMessage(role="user", content="Summarize this."),
        ChatMessage(
            role="assistant",
            content="Looking it up.",
            tool_calls=[call("c1", "lookup", '{"q":"x"}'), call("c2", "fetch", "{}")],
        ),
        ChatMessage(role="tool", tool_call_id="c1", content='{"ok":true}', name="lookup"),
        ChatMessage(role="tool", tool_call_id="c2", content="plain text"),
        ChatMessage(role="assistant", content="Done."),
    ]
    assert items_to_json(messages_to_items(messages)) == [
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
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking it up."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q":"x"}'},
        {"type": "function_call", "call_id": "c2", "name": "fetch", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"ok":true}'},
        {"type": "function_call_output", "call_id": "c2", "output": "plain text"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done."}],
        },
    ]


def test_empty_text_and_incomplete_tool_messages_produce_no_items():
    messages = [
        ChatMessage(role="system", content=""),
        ChatMessage(role="user", content=None),
        ChatMessage(role="assistant", content="", tool_calls=[call("c1", "f", "{}")]),
        ChatMessage(role="tool", content="orphan"),
        ChatMessage(role="tool", tool_call_id="c1", content=None),
        ChatMessage(role="tool", tool_call_id="c1", content=""),
    ]
    items = messages_to_items(messages)
    assert items == [function_call_item("c1", "f", "{}"), function_call_output_item("c1", "")]


def test_messages_to_items_accepts_dicts():
    items = messages_to_items([{"role": "user", "content": "hi"}])
    assert items == [message_item("user", "hi")]


def test_empty_tool_calls_list_is_sanitised():
    msg = ChatMessage(role="assistant", content="x", tool_calls=[])
    assert msg.tool_calls is None
    assert msg.to_dict() == {"role": "assistant", "content": "x"}


def test_content_null_is_serialised():
    msg = ChatMessage(role="assistant", content=None, tool_calls=[call("c", "f", "{}")])
    assert msg.to_dict() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_to_api_dict_drops_non_standard_keys():
    msg = ChatMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "id": "msg_1",
            "custom": 1,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                    "item_id": "fc_1",
                }
            ],
        }
    )
    assert msg.model_extra == {"custom": 1}
    assert msg.to_api_dict() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


# --------------------------------------------------------------------------- items -> messages


def test_reference_item_80_shape():
    """Assistant "hello", a gambit_context call and its output -> 3 messages."""
    items = items_from_json(
        [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hello"}],
            },
            {
                "type": "function_call",
                "call_id": "call-1",
                "name": "gambit_context",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call-1", "output": '{"topic":"x"}'},
        ]
    )
    messages = items_to_messages(items)
    assert len(messages) == 3
    assert (messages[0].role, messages[0].content) == ("assistant", "hello")
    assert messages[1].role == "assistant" and messages[1].content is None
    assert messages[1].tool_calls == [call("call-1", "gambit_context", "{}")]
    assert messages[2].role == "tool"
    assert messages[2].tool_call_id == "call-1"
    assert messages[2].name == "gambit_context"
    assert messages[2].content == '{"topic":"x"}'


def test_consecutive_calls_fold_into_one_assistant_message():
    items = [
        message_item("user", "go"),
        function_call_item("a", "f", "{}"),
        function_call_item("b", "g", "[]"),
        function_call_output_item("a", "1"),
        function_call_output_item("b", "2"),
        function_call_item("c", "h", "{}"),
    ]
    messages = items_to_messages(items)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c.id for c in messages[1].tool_calls] == ["a", "b"]
    assert [c.id for c in messages[4].tool_calls] == ["c"]
    assert messages[3].name == "g"


def test_fold_into_text_puts_calls_on_the_preceding_assistant_message():
    items = [
        message_item("assistant", "Checking."),
        function_call_item("a", "f", "{}"),
        function_call_item("b", "g", "{}"),
        function_call_output_item("a", "1"),
    ]
    messages = items_to_messages(items, fold_into_text=True)
    assert len(messages) == 2
    assert messages[0].content == "Checking."
    assert [c.id for c in messages[0].tool_calls] == ["a", "b"]
    # ...and back again, to the same items.
    assert messages_to_items(messages) == [*items]


def test_a_call_after_user_text_starts_a_new_assistant_message():
    messages = items_to_messages(
        [message_item("user", "x"), function_call_item("a", "f", "{}")], fold_into_text=True
    )
    assert [(m.role, m.content) for m in messages] == [("user", "x"), ("assistant", None)]


def test_multi_part_and_empty_messages():
    items = [
        MessageItem(
            role="assistant",
            content=[
                OutputTextContent(text="[OpenAI]"),
                OutputTextContent(text="(https://openai.com)"),
                OutputTextContent(text=" inter"),
                OutputTextContent(text="national"),
            ],
        ),
        MessageItem(role="user", content=[]),
    ]
    messages = items_to_messages(items)
    assert messages[0].content == "[OpenAI](https://openai.com) international"
    assert messages[1].content is None


def test_unknown_items_are_skipped_in_chat_form():
    items = items_from_json(
        [
            {"type": "reasoning", "id": "rs", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "a"}],
            },
            {"type": "gambit:followups", "data": {}},
        ]
    )
    messages = items_to_messages(items)
    assert [(m.role, m.content) for m in messages] == [("assistant", "a")]


def test_items_to_messages_accepts_dicts():
    messages = items_to_messages([{"type": "function_call_output", "call_id": "c", "output": "o"}])
    assert messages == [ChatMessage(role="tool", tool_call_id="c", content="o")]


def test_ids_ride_on_chat_messages():
    items = [
        message_item("assistant", "hi", id="msg_1"),
        function_call_item("c1", "f", "{}", id="fc_1"),
        function_call_output_item("c1", "out", id="fco_1"),
    ]
    messages = items_to_messages(items)
    assert messages[0].id == "msg_1"
    assert messages[1].tool_calls[0].item_id == "fc_1"
    assert messages[2].id == "fco_1"
    assert messages_to_items(messages) == items


# --------------------------------------------------------------------------- synthetic tools

RAW_STRINGS = [
    "{}",
    '{"payload": {"answer": "ok"}, "status": 200}',
    '{ "q" : "hello" ,\n\t"n":1 }',
    '{"text":"日本語 — ünïcødé 😀"}',
    '{"escaped":"\\u00e9\\n"}',
    "   leading and trailing   ",
    "not json at all",
    "",
    '{"sep":"\u2028\u2029"}',
]


@pytest.mark.parametrize("name", sorted(SYNTHETIC_TOOL_NAMES))
@pytest.mark.parametrize("raw", RAW_STRINGS)
def test_synthetic_tools_carry_raw_strings_byte_for_byte(name, raw):
    assert is_synthetic_tool(name)
    items = [function_call_item("call-1", name, raw), function_call_output_item("call-1", raw)]
    messages = items_to_messages(items)
    assert messages[0].tool_calls[0].function.arguments == raw
    assert messages[1].content == raw
    back = messages_to_items(messages)
    assert back == items
    assert back[0].arguments.encode() == raw.encode()
    # Through JSON and back, too.
    wire = json.loads(json.dumps(items_to_json(back), ensure_ascii=False))
    assert items_from_json(wire) == items
    chat_wire = json.loads(json.dumps(messages_to_json(messages)))
    assert messages_from_json(chat_wire) == messages


def test_is_synthetic_tool():
    assert not is_synthetic_tool("lookup")
    assert {
        "gambit_context",
        "gambit_init",
        "gambit_respond",
        "gambit_complete",
        "gambit_end",
    } == SYNTHETIC_TOOL_NAMES


# --------------------------------------------------------------------------- text helpers


def test_join_text_parts_reference_item_121():
    assert (
        join_text_parts(["The new coworker lives at ", "INTENT.md", " and ", "PROMPT.md."])
        == "The new coworker lives at INTENT.md and PROMPT.md."
    )
    assert (
        join_text_parts(["[OpenAI]", "(https://openai.com)", " inter", "national"])
        == "[OpenAI](https://openai.com) international"
    )
    assert join_text_parts(["", None, "a"]) == "a"


def test_stringify_response_output_reference_item_122():
    items = [
        message_item("assistant", "a"),
        message_item("user", "x"),
        message_item("assistant", "b"),
    ]
    assert stringify_response_output(items) == "ab"
    assert stringify_response_output(items_to_json(items)) == "ab"
    mixed = MessageItem(
        role="assistant", content=[InputTextContent(text="in"), OutputTextContent(text="out")]
    )
    assert stringify_response_output([mixed]) == "out"


# --------------------------------------------------------------------------- round trips

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
texts = st.text(min_size=1, max_size=40)
raw_strings = st.text(max_size=40)
opt_id = st.none() | ids
tool_names = st.sampled_from(sorted(SYNTHETIC_TOOL_NAMES) + ["lookup", "fetch_data"])


@st.composite
def conversations(draw, fold_into_text: bool = False):
    """Well-formed chat conversations (see the `_messages` module docstring)."""
    messages: list[ChatMessage] = []
    names: dict[str, str] = {}
    counter = 0
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "calls", "tool"]))
        prev = messages[-1] if messages else None
        if kind in ("system", "user", "assistant"):
            messages.append(ChatMessage(role=kind, content=draw(texts), id=draw(opt_id)))
        elif kind == "calls":
            if (
                prev is not None
                and prev.role == "assistant"
                and (fold_into_text or prev.tool_calls)
            ):
                continue
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                call_id = f"call-{counter}"
                name = draw(tool_names)
                names[call_id] = name
                calls.append(call(call_id, name, draw(raw_strings), draw(opt_id)))
            text = draw(st.none() | texts) if fold_into_text else None
            messages.append(
                ChatMessage(
                    role="assistant",
                    content=text,
                    tool_calls=calls,
                    id=draw(opt_id) if text else None,
                )
            )
        else:
            known = sorted(names)
            call_id = draw(st.sampled_from(known)) if known and draw(st.booleans()) else "call-x"
            messages.append(
                ChatMessage(
                    role="tool",
                    tool_call_id=call_id,
                    content=draw(raw_strings),
                    name=names.get(call_id),
                    id=draw(opt_id),
                )
            )
    return messages


@st.composite
def item_lists(draw):
    items = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "call", "output"]))
        if kind in ("system", "user", "assistant"):
            items.append(message_item(kind, draw(texts), id=draw(opt_id)))
        elif kind == "call":
            items.append(
                function_call_item(draw(ids), draw(tool_names), draw(raw_strings), id=draw(opt_id))
            )
        else:
            items.append(function_call_output_item(draw(ids), draw(raw_strings), id=draw(opt_id)))
    return items


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_messages_items_messages_round_trip(messages):
    assert items_to_messages(messages_to_items(messages)) == messages


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(fold_into_text=True))
def test_messages_items_messages_round_trip_folding(messages):
    assert items_to_messages(messages_to_items(messages), fold_into_text=True) == messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(), st.booleans())
def test_items_messages_items_round_trip(items, fold):
    assert messages_to_items(items_to_messages(items, fold_into_text=fold)) == items


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_round_trip_survives_json(messages):
    items = items_from_json(json.loads(json.dumps(items_to_json(messages_to_items(messages)))))
    assert items_to_messages(items) == messages


def test_types_of_mapped_items():
    items = messages_to_items(
        [
            ChatMessage(role="assistant", content=None, tool_calls=[call("c", "f", "{}")]),
            ChatMessage(role="tool", tool_call_id="c", content="x"),
        ]
    )
    assert [type(i) for i in items] == [FunctionCallItem, FunctionCallOutputItem]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(), item_lists(), st.lists(st.integers(0, 20), max_size=4))
def test_incremental_conversion_equals_whole_conversion(first, more, cuts):
    """Publishing a growing conversation (or one that is replaced or cut back) through the
    incremental converter gives exactly what converting the whole list gives."""
    from gambit.core._messages import IncrementalMessages

    converter = IncrementalMessages()
    growing: list = []
    for item in [*first, *more]:
        growing = [*growing, item]
        assert converter.convert(growing) == items_to_messages(growing)
    for cut in cuts:  # not an extension of what came before: converted again
        shorter = growing[: min(cut, len(growing))]
        assert converter.convert(shorter) == items_to_messages(shorter)
    restored = IncrementalMessages.restore(converter.snapshot())
    assert restored.convert(growing + first) == items_to_messages(growing + first)
