"""Structured errors, errors inside 200 answers, broken streams naming the provider, and the
retry rules (Retry-After honoured and capped, nothing retried once a delta reached the
caller). Every test runs against the fake model server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from email.utils import formatdate

import pytest

from gambit.core._messages import ChatMessage
from gambit.core._provider import ProviderError
from gambit.providers import (
    OllamaProvider,
    OpenAIResponsesProvider,
    OpenResponsesProvider,
    OpenRouterProvider,
    RetryPolicy,
)
from tests.providers.helpers import FAST_RETRY, NO_RETRY, Events, Sleeps, request
from tests.support.fake_model_server import FakeModelServer, Reply

RETRY = RetryPolicy(max_retries=2, base_delay=0.25, max_delay=8.0, max_retry_after=5.0)


def sse(*events: dict | str) -> bytes:
    """A raw event stream: dicts become `data:` frames, strings are sent as they are."""
    out = []
    for event in events:
        out.append(event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def chunk(content: str | None = None, finish: str | None = None, **extra) -> dict:
    delta = {"content": content} if content is not None else {}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


# ---- structured errors --------------------------------------------------------------------------


async def test_http_error_message_carries_code_param_and_type(fake_server: FakeModelServer):
    fake_server.queue(
        Reply.http_error(
            400,
            "Invalid model 'x'",
            type="invalid_request_error",
            code="model_not_found",
            param="model",
        )
    )
    async with OpenAIResponsesProvider(base_url=fake_server.base_url, api_key="k") as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(model="openai-api/x"))
    err = info.value
    assert str(err) == (
        f"openai-api: HTTP 400 from {fake_server.base_url}/responses: Invalid model 'x' "
        "(code model_not_found, param model, type invalid_request_error)"
    )
    assert (err.status, err.code, err.param) == (400, "model_not_found", "model")
    assert err.error_type == "invalid_request_error" and not err.retryable


async def test_ollama_plain_error_string(fake_server: FakeModelServer):
    fake_server.queue(Reply(status=400, body={"error": "model 'nope' not found"}))
    async with OllamaProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(model="ollama/nope"))
    assert str(info.value).endswith(": model 'nope' not found")
    assert str(info.value).startswith("ollama: HTTP 400 from ")
    assert info.value.error_type is None


async def test_response_failed_event_surfaces_every_field(fake_server: FakeModelServer):
    fake_server.queue(
        Reply(
            deltas=["half"],
            terminal="failed",
            failure={
                "type": "server_error",
                "code": "model_error",
                "param": None,
                "message": "the model crashed",
            },
        )
    )
    events = Events()
    async with OpenResponsesProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True), on_stream_event=events)
    err = info.value
    assert str(err) == (
        "openresponses: the response failed: the model crashed (code model_error, type server_error)"
    )
    assert err.error_type == "server_error" and err.retryable  # a server error may pass
    assert err.partial_text == "half" == "".join(events.deltas())
    assert len(fake_server.requests) == 1  # text reached the caller: never retried


async def test_openai_flat_error_event(fake_server: FakeModelServer):
    created = {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}
    error = {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "Too many tokens",
        "param": None,
        "sequence_number": 3,
    }
    fake_server.queue(Reply(body=sse(created, delta, error), stream=True))
    async with OpenAIResponsesProvider(
        base_url=fake_server.base_url, api_key="k", retry=FAST_RETRY
    ) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(model="gpt-4.1", stream=True))
    err = info.value
    assert str(err) == "openai-api: stream error: Too many tokens (code rate_limit_exceeded)"
    assert err.code == "rate_limit_exceeded" and err.partial_text == "Hi"
    assert len(fake_server.requests) == 1


async def test_chat_stream_error_chunk_is_structured(fake_server: FakeModelServer):
    body = sse(
        chunk("par"),
        {"error": {"message": "Upstream overloaded", "code": 502, "type": "overloaded_error"}},
    )
    fake_server.queue(Reply(body=body, stream=True))
    async with OpenRouterProvider(base_url=fake_server.base_url, api_key="k") as p:
        with pytest.raises(ProviderError) as info:
            await p.chat(model="m", messages=[ChatMessage(role="user", content="hi")], stream=True)
    err = info.value
    assert (
        str(err)
        == "openrouter: stream error: Upstream overloaded (code 502, type overloaded_error)"
    )
    assert err.code == "502" and err.retryable and err.partial_text == "par"


# ---- errors inside 200 answers ------------------------------------------------------------------


async def test_error_in_a_200_chat_completion_raises(fake_server: FakeModelServer):
    fake_server.queue(
        Reply(status=200, body={"error": {"message": "No endpoints found", "code": 404}})
    )
    async with OpenRouterProvider(base_url=fake_server.base_url, api_key="k") as p:
        with pytest.raises(ProviderError) as info:
            await p.chat(model="m", messages=[ChatMessage(role="user", content="hi")])
    assert str(info.value) == (
        "openrouter: the server answered with an error: No endpoints found (code 404)"
    )


async def test_error_in_a_200_responses_answer_raises(fake_server: FakeModelServer):
    fake_server.queue(
        Reply(status=200, body={"error": {"message": "quota", "type": "insufficient_quota"}})
    )
    async with OpenResponsesProvider(base_url=fake_server.base_url) as p:
        with pytest.raises(ProviderError, match="answered with an error: quota"):
            await p.responses(request())
        # The same for a server that answers a stream request with a JSON error body.
        fake_server.queue(Reply(status=200, body={"error": "overloaded"}, stream=False))
        with pytest.raises(ProviderError, match="answered with an error: overloaded"):
            await p.responses(request(stream=True))


async def test_non_stream_failed_response_keeps_code_and_param(fake_server: FakeModelServer):
    failed = {
        "id": "r1",
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": "bad_input", "param": "input", "message": "nope", "type": "x"},
    }
    fake_server.queue(Reply(status=200, body=failed))
    async with OpenResponsesProvider(base_url=fake_server.base_url) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request())
    assert str(info.value).endswith(
        "the response failed: nope (code bad_input, param input, type x)"
    )
    assert info.value.param == "input"


@pytest.mark.parametrize("stream", [True, False])
async def test_finish_reason_error_raises(fake_server: FakeModelServer, stream: bool):
    if stream:
        body = sse(chunk("partial "), chunk(finish="error"), "data: [DONE]\n\n")
        fake_server.queue(Reply(body=body, stream=True))
    else:
        completion = {
            "id": "c",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "error",
                }
            ],
        }
        fake_server.queue(Reply(body=completion, status=200))
    async with OpenRouterProvider(base_url=fake_server.base_url, api_key="k") as p:
        with pytest.raises(ProviderError, match="finish_reason 'error'") as info:
            msgs = [ChatMessage(role="user", content="hi")]
            await p.chat(model="m", messages=msgs, stream=stream)
    assert info.value.retryable
    assert info.value.partial_text == ("partial " if stream else "")


# ---- broken streams -----------------------------------------------------------------------------


async def test_a_cut_stream_names_the_provider_the_url_and_what_arrived(
    fake_server: FakeModelServer,
):
    fake_server.queue(Reply(deltas=["Hello ", "world"] * 10, cut_after_bytes=1500))
    events = Events()
    async with OllamaProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(model="ollama/llama3", stream=True), on_stream_event=events)
    message = str(info.value)
    partial = info.value.partial_text
    assert partial and partial == "".join(events.deltas())
    assert message.startswith("ollama: the stream broke after ")
    assert f"events from {fake_server.base_url}/responses ({len(partial)} characters" in message
    assert "the server closed the connection" in message
    assert len(fake_server.requests) == 1


async def test_a_stream_without_terminal_event_names_the_url(fake_server: FakeModelServer):
    fake_server.queue(Reply(deltas=["a", "b"], terminal="none"))
    async with OpenResponsesProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True))
    assert f"from {fake_server.base_url}/responses (2 characters of text had arrived)" in str(
        info.value
    )
    assert len(fake_server.requests) == 1


async def test_a_url_without_scheme_fails_at_once():
    sleeps = Sleeps()
    p = OpenResponsesProvider(base_url="localhost:11434/v1", retry=RETRY, sleep=sleeps)
    with pytest.raises(ProviderError, match="needs an http:// or https:// scheme"):
        await p.responses(request())
    assert sleeps == []  # not retried
    await p.aclose()


# ---- credentials in a base URL ------------------------------------------------------------------
# A base URL may carry a user name and password (OPENRESPONSES_BASE_URL=http://user:pw@host/v1);
# an error reaches session pages, traces, exports, logs and /v1 error bodies, so it shows the
# URL with `***` in their place (docs/providers.md, "Reliability").


def with_credentials(url: str) -> str:
    return url.replace("http://", "http://gambit-user:s3cret-pw@")


def shows_no_credentials(message: str) -> bool:
    return "s3cret-pw" not in message and "gambit-user" not in message


async def test_an_unreachable_url_is_named_without_its_credentials():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = OpenResponsesProvider(
        base_url=f"http://gambit-user:s3cret-pw@127.0.0.1:{port}/v1", retry=NO_RETRY
    )
    with pytest.raises(ProviderError) as info:
        await p.responses(request())
    await p.aclose()
    message = str(info.value)
    assert f"cannot connect to http://***@127.0.0.1:{port}/v1/responses" in message, message
    assert shows_no_credentials(message) and shows_no_credentials(repr(p))


@pytest.mark.parametrize(
    "base_url",
    [
        " http://gambit-user:s3cret-pw@127.0.0.1:{port}/v1",  # a blank before it
        "\thttp://gambit-user:s3cret-pw@127.0.0.1:{port}/v1",
        "http://gambit-user:s3cret/pw@127.0.0.1:{port}/v1",  # a password holding / ? #
        "http://gambit-user:s3cret?pw@127.0.0.1:{port}/v1",
        "http://gambit-user:s3cret#pw@127.0.0.1:{port}/v1",
        "http:/\\gambit-user:s3cret-pw@127.0.0.1:{port}/v1",  # a mistyped scheme
    ],
)
async def test_a_malformed_url_is_named_without_its_credentials(base_url: str):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = OpenResponsesProvider(base_url=base_url.format(port=port), retry=NO_RETRY)
    with pytest.raises(ProviderError) as info:
        await p.responses(request())
    await p.aclose()
    assert "s3cret" not in str(info.value) and "gambit-user" not in str(info.value), info.value
    assert "s3cret" not in repr(p)


async def test_an_error_answer_is_named_without_the_urls_credentials(
    fake_server: FakeModelServer,
):
    fake_server.queue(Reply.http_error(400, "Invalid model 'x'", code="model_not_found"))
    base = with_credentials(fake_server.base_url)
    async with OpenResponsesProvider(base_url=base, retry=NO_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request())
    message = str(info.value)
    shown = fake_server.base_url.replace("http://", "http://***@")
    assert message.startswith(f"openresponses: HTTP 400 from {shown}/responses: Invalid model"), (
        message
    )
    assert shows_no_credentials(message)
    assert fake_server.requests[0].headers.get("authorization", "").startswith("Basic ")


@pytest.mark.parametrize(
    "reply",
    [
        Reply(deltas=["Hello ", "world"] * 10, cut_after_bytes=1500),  # the stream broke
        Reply(deltas=["a", "b"], terminal="none"),  # no terminal event
        Reply(status=200, body="not json", stream=False),  # not an event stream
    ],
)
async def test_a_broken_stream_is_named_without_the_urls_credentials(
    fake_server: FakeModelServer, reply: Reply
):
    fake_server.queue(reply)
    base = with_credentials(fake_server.base_url)
    async with OpenResponsesProvider(base_url=base, retry=NO_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True))
    message = str(info.value)
    assert f"{fake_server.base_url.replace('http://', 'http://***@')}/responses" in message
    assert shows_no_credentials(message), message


# ---- Retry-After --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": "3600"}, 5.0),  # capped at max_retry_after
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"Retry-After": "soon"}, None),  # unparseable: backoff
    ],
)
async def test_retry_after_is_honoured_and_capped(
    fake_server: FakeModelServer, headers: dict[str, str], expected: float | None
):
    fake_server.queue(
        Reply(status=503, error={"message": "busy"}, headers=headers), Reply(text="ok")
    )
    sleeps = Sleeps()
    async with OpenResponsesProvider(base_url=fake_server.base_url, retry=RETRY, sleep=sleeps) as p:
        result = await p.responses(request())
    assert result.response.output[0].content[0].text == "ok"
    assert len(sleeps) == 1
    if expected is None:
        assert 0.125 <= sleeps[0] <= 0.25  # base_delay x [0.5, 1]
    else:
        assert sleeps[0] == pytest.approx(expected)


async def test_retry_after_as_an_http_date(fake_server: FakeModelServer):
    import time

    when = formatdate(time.time() + 3, usegmt=True)
    fake_server.queue(Reply.http_error(429, "later", headers={"Retry-After": when}), Reply())
    sleeps = Sleeps()
    async with OpenResponsesProvider(base_url=fake_server.base_url, retry=RETRY, sleep=sleeps) as p:
        await p.responses(request())
    assert 1.0 <= sleeps[0] <= 3.0


async def test_exhausted_retries_report_the_attempts_and_keep_the_fields(
    fake_server: FakeModelServer,
):
    fake_server.queue(
        *[Reply.http_error(429, "slow down", code="rate_limit_exceeded", retry_after="0")] * 3
    )
    sleeps = Sleeps()
    async with OpenResponsesProvider(base_url=fake_server.base_url, retry=RETRY, sleep=sleeps) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True))
    err = info.value
    assert sleeps == [0, 0]
    assert "HTTP 429" in str(
        err
    ) and "slow down (code rate_limit_exceeded, type rate_limit_error)" in str(err)
    assert str(err).endswith("(after 3 attempts)")
    assert err.retryable and err.status == 429


# ---- reasoning items ----------------------------------------------------------------------------


async def test_reasoning_items_are_kept_when_the_terminal_event_has_no_output(
    fake_server: FakeModelServer,
):
    """Some servers end with `response.completed` without the output: the items, reasoning
    included, are rebuilt from the events."""
    rs = {"type": "reasoning", "id": "rs_1", "summary": [], "status": "in_progress"}
    msg = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": rs},
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Think",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "ing.",
        },
        {"type": "response.output_item.added", "output_index": 1, "item": msg},
        {
            "type": "response.output_text.delta",
            "output_index": 1,
            "content_index": 0,
            "delta": "42",
        },
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": []},
        },
    ]
    fake_server.queue(Reply(body=sse(*events), stream=True))
    async with OpenResponsesProvider(base_url=fake_server.base_url) as p:
        result = await p.responses(request(stream=True))
    reasoning, message = (
        item.to_dict() if hasattr(item, "to_dict") else item for item in result.response.output
    )
    assert reasoning["type"] == "reasoning" and reasoning["id"] == "rs_1"
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Thinking."}]
    assert message["content"][0]["text"] == "42"
