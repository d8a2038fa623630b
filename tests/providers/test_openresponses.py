"""`openresponses/`: what the Open Responses specification asks of a client, against the fake
server."""

from __future__ import annotations

import asyncio

import pytest

from gambit.core._openresponses import (
    CreateResponseRequest,
    FunctionCallItem,
    MessageItem,
    ResponseToolDefinition,
    UnknownItem,
    function_call_item,
    function_call_output_item,
    json_schema_text_format,
    message_item,
)
from gambit.core._provider import ChatProvider, ModelProvider, ProviderError
from gambit.providers import OpenResponsesProvider
from gambit.providers.openresponses import chat_only_base_urls
from tests.providers.helpers import FAST_RETRY, Events, request
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

TOOL = ResponseToolDefinition.model_validate(
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find an order",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id", "ghost"],
            },
        },
    }
)


@pytest.fixture
def provider(fake_server: FakeModelServer) -> OpenResponsesProvider:
    return OpenResponsesProvider(base_url=fake_server.base_url, api_key="k", retry=FAST_RETRY)


def test_implements_the_protocols(provider: OpenResponsesProvider) -> None:
    assert isinstance(provider, ModelProvider) and isinstance(provider, ChatProvider)
    assert provider.name == "openresponses" and provider.offline is False


async def test_request_body_and_headers(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    req = CreateResponseRequest(
        model="openresponses/qwen",
        input=[
            message_item("system", "sys"),
            message_item("user", "hi"),
            function_call_item("call_1", "lookup", '{"id": 7}', id="fc_1"),
            function_call_output_item("call_1", '{"ok":true}'),
            UnknownItem(type="acme:note", id="n1", data={"x": 1}),
        ],
        tools=[TOOL],
        tool_choice={"type": "function", "function": {"name": "lookup"}},
        text=json_schema_text_format("out", {"type": "object"}),
        params={
            "temperature": 0.2,
            "top_p": 0.9,
            "max_tokens": 99,
            "reasoning": {"effort": "high", "summary": "auto"},
            "custom_knob": {"a": 1},
        },
        metadata={"deck": "x"},
    )
    await provider.responses(req)
    sent = fake_server.last_request
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer k"
    body = sent.body
    assert body["model"] == "qwen"  # prefix stripped
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["max_output_tokens"] == 99 and "max_tokens" not in body
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["custom_knob"] == {"a": 1}
    assert body["metadata"] == {"deck": "x"}
    assert "stream" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find an order",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
            "strict": False,
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "lookup"}
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "out",
            "strict": True,
            "schema": {"type": "object"},
        }
    }
    assert body["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"id": 7}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"ok":true}'},
        {"type": "acme:note", "id": "n1", "data": {"x": 1}},  # extension item untouched
    ]


async def test_assistant_history_is_sent_as_output_text(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    assistant = MessageItem.model_validate(
        {"role": "assistant", "content": [{"type": "input_text", "text": "earlier"}]}
    )
    await provider.responses(CreateResponseRequest(model="m", input=[assistant]))
    assert fake_server.last_request.body["input"][0]["content"] == [
        {"type": "output_text", "text": "earlier"}
    ]


async def test_streams_every_event_as_received_and_aggregates(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply(
            deltas=["Hel", "lo ", "wörld"],
            reasoning_deltas=["think", "ing"],
            function_calls=[FunctionCall("lookup", {"id": 7}, call_id="call_9")],
            items=[{"type": "acme:search_result", "id": "x1", "data": {"hits": 3}}],
            usage={
                "input_tokens": 11,
                "output_tokens": 7,
                "reasoning_tokens": 4,
                "cached_tokens": 2,
            },
        )
    )
    events = Events()
    result = await provider.responses(request(stream=True), on_stream_event=events)
    assert fake_server.last_request.body["stream"] is True
    assert events.deltas() == ["Hel", "lo ", "wörld"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events.types[0] == "response.created" and events.types[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in events.types
    response = result.response
    assert response.status == "completed"
    reasoning, message, call, ext = response.output
    assert isinstance(reasoning, UnknownItem) and reasoning.type == "reasoning"
    assert reasoning.model_extra["summary"] == [{"type": "summary_text", "text": "thinking"}]
    assert isinstance(message, MessageItem) and message.content[0].text == "Hello wörld"
    assert message.model_extra["status"] == "completed"
    assert isinstance(call, FunctionCallItem)
    assert (call.call_id, call.name, call.arguments) == ("call_9", "lookup", '{"id":7}')
    assert isinstance(ext, UnknownItem) and ext.to_dict() == {
        "type": "acme:search_result",
        "id": "x1",
        "data": {"hits": 3},
    }
    usage = response.usage
    assert usage is not None
    assert usage.to_dict() == {
        "promptTokens": 11,
        "completionTokens": 7,
        "totalTokens": 18,
        "reasoningTokens": 4,
        "cachedTokens": 2,
    }


async def test_text_deltas_reach_the_caller_before_the_stream_ends(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    """The server holds the rest of the stream until the first delta has been seen."""
    fake_server.queue(Reply(deltas=["first", " second"], pause_after_events=5))
    seen: list[str] = []

    def on_event(event: dict) -> None:
        if event["type"] == "response.output_text.delta":
            seen.append(event["delta"])
            if len(seen) == 1:
                fake_server.resume()

    result = await asyncio.wait_for(
        provider.responses(request(stream=True), on_stream_event=on_event), timeout=5
    )
    assert seen == ["first", " second"]
    assert result.response.output[0].content[0].text == "first second"


@pytest.mark.parametrize(
    "shape",
    [
        {"awkward": True, "delay": 0.0005},
        {"awkward": True, "line_ending": "\r\n", "delay": 0.0005},
        {"chunk_bytes": 1},
        {"chunk_bytes": 7, "keepalive": True, "line_ending": "\r\n"},
        {"keepalive": True},
        {"done": False},
    ],
)
async def test_sse_split_at_awkward_byte_boundaries(
    provider: OpenResponsesProvider, fake_server: FakeModelServer, shape: dict
) -> None:
    text = ["Grüße ", "日本語 ", "emoji 🎉", " done"]
    fake_server.queue(Reply(deltas=text, function_calls=[FunctionCall("f", {"q": "ü"})], **shape))
    events = Events()
    result = await provider.responses(request(stream=True), on_stream_event=events)
    assert events.deltas() == text
    assert result.response.output[0].content[0].text == "".join(text)
    assert result.response.output[1].arguments == '{"q":"ü"}'


async def test_non_streaming_server_answer_is_accepted_for_a_stream_request(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(Reply(text="plain", stream=False))
    events = Events()
    result = await provider.responses(request(stream=True), on_stream_event=events)
    assert events == []
    assert result.response.output[0].content[0].text == "plain"


async def test_response_failed_event_raises_with_structured_error(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply(
            deltas=["so far"],
            terminal="failed",
            failure={"code": "model_error", "message": "the model crashed"},
        )
    )
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(stream=True))
    assert "the response failed: the model crashed" in str(info.value)
    assert info.value.code == "model_error"
    assert info.value.partial_text == "so far"
    assert len(fake_server.requests) == 1


async def test_error_event_raises(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply(
            deltas=["x"],
            terminal="error",
            failure={
                "type": "too_many_requests",
                "code": "rate_limit",
                "message": "slow",
                "param": None,
            },
        )
    )
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(stream=True))
    assert "stream error: slow" in str(info.value)
    assert info.value.code == "rate_limit" and info.value.retryable


async def test_incomplete_response_is_returned(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(Reply(deltas=["cut sh"], terminal="incomplete"))
    result = await provider.responses(request(stream=True))
    assert result.response.status == "incomplete"
    assert result.response.model_extra["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_non_stream_failed_response_raises(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply(
            body={
                "id": "r1",
                "object": "response",
                "status": "failed",
                "output": [],
                "error": {"code": "boom", "message": "nope"},
            },
            status=200,
        )
    )
    with pytest.raises(ProviderError, match="the response failed: nope"):
        await provider.responses(request())


async def test_falls_back_to_chat_completions_and_remembers(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.responses_enabled = False
    fake_server.queue(
        Reply(
            deltas=["via ", "chat"],
            function_calls=[FunctionCall("lookup", {"id": 1}, call_id="c1")],
        ),
        Reply(text="again"),
    )
    events = Events()
    result = await provider.responses(
        request(stream=True, tools=[TOOL], params={"max_tokens": 5}), on_stream_event=events
    )
    assert [r.path for r in fake_server.requests] == ["/v1/responses", "/v1/chat/completions"]
    chat = fake_server.requests[1].body
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert chat["max_tokens"] == 5 and chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True}
    assert chat["tools"][0]["function"]["name"] == "lookup"
    # The chat stream reaches the caller as Open Responses events.
    assert events.deltas() == ["via ", "chat"]
    assert events.types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert "response.function_call_arguments.delta" in events.types
    assert events.types[-1] == "response.completed"
    message, call = result.response.output
    assert message.content[0].text == "via chat"
    assert (call.call_id, call.name, call.arguments) == ("c1", "lookup", '{"id":1}')
    assert provider.base_url in chat_only_base_urls()

    await provider.responses(request())
    assert [r.path for r in fake_server.requests][2:] == ["/v1/chat/completions"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # A request's `tool_choice` carried by the deck's model parameters: Responses shape.
        (
            {"params": {"tool_choice": {"type": "function", "name": "lookup"}}},
            {"type": "function", "function": {"name": "lookup"}},
        ),
        # Already in the chat shape (a deck's own additionalParams): unchanged.
        (
            {"params": {"tool_choice": {"type": "function", "function": {"name": "lookup"}}}},
            {"type": "function", "function": {"name": "lookup"}},
        ),
        ({"params": {"tool_choice": "required"}}, "required"),
        ({"params": {"tool_choice": "none"}}, "none"),
        # The request's declared field, in either form.
        (
            {"tool_choice": {"type": "function", "name": "lookup"}},
            {"type": "function", "function": {"name": "lookup"}},
        ),
        ({"tool_choice": "auto"}, "auto"),
    ],
)
async def test_the_chat_fallback_sends_tool_choice_in_the_chat_shape(
    provider: OpenResponsesProvider, fake_server: FakeModelServer, fields, expected
) -> None:
    fake_server.responses_enabled = False
    fake_server.queue(Reply(function_calls=[FunctionCall("lookup", {"id": 1}, call_id="c1")]))
    result = await provider.responses(request(tools=[TOOL], **fields))
    assert [r.path for r in fake_server.requests] == ["/v1/responses", "/v1/chat/completions"]
    chat = fake_server.requests[1].body
    assert chat["tool_choice"] == expected
    assert chat["tools"][0]["function"]["name"] == "lookup"
    assert result.response.output[0].name == "lookup"


async def test_405_also_falls_back(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.responses_enabled = False
    fake_server.responses_disabled_status = 405
    fake_server.queue(Reply(text="chat"))
    result = await provider.responses(request())
    assert result.response.output[0].content[0].text == "chat"


async def test_404_from_both_endpoints_reports_the_first_and_is_not_remembered(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply.http_error(404, "model 'm' not found", code="model_not_found"),
        Reply.http_error(404, "model 'm' not found"),
    )
    with pytest.raises(ProviderError) as info:
        await provider.responses(request())
    assert info.value.status == 404 and info.value.code == "model_not_found"
    assert "/v1/responses" in str(info.value)
    assert provider.base_url not in chat_only_base_urls()


async def test_fallback_can_be_disabled(fake_server: FakeModelServer) -> None:
    fake_server.responses_enabled = False
    p = OpenResponsesProvider(base_url=fake_server.base_url, chat_fallback=False)
    with pytest.raises(ProviderError) as info:
        await p.responses(request())
    assert info.value.status == 404
    assert len(fake_server.requests) == 1
    await p.aclose()


async def test_chat_mode_goes_through_responses(
    provider: OpenResponsesProvider, fake_server: FakeModelServer
) -> None:
    from gambit.core._messages import ChatMessage

    fake_server.queue(Reply(deltas=["a", "b"], function_calls=[FunctionCall("lookup", {"id": 2})]))
    chunks: list[str] = []
    result = await provider.chat(
        model="m",
        messages=[ChatMessage(role="user", content="hi")],
        tools=[TOOL],
        stream=True,
        on_stream_text=chunks.append,
    )
    assert chunks == ["a", "b"]
    assert result.finish_reason == "tool_calls"
    assert result.message.content == "ab"
    assert result.tool_calls[0].name == "lookup" and result.tool_calls[0].args == {"id": 2}
    assert fake_server.last_request.path == "/v1/responses"


def test_from_env(fake_server: FakeModelServer) -> None:
    p = OpenResponsesProvider.from_env(
        {"OPENRESPONSES_BASE_URL": fake_server.base_url, "OPENRESPONSES_API_KEY": "sk"}
    )
    assert p.base_url == fake_server.base_url and p.api_key == "sk"
    assert p.missing_config is None
    missing = OpenResponsesProvider.from_env({})
    assert missing.missing_config == "OPENRESPONSES_BASE_URL is not set"


async def test_unconfigured_provider_fails_fast() -> None:
    p = OpenResponsesProvider.from_env({})
    with pytest.raises(ProviderError, match="openresponses: OPENRESPONSES_BASE_URL is not set"):
        await p.responses(request())


async def test_injected_client_and_transport(fake_server: FakeModelServer) -> None:
    import httpx

    async with httpx.AsyncClient(headers={"X-Trace": "t1"}) as client:
        p = OpenResponsesProvider(base_url=fake_server.base_url, client=client)
        await p.responses(request())
        await p.aclose()  # an injected client belongs to the caller
        assert not client.is_closed
    assert fake_server.last_request.headers["x-trace"] == "t1"

    transport = httpx.AsyncHTTPTransport(retries=0)
    p = OpenResponsesProvider(base_url=fake_server.base_url, transport=transport)
    await p.responses(request())
    (owned,) = p.http._owned.values()  # one plain-http client for a local server
    assert not owned.is_closed
    await p.aclose()
    assert owned.is_closed


def test_one_provider_across_event_loops(fake_server: FakeModelServer) -> None:
    """The CLI may run several `asyncio.run` calls with one provider: pooled connections
    belong to the loop that opened them, so the owned client is re-created per loop."""
    p = OpenResponsesProvider(base_url=fake_server.base_url)
    fake_server.queue(Reply(text="one"), Reply(text="two"))
    first = asyncio.run(p.responses(request()))
    second = asyncio.run(p.responses(request()))
    assert [
        first.response.output[0].content[0].text,
        second.response.output[0].content[0].text,
    ] == [
        "one",
        "two",
    ]


async def test_a_plain_http_server_gets_no_tls_and_https_stays_verified() -> None:
    """A local http:// server needs no CA bundle; an https URL always gets verification."""
    p = OpenResponsesProvider(base_url="http://127.0.0.1:9/v1")
    plain = p.http._client("http://127.0.0.1:9/v1/responses")
    secure = p.http._client("https://example.invalid/v1/responses")
    assert plain is not secure
    assert plain._transport._pool._ssl_context.verify_mode.name == "CERT_NONE"
    assert secure._transport._pool._ssl_context.verify_mode.name == "CERT_REQUIRED"
    assert not plain.follow_redirects
    await p.aclose()


def test_an_image_is_not_dropped_on_the_way_to_chat_completions() -> None:
    """Chat messages carry text only here: a request with an image fails, naming it,
    instead of reaching the model without it (docs/endpoint.md, "Images and files")."""
    from gambit.core.provider import CreateResponseRequest, ProviderError
    from gambit.providers._chat_wire import chat_body

    request = CreateResponseRequest.model_validate(
        {
            "model": "m",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is it?"},
                        {"type": "input_image", "image_url": "https://example.com/a.png"},
                    ],
                }
            ],
        }
    )
    with pytest.raises(ProviderError, match="input_image"):
        chat_body(request, model="m")
