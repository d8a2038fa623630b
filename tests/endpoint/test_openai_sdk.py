"""`/v1/responses` against a real `gambit serve`, driven by the official `openai` SDK and by a
raw HTTP client. Every object, error body and streamed event is validated against the Open
Responses specification's schemas (tests/endpoint/conformance.py) and, as a second opinion,
with the SDK's own Responses types; streams are checked event by event, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.endpoint import conformance
from tests.endpoint.serving import KEY, read_sse, serve, write

STREAM_EVENT = TypeAdapter(ResponseStreamEvent)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api")
    write(
        folder,
        "decks/assistant/PROMPT.md",
        """
        +++
        label = "Assistant"
        modelParams.model = "offline/demo"
        +++
        You help with questions, using the client's tools when they help.
        """,
    )
    write(
        folder,
        "decks/echo/PROMPT.md",
        """
        +++
        label = "Echo"
        modelParams.model = "offline/echo"
        +++
        Repeat.
        """,
    )
    proc, url, log = serve(folder)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0)


def test_models_lists_the_workspace_decks(client):
    assert {m.id for m in client.models.list().data} == {"deck/assistant", "deck/echo"}


def test_a_response_validates_against_the_reference_types(server, client):
    response = client.responses.create(model="deck/echo", input="hello there")
    assert response.status == "completed" and response.output_text == "You said: hello there"
    raw = httpx.post(
        server + "/v1/responses",
        json={"model": "deck/echo", "input": "again", "metadata": {"k": "v"}},
        headers={"Authorization": f"Bearer {KEY}"},
    ).json()
    conformance.validate_response(raw)  # the specification's ResponseResource
    parsed = Response.model_validate(raw)  # and the SDK's own model of it
    assert parsed.object == "response" and parsed.metadata == {"k": "v"}
    assert raw["completed_at"] >= raw["created_at"] and raw["usage"]["total_tokens"] > 0
    (message,) = raw["output"]
    assert message["status"] == "completed" and message["content"][0]["type"] == "output_text"
    conformance.validate_item(message)


def test_the_stream_follows_the_spec_event_by_event(server):
    frames = read_sse(server, {"model": "deck/echo", "input": "one two three"})
    events = conformance.validate_stream(frames)  # every event against the specification
    for event in events:
        STREAM_EVENT.validate_python(event)  # and against the SDK's stream event types
    kinds = [e["type"] for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) > 2 and "".join(deltas) == "You said: one two three"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "You said: one two three"


def test_the_sdk_streams_too(client):
    stream = client.responses.create(model="deck/echo", input="streamed", stream=True)
    kinds = [event.type for event in stream]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"


def test_a_client_tool_round_trip(client):
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    first = client.responses.create(model="deck/assistant", input="Weather in Paris?", tools=tools)
    (call,) = [o for o in first.output if o.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments)["city"]
    second = client.responses.create(
        model="deck/assistant",
        previous_response_id=first.id,
        tools=tools,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'}],
    )
    assert second.status == "completed" and "temp: 21" in second.output_text


def test_a_streamed_tool_call_follows_the_spec(server):
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    frames = read_sse(
        server, {"model": "deck/assistant", "input": "Weather in Rome?", "tools": tools}
    )
    events = conformance.validate_stream(frames)
    kinds = [e["type"] for e in events]
    start = kinds.index("response.function_call_arguments.delta") - 1
    assert kinds[start:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    call = events[-1]["response"]["output"][-1]
    assert call["type"] == "function_call" and call["status"] == "completed"


def test_a_conversation_continues_with_previous_response_id(server, client):
    first = client.responses.create(model="deck/echo", input="first")
    second = client.responses.create(
        model="deck/echo", input="second", previous_response_id=first.id
    )
    assert second.output_text == "You said: second"
    sessions = httpx.get(server + "/test.json").json()["sessions"]
    api = [s for s in sessions if s["origin"] == "api"]
    assert api  # recorded in the Test tab
    details = [httpx.get(server + f"/test/{s['id']}.json").json() for s in api]
    mine = next(d for d in details if len(d["runs"]) == 2)  # both calls, one session
    texts = [b["text"] for b in mine["conversation"] if b["kind"] in ("user", "assistant")]
    assert texts == ["first", "You said: first", "second", "You said: second"]


def test_a_provider_model_is_proxied_and_recorded(client):
    response = client.responses.create(model="offline/echo", input="via the router")
    assert response.output_text == "You said: via the router"


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"model": "deck/nope", "input": "x"}, 404, "model_not_found"),
        ({"model": "deck/echo", "input": []}, 400, "invalid_value"),
        (
            {
                "model": "deck/echo",
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "https://x/y.png"}],
                    }
                ],
            },
            400,
            "unsupported_content",
        ),
        (
            {"model": "deck/echo", "input": "x", "previous_response_id": "resp-0"},
            404,
            "previous_response_not_found",
        ),
    ],
)
def test_errors_are_structured(server, client, kwargs, status, code):
    with pytest.raises(openai.APIStatusError) as info:
        client.responses.create(**kwargs)
    assert info.value.status_code == status
    error = info.value.body
    assert error["code"] == code and error["type"] and error["message"]
    assert "param" in error
    raw = httpx.post(
        server + "/v1/responses", json=kwargs, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert raw.status_code == status
    conformance.validate_error_body(raw.json())


def test_auth_and_malformed_requests(server):
    bad = openai.OpenAI(base_url=server + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.responses.create(model="deck/echo", input="x")
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    garbled = httpx.post(server + "/v1/responses", content=b"{not json", headers=headers)
    assert garbled.status_code == 400 and garbled.json()["error"]["code"] == "invalid_json"
    deep = httpx.post(
        server + "/v1/responses", content=b"[" * 50000 + b"]" * 50000, headers=headers
    )
    assert deep.status_code == 400
    wrong_method = httpx.get(server + "/v1/responses", headers=headers)
    assert wrong_method.status_code == 405
    form = httpx.post(
        server + "/v1/responses",
        data={"model": "deck/echo"},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert form.status_code == 415
    anonymous = httpx.get(server + "/v1/models")
    assert anonymous.status_code == 401
    for response in (garbled, deep, wrong_method, form, anonymous):
        conformance.validate_error_body(response.json())


def test_the_api_answers_json_outside_the_browser_middleware(server):
    """/v1/* skips the simulator's middleware chain (asgi.ApiHandler) but keeps the Host
    check, `nosniff`, and structured errors for what no view answers."""
    headers = {"Authorization": f"Bearer {KEY}"}
    models = httpx.get(server + "/v1/models", headers=headers)
    assert models.status_code == 200 and models.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in models.headers
    missing = httpx.get(server + "/v1/nothing-here", headers=headers)
    assert missing.status_code == 404
    conformance.validate_error_body(missing.json())
    spoofed = httpx.get(server + "/v1/models", headers={**headers, "Host": "evil.example"})
    assert spoofed.status_code == 400
    conformance.validate_error_body(spoofed.json())


def test_legacy_chat_completions_is_off_by_default(server):
    response = httpx.post(
        server + "/v1/chat/completions",
        json={"model": "deck/echo", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "endpoint_disabled"


def test_a_client_that_disconnects_cancels_the_run(server):
    long = " ".join(f"word{i}" for i in range(200))
    with httpx.stream(
        "POST",
        server + "/v1/responses",
        json={"model": "deck/echo", "input": long, "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    ) as response:
        for n, _ in enumerate(response.iter_lines()):
            if n > 12:
                break  # leave mid-stream
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        sessions = httpx.get(server + "/test.json").json()["sessions"]
        mine = [s for s in sessions if s["origin"] == "api" and s["status"] == "canceled"]
        if mine:
            return
        time.sleep(0.3)
    pytest.fail("the disconnected run was not recorded as canceled")


def test_legacy_chat_completions_when_enabled(tmp_path):
    write(
        tmp_path, "decks/echo/PROMPT.md", '+++\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n'
    )
    proc, url, log = serve(tmp_path, "--chat-completions")
    try:
        assert "legacy endpoint" in (tmp_path / "serve.log").read_text()
        legacy = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        completion = legacy.chat.completions.create(
            model="deck/echo", messages=[{"role": "user", "content": "old client"}]
        )
        assert completion.choices[0].message.content == "You said: old client"
        chunks = legacy.chat.completions.create(
            model="deck/echo", messages=[{"role": "user", "content": "streamed"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "You said: streamed"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_keys_created_with_the_gambit_command_open_the_endpoint(tmp_path):
    """`gambit keys create NAME` (the console script) prints a key once; it works until
    `gambit keys revoke NAME`; `gambit keys list` shows it without the key itself."""
    write(
        tmp_path, "decks/echo/PROMPT.md", '+++\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n'
    )
    gambit = str(Path(sys.executable).parent / "gambit")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["GAMBIT_SIM_DB"] = str(tmp_path / "sim.sqlite3")
    workspace = ["--workspace", str(tmp_path / "decks")]

    def keys(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [gambit, "keys", *args, *workspace], env=env, capture_output=True, text=True, timeout=60
        )

    created = keys("create", "laptop")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key and "shown only now" in created.stderr
    listed = keys("list")
    assert "laptop" in listed.stdout and "active" in listed.stdout and key not in listed.stdout
    proc, url, log = serve(tmp_path, env_extra={"GAMBIT_API_KEYS": ""})
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
        reply = client.responses.create(model="deck/echo", input="with my own key")
        assert reply.output_text == "You said: with my own key"
        assert keys("revoke", "laptop").returncode == 0
        with pytest.raises(openai.AuthenticationError):
            client.responses.create(model="deck/echo", input="revoked")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
