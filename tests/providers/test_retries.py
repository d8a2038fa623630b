"""Reliability: retries, backoff, Retry-After, broken and unfinished streams, timeouts."""

from __future__ import annotations

import socket
import time
from email.utils import formatdate

import httpx
import pytest

from gambit.core._provider import ProviderError
from gambit.providers import OpenResponsesProvider, RetryPolicy
from gambit.providers._http import parse_retry_after
from tests.providers.helpers import FAST_RETRY, NO_RETRY, Events, Sleeps, request
from tests.support.fake_model_server import FakeModelServer, Reply


def provider(server: FakeModelServer, **kwargs) -> OpenResponsesProvider:
    kwargs.setdefault("retry", FAST_RETRY)
    return OpenResponsesProvider(base_url=server.base_url, **kwargs)


async def test_429_with_retry_after_is_retried_after_the_hinted_delay(
    fake_server: FakeModelServer,
) -> None:
    fake_server.queue(Reply.http_error(429, "rate limited", retry_after="0.2"), Reply(text="ok!"))
    sleeps = Sleeps()
    async with provider(fake_server, sleep=sleeps) as p:
        result = await p.responses(request())
    assert sleeps == [pytest.approx(0.2)]  # the hinted delay, not the (tiny) backoff
    assert result.response.output[0].content[0].text == "ok!"
    assert len(fake_server.requests_to("/responses")) == 2


async def test_retry_after_is_capped(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply.http_error(429, retry_after="3600"), Reply(text="ok"))
    sleeps = Sleeps()
    async with provider(fake_server, sleep=sleeps) as p:  # max_retry_after = 0.5
        result = await p.responses(request())
    assert sleeps == [0.5]  # an hour was asked for; the policy's cap was waited
    assert result.response.output[0].content[0].text == "ok"


async def test_5xx_is_retried_then_succeeds(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply.http_error(503, "busy"), Reply.http_error(500), Reply(text="up"))
    async with provider(fake_server) as p:
        result = await p.responses(request())
    assert result.response.output[0].content[0].text == "up"
    assert len(fake_server.requests) == 3


async def test_retries_are_bounded_and_the_error_is_structured(
    fake_server: FakeModelServer,
) -> None:
    fake_server.queue(*[Reply.http_error(502, "bad gateway", code="upstream")] * 3)
    async with provider(fake_server) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request())
    err = info.value
    assert err.provider == "openresponses"
    assert err.status == 502 and err.code == "upstream" and err.retryable
    assert "bad gateway" in str(err) and "after 3 attempts" in str(err)
    assert str(err).startswith("openresponses: HTTP 502")
    assert len(fake_server.requests) == 3


async def test_400_is_not_retried(fake_server: FakeModelServer) -> None:
    fake_server.queue(
        Reply.http_error(
            400, "bad model", type="invalid_request", code="invalid_model", param="model"
        )
    )
    async with provider(fake_server) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request())
    assert (info.value.status, info.value.code, info.value.param) == (400, "invalid_model", "model")
    assert info.value.error_type == "invalid_request"  # type: ignore[attr-defined]
    assert not info.value.retryable
    assert len(fake_server.requests) == 1


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    p = OpenResponsesProvider(
        base_url=f"http://127.0.0.1:{port}/v1", retry=FAST_RETRY, sleep=sleeps
    )
    with pytest.raises(ProviderError) as info:
        await p.responses(request())
    assert "cannot connect to http://127.0.0.1" in str(info.value)
    assert len(sleeps) == 2  # two retries, with backoff
    await p.aclose()


async def test_stream_cut_midway_keeps_the_partial_text_and_is_not_retried(
    fake_server: FakeModelServer,
) -> None:
    fake_server.queue(Reply(deltas=["Hello", " wor", "ld"] * 20, cut_after_bytes=2500))
    events = Events()
    async with provider(fake_server) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True), on_stream_event=events)
    err = info.value
    assert "the stream broke after" in str(err) and "closed the connection" in str(err)
    assert err.partial_text == "".join(events.deltas())
    assert err.partial_text.startswith("Hello wor")
    assert err.retryable
    assert len(fake_server.requests) == 1  # part of the stream reached the caller


async def test_stream_without_terminal_event_raises(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["par", "tial"], terminal="none"))
    async with provider(fake_server) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True))
    assert "ended without a terminal event" in str(info.value)
    assert info.value.partial_text == "partial"


async def test_done_before_terminal_event_raises(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(body='event: x\ndata: {"type":"x"}\n\ndata: [DONE]\n\n', stream=True))
    async with provider(fake_server) as p:
        with pytest.raises(ProviderError, match="without a terminal event"):
            await p.responses(request(stream=True))


async def test_cut_before_any_event_is_retried(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["a"], cut_after_bytes=5), Reply(deltas=["fine"]))
    events = Events()
    async with provider(fake_server) as p:
        result = await p.responses(request(stream=True), on_stream_event=events)
    assert events.deltas() == ["fine"]
    assert result.response.output[0].content[0].text == "fine"
    assert len(fake_server.requests) == 2


async def test_read_timeout_mid_stream(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["slow"], pause_after_events=5))
    async with provider(fake_server, retry=NO_RETRY, timeout=httpx.Timeout(5, read=0.2)) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(request(stream=True))
    fake_server.resume()
    assert "timed out waiting for data" in str(info.value)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= (parse_retry_after({"retry-after": date}, now=now) or 0) <= 31
    assert parse_retry_after({"retry-after": formatdate(now - 60, usegmt=True)}) == 0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_grows_and_is_jittered() -> None:
    policy = RetryPolicy(base_delay=1, max_delay=5)
    for attempt, ceiling in [(0, 1), (1, 2), (2, 4), (5, 5)]:
        values = {policy.backoff(attempt) for _ in range(20)}
        assert all(ceiling / 2 <= v <= ceiling for v in values)
        assert len(values) > 1
    assert policy.should_retry_status(429) and policy.should_retry_status(503)
    assert not policy.should_retry_status(501) and not policy.should_retry_status(404)
