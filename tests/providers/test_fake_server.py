"""The fake model server itself: shapes it renders, recording, control from other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.fake_model_server import (
    FakeModelServer,
    FunctionCall,
    RemoteFakeModelServer,
    Reply,
    awkward_split,
)

ROOT = Path(__file__).resolve().parents[2]


def _sse_events(text: str) -> list[tuple[str | None, str]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            out.append((event, "\n".join(data)))
    return out


def test_responses_stream_follows_the_seed_004_sequence(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["Hel", "lo"], function_calls=[FunctionCall("f", {"a": 1})]))
    resp = httpx.post(
        fake_server.base_url + "/responses", json={"model": "m", "input": "hi", "stream": True}
    )
    assert resp.headers["content-type"].startswith("text/event-stream")
    frames = _sse_events(resp.text)
    assert frames[-1] == (None, "[DONE]")
    events = [json.loads(data) for _, data in frames[:-1]]
    assert all(name == event["type"] for (name, _), event in zip(frames, events, strict=False))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[-1]["response"]["output"][1]["arguments"] == '{"a":1}'


def test_chat_stream_and_non_stream(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["a", "b"], function_calls=[FunctionCall("g", "{}")]))
    fake_server.queue(Reply(text="whole"))
    stream = httpx.post(
        fake_server.base_url + "/chat/completions", json={"model": "m", "stream": True}
    )
    frames = _sse_events(stream.text)
    assert frames[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in frames[:-1]]
    assert chunks[1]["choices"][0]["delta"] == {"content": "a"}
    assert chunks[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "g"
    plain = httpx.post(fake_server.base_url + "/chat/completions", json={"model": "m"}).json()
    assert plain["choices"][0]["message"]["content"] == "whole"


def test_requests_are_recorded_with_headers_and_json(fake_server: FakeModelServer) -> None:
    httpx.post(
        fake_server.url + "/api/v1/responses",
        json={"model": "x", "input": "hi"},
        headers={"Authorization": "Bearer k"},
    )
    (req,) = fake_server.requests_to("/responses")
    assert req.path == "/api/v1/responses"
    assert req.headers["authorization"] == "Bearer k"
    assert req.body == {"model": "x", "input": "hi"}


def test_awkward_split_cuts_inside_multibyte_chars_and_separators() -> None:
    data = "data: é€\r\n\r\n".encode()
    pieces = awkward_split(data)
    assert b"".join(pieces) == data
    assert len(pieces) > 5
    with pytest.raises(UnicodeDecodeError):
        for piece in pieces:
            piece.decode("utf-8")
    assert not any(b"\r\n\r\n" in piece for piece in pieces)


def test_error_reply_and_switches(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply.http_error(429, "slow down", retry_after=3))
    resp = httpx.post(fake_server.base_url + "/responses", json={"model": "m"})
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "3"
    assert resp.json()["error"]["type"] == "rate_limit_error"

    fake_server.responses_enabled = False
    assert httpx.post(fake_server.base_url + "/responses", json={}).status_code == 404
    fake_server.responses_enabled = True
    fake_server.reject_previous_response_id = True
    resp = httpx.post(fake_server.base_url + "/responses", json={"previous_response_id": "r"})
    assert resp.json()["error"]["code"] == "previous_response_not_found"


def test_cut_connection_breaks_the_chunked_body(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["x"] * 10, cut_after_bytes=300))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(fake_server.base_url + "/responses", json={"stream": True})


def test_scripted_over_http_from_another_process(tmp_path: Path) -> None:
    """A standalone server (`python -m tests.support.fake_model_server`) scripted remotely."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_model_server", "--text", "hello there"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("FAKE_MODEL_SERVER_URL=")
        remote = RemoteFakeModelServer(line.split("=", 1)[1])
        remote.queue(Reply(text="scripted"))
        remote.configure(models=["tiny:latest"])
        first = httpx.post(remote.url + "/v1/chat/completions", json={"model": "m"}).json()
        second = httpx.post(remote.url + "/v1/chat/completions", json={"model": "m"}).json()
        assert first["choices"][0]["message"]["content"] == "scripted"
        assert second["choices"][0]["message"]["content"] == "hello there"
        tags = httpx.get(remote.url + "/api/tags").json()
        assert [m["name"] for m in tags["models"]] == ["tiny:latest"]
        assert [r["path"] for r in remote.requests()][:2] == ["/v1/chat/completions"] * 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_env_points_providers_at_the_server(fake_server: FakeModelServer) -> None:
    env = fake_server.env()
    assert env["OPENRESPONSES_BASE_URL"] == fake_server.base_url
    assert env["OLLAMA_BASE_URL"].startswith("http://127.0.0.1:")
    code = (
        "import os, httpx; "
        "print(httpx.post(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
        "json={'model': 'm'}).json()['choices'][0]['message']['content'])"
    )
    fake_server.queue(Reply(text="from a subprocess"))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.strip() == "from a subprocess"


def test_delay_streams_slowly(fake_server: FakeModelServer) -> None:
    fake_server.queue(Reply(deltas=["a", "b", "c"], delay=0.02))
    start = time.perf_counter()
    with httpx.stream("POST", fake_server.base_url + "/responses", json={"stream": True}) as r:
        first = None
        for chunk in r.iter_text():
            if '"delta":"a"' in chunk and first is None:
                first = time.perf_counter() - start
        total = time.perf_counter() - start
    assert first is not None and first < total - 0.05
