"""The ASGI body limit (a 413 before the body is read) and the import's own limits."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from simulator.asgi import BodyLimit

LIMIT = 1000


class Inner:
    """An ASGI app that reads the whole body, then answers 200 with its length."""

    def __init__(self) -> None:
        self.called = False
        self.saw_disconnect = False

    async def __call__(self, scope, receive, send):
        self.called = True
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.saw_disconnect = True
                return  # what Django does: RequestAborted, no response
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})


def call(app, headers, chunks, path="/test/import"):
    sent: list[dict] = []
    queue = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    read = []

    async def receive():
        read.append(1)
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "headers": headers, "method": "POST"}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, len(read)


def test_a_declared_oversized_body_is_refused_before_reading():
    inner = Inner()
    status, body, reads = call(
        BodyLimit(inner, LIMIT), [(b"content-length", b"999999999")], [b"x" * 10]
    )
    assert status == 413 and reads == 0 and not inner.called
    assert json.loads(body) == {"error": "the request body is larger than 1,000 bytes"}


def test_an_undeclared_body_is_cut_off_at_the_limit():
    inner = Inner()
    status, body, reads = call(BodyLimit(inner, LIMIT), [], [b"x" * 600, b"x" * 600, b"x" * 600])
    assert status == 413 and inner.saw_disconnect and reads == 2  # the third chunk is never read


def test_v1_gets_the_open_responses_error_shape():
    status, body, _ = call(
        BodyLimit(Inner(), LIMIT), [(b"content-length", b"5000")], [b""], path="/v1/responses"
    )
    error = json.loads(body)["error"]
    assert status == 413 and error["code"] == "body_too_large" and error["param"] is None


def test_a_body_within_the_limit_passes_through():
    status, body, _ = call(BodyLimit(Inner(), LIMIT), [(b"content-length", b"900")], [b"x" * 900])
    assert (status, body) == (200, b"900")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text, error",
    [
        ("[" * 50_000 + "]" * 50_000, "the state file is nested too deeply"),
        (
            json.dumps({"format": "chat", "runId": "run-x", "messages": [{"role": "user", "content": "x" * 100_001}]}),
            "message 1 of the state is longer than 100,000 characters",
        ),
    ],
)  # fmt: skip
def test_hostile_imports_are_a_400_with_a_sentence(client, workspace, text, error):
    state = SimpleUploadedFile("state.json", text.encode(), content_type="application/json")
    r = client.post("/test/import?format=json", {"deck": "support/PROMPT.md", "state": state})
    assert r.status_code == 400 and r.json()["error"] == error


@pytest.mark.django_db
def test_a_deeply_nested_trace_line_is_a_400(client, workspace):
    trace = SimpleUploadedFile("trace.jsonl", ("[" * 50_000 + "]" * 50_000).encode())
    r = client.post("/test/import?format=json", {"deck": "support/PROMPT.md", "trace": trace})
    assert r.status_code == 400 and r.json()["error"] == "trace line 1 is nested too deeply"


@pytest.mark.django_db
def test_a_message_with_a_nul_character_is_refused(client, support_session):
    r = client.post(f"/test/{support_session.id}/send?format=json", {"message": "a\x00b"})
    assert r.status_code == 400 and "NUL" in r.json()["error"]
