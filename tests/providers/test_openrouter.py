"""`openrouter/`: chat mode over Chat Completions, responses mode over /responses."""

from __future__ import annotations

import pytest

from gambit.core._messages import ChatMessage, ToolCall, ToolCallFunction
from gambit.core._openresponses import (
    CreateResponseRequest,
    ResponseToolDefinition,
    function_call_item,
    function_call_output_item,
    json_schema_text_format,
    message_item,
)
from gambit.core._provider import ProviderError
from gambit.providers import OpenRouterProvider
from tests.providers.helpers import FAST_RETRY, Events
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

RESPOND = ResponseToolDefinition.model_validate(
    {
        "type": "function",
        "function": {
            "name": "gambit_respond",
            "parameters": {"type": "object", "properties": {"payload": {}}},
        },
    }
)
CONTEXT_CALL = [
    message_item("system", "sys"),
    function_call_item("call_ctx", "gambit_context", '{"order": 7}'),
    function_call_output_item("call_ctx", '{"order": 7}'),
]
STUB = {"type": "object", "properties": {}, "additionalProperties": False}


def make(server: FakeModelServer, **kwargs) -> OpenRouterProvider:
    return OpenRouterProvider(
        base_url=server.base_url, api_key="or-key", retry=FAST_RETRY, **kwargs
    )


async def test_chat_mode_posts_chat_completions_with_headers(fake_server: FakeModelServer) -> None:
    fake_server.queue(
        Reply(
            deltas=["Hi ", "there"],
            reasoning="hmm",
            usage={"input_tokens": 5, "output_tokens": 2, "cost": 0.0012},
        )
    )
    chunks: list[str] = []
    async with make(fake_server) as p:
        result = await p.chat(
            model="openrouter/openai/gpt-4o-mini",
            messages=[
                ChatMessage(role="system", content="sys"),
                ChatMessage(role="user", content="hi"),
            ],
            tools=[RESPOND],
            stream=True,
            on_stream_text=chunks.append,
            params={"temperature": 0.3, "max_tokens": 50, "reasoning": {"effort": "low"}},
        )
    sent = fake_server.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer or-key"
    assert sent.headers["http-referer"] == "https://gambit.local"
    assert sent.headers["x-title"] == "Gambit CLI"
    body = sent.body
    assert body["model"] == "openai/gpt-4o-mini"
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50
    assert body["reasoning"] == {"effort": "low"}  # OpenRouter's reasoning object
    assert body["stream"] is True
    assert body["tools"] == [RESPOND.to_dict()]
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert chunks == ["Hi ", "there"]
    assert result.finish_reason == "stop" and result.message.content == "Hi there"
    assert result.usage.model_extra["costUsd"] == 0.0012


async def test_chat_mode_tool_call_deltas_are_merged(fake_server: FakeModelServer) -> None:
    fake_server.queue(
        Reply(
            function_calls=[
                FunctionCall(
                    "lookup",
                    '{"id": 7, "full": true}',
                    call_id="c1",
                    argument_deltas=['{"id"', ": 7, ", '"full": true}'],
                ),
                FunctionCall("gambit_respond", {"payload": "x"}, call_id="c2"),
            ]
        )
    )
    async with make(fake_server) as p:
        result = await p.chat(
            model="x/y", messages=[ChatMessage(role="user", content="go")], stream=True
        )
    assert result.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.args) for c in result.tool_calls] == [
        ("c1", "lookup", {"id": 7, "full": True}),
        ("c2", "gambit_respond", {"payload": "x"}),
    ]
    assert result.tool_calls[0].arguments == '{"id": 7, "full": true}'
    assert result.message.content is None


async def test_chat_mode_history_with_tool_calls_and_stub_context_tool(
    fake_server: FakeModelServer,
) -> None:
    messages = [
        ChatMessage(role="system", content="sys"),
        ChatMessage(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(
                    id="call_ctx", function=ToolCallFunction(name="gambit_context", arguments="{}")
                )
            ],
        ),
        ChatMessage(role="tool", content="{}", tool_call_id="call_ctx", name="gambit_context"),
    ]
    async with make(fake_server) as p:
        await p.chat(model="m", messages=messages, tools=[RESPOND])
    body = fake_server.last_request.body
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "gambit_context"
    assert body["messages"][2] == {
        "role": "tool",
        "content": "{}",
        "name": "gambit_context",
        "tool_call_id": "call_ctx",
    }
    assert [t["function"]["name"] for t in body["tools"]] == ["gambit_respond", "gambit_context"]
    assert body["tools"][1]["function"]["description"] == "Synthetic Gambit context payload."
    assert body["tools"][1]["function"]["parameters"] == STUB


async def test_responses_mode_uses_responses_endpoint(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["ok"]))
    events = Events()
    req = CreateResponseRequest(
        model="openrouter/anthropic/claude-sonnet-4",
        input=CONTEXT_CALL,
        tools=[RESPOND],
        text=json_schema_text_format("out", {"type": "object"}),
        stream=True,
    )
    async with make(fake_server) as p:
        result = await p.responses(req, on_stream_event=events)
    sent = fake_server.last_request
    assert sent.path == "/v1/responses"
    assert sent.headers["x-title"] == "Gambit CLI"
    body = sent.body
    assert body["model"] == "anthropic/claude-sonnet-4"
    assert body["text"]["format"]["strict"] is False  # forced off for OpenRouter
    assert [t["name"] for t in body["tools"]] == ["gambit_respond", "gambit_context"]
    assert body["tools"][1] == {
        "type": "function",
        "name": "gambit_context",
        "description": "Synthetic Gambit context payload.",
        "parameters": STUB,
        "strict": False,
    }
    assert events.deltas() == ["ok"]
    assert result.response.output[0].content[0].text == "ok"


async def test_stub_is_not_added_when_the_tool_is_declared(fake_server: FakeModelServer) -> None:
    declared = ResponseToolDefinition.model_validate(
        {
            "type": "function",
            "function": {"name": "gambit_context", "parameters": {"type": "object"}},
        }
    )
    async with make(fake_server) as p:
        await p.responses(CreateResponseRequest(model="m", input=CONTEXT_CALL, tools=[declared]))
    assert [t["name"] for t in fake_server.last_request.body["tools"]] == ["gambit_context"]


async def test_responses_flag_sends_chat_mode_to_responses(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["a", "b"]))
    chunks: list[str] = []
    async with make(fake_server, responses_api=True) as p:
        result = await p.chat(
            model="m",
            messages=[ChatMessage(role="user", content="hi")],
            stream=True,
            on_stream_text=chunks.append,
        )
    assert fake_server.last_request.path == "/v1/responses"
    assert chunks == ["a", "b"] and result.message.content == "ab"


def test_from_env_reads_flag_key_and_base_url(fake_server: FakeModelServer) -> None:
    p = OpenRouterProvider.from_env(
        {
            "OPENROUTER_API_KEY": "k",
            "OPENROUTER_BASE_URL": fake_server.base_url,
            "GAMBIT_OPENROUTER_RESPONSES": "1",
        },
        settings={"title": "My App"},
    )
    assert p.responses_api is True and p.base_url == fake_server.base_url
    assert p.http.headers["X-Title"] == "My App"
    default = OpenRouterProvider.from_env({})
    assert default.base_url == "https://openrouter.ai/api/v1"
    assert default.responses_api is False
    assert default.missing_config == "OPENROUTER_API_KEY is not set"


async def test_chat_stream_error_chunk_and_cut(fake_server: FakeModelServer) -> None:
    fake_server.queue(
        Reply(deltas=["par"], terminal="error", failure={"code": 502, "message": "upstream died"}),
        Reply(deltas=["abc"] * 40, cut_after_bytes=1200),
        Reply(deltas=["no end"], terminal="none"),
    )
    async with make(fake_server) as p:
        msgs = [ChatMessage(role="user", content="hi")]
        with pytest.raises(ProviderError) as info:
            await p.chat(model="m", messages=msgs, stream=True)
        assert "upstream died" in str(info.value) and info.value.partial_text == "par"
        with pytest.raises(ProviderError) as info:
            await p.chat(model="m", messages=msgs, stream=True)
        assert "the stream broke" in str(info.value) and info.value.partial_text.startswith(
            "abcabc"
        )
        with pytest.raises(ProviderError, match="without \\[DONE\\]") as info:
            await p.chat(model="m", messages=msgs, stream=True)
        assert info.value.partial_text == "no end"


async def test_chat_non_stream_response_format_and_length(fake_server: FakeModelServer) -> None:
    from gambit.core._openresponses import ResponseTextConfig

    fake_server.queue(Reply(text="trunc", terminal="incomplete"))
    req = CreateResponseRequest(
        model="m",
        input="hi",
        text=ResponseTextConfig.model_validate(
            {
                "format": {
                    "type": "json_schema",
                    "name": "out",
                    "strict": True,
                    "schema": {"type": "object"},
                }
            }
        ),
    )
    async with make(fake_server) as p:
        body = p.chat_body(req, "m")
        result = await p.chat(model="m", messages=[ChatMessage(role="user", content="hi")])
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
    }
    assert result.finish_reason == "length" and result.message.content == "trunc"
