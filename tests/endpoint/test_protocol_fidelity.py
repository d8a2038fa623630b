"""Nothing the model or the client produced is dropped (docs/endpoint.md): a real `gambit
serve` whose models are the fake model server (tests/support/fake_model_server.py) on
127.0.0.1, driven by the official `openai` SDK and a raw HTTP client; every response, item,
error body and streamed event is validated against the specification's schemas
(conformance.py).

- every client tool call of a pass is returned, and answered and resumed together; the
  request's `parallel_tool_calls` reaches the model;
- a proxied provider model's function calls, reasoning and extension items are answered,
  streamed and not, in the upstream's order;
- a deck's model's reasoning items are in the response as received;
- a truncated answer is `incomplete`, with its reason, in the response, the stream and the
  trace;
- `item_reference` resolves ids the API returned; an unknown id is a 400;
- images and files reach a model whose provider takes them; otherwise a structured 400;
- `max_tool_calls`, `background`, `conversation`, the reported temperature, `instructions`,
  `GAMBIT_CHAT_FALLBACK` and the paths in a failing deck's message.
"""

from __future__ import annotations

import base64
import json

import httpx
import openai
import pytest

from tests.endpoint import conformance
from tests.endpoint.serving import KEY, read_sse, serve, write
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

HEADERS = {"Authorization": f"Bearer {KEY}"}
PROXIED = "openresponses/fake"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CLOCK = {
    "type": "function",
    "name": "get_time",
    "description": "The time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
IMAGE = f"data:image/png;base64,{PNG}"


@pytest.fixture(scope="module")
def upstream():
    fake = FakeModelServer().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, upstream):
    folder = tmp_path_factory.mktemp("fidelity")
    write(
        folder,
        "decks/upstream/PROMPT.md",
        """
        +++
        label = "Upstream"

        [modelParams]
        model = "openresponses/fake"
        temperature = 0.3
        +++
        You answer briefly.
        """,
    )
    write(
        folder,
        "decks/echo/PROMPT.md",
        '+++\nlabel = "Echo"\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n',
    )
    write(
        folder,
        "decks/broken/deck.py",
        """
        import gambit


        def run(ctx):
            return {}["missing"]


        deck = gambit.define_deck(run=run)
        """,
    )
    proc, url, log = serve(folder, "--chat-completions", env_extra=upstream.env())
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def fake(upstream):
    upstream.reset()
    return upstream


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0)


def _post(server: str, body: dict, path: str = "/v1/responses") -> httpx.Response:
    return httpx.post(server + path, json=body, headers=HEADERS, timeout=30)


def _sent(fake: FakeModelServer) -> list[dict]:
    return [r.body for r in fake.requests_to("/responses")]


def _response(server: str, body: dict) -> dict:
    raw = _post(server, body)
    assert raw.status_code == 200, raw.text
    data = raw.json()
    conformance.validate_response(data)
    return data


def _trace(server: str, session_id: str) -> list[dict]:
    text = httpx.get(server + f"/test/{session_id}/export/trace.jsonl", timeout=10).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------- parallel client tool calls


def test_parallel_client_calls_are_returned_and_resumed_together(server, client, fake):
    fake.queue(
        Reply(
            function_calls=[
                FunctionCall("get_weather", {"city": "Oslo"}, call_id="c-weather"),
                FunctionCall("get_time", {"city": "Oslo"}, call_id="c-time"),
            ]
        ),
        Reply(text="Sunny at noon."),
    )
    raw_first = client.responses.with_raw_response.create(
        model="deck/upstream",
        input="Weather and time in Oslo?",
        tools=[WEATHER, CLOCK],
        parallel_tool_calls=True,
    )
    first = raw_first.parse()
    calls = [o for o in first.output if o.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [
        ("c-weather", "get_weather"),
        ("c-time", "get_time"),
    ]
    assert first.parallel_tool_calls is True
    session = raw_first.headers["Gambit-Session-Id"]
    ends = [e for e in _trace(server, session) if e["type"] == "run.end"]
    assert ends[-1]["status"] == "paused"  # waiting for the client's answers, not completed
    second = client.responses.create(
        model="deck/upstream",
        previous_response_id=first.id,
        tools=[WEATHER, CLOCK],
        input=[
            {"type": "function_call_output", "call_id": "c-weather", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c-time", "output": "12:00"},
        ],
    )
    assert second.status == "completed" and second.output_text == "Sunny at noon."
    resumed = _sent(fake)[1]["input"]
    assert [i["call_id"] for i in resumed if i.get("type") == "function_call"] == [
        "c-weather",
        "c-time",
    ]
    assert [i["output"] for i in resumed if i.get("type") == "function_call_output"] == [
        "sunny",
        "12:00",
    ]
    assert _sent(fake)[0]["parallel_tool_calls"] is True


def test_parallel_client_calls_stream_one_item_each(server, fake):
    fake.queue(
        Reply(
            function_calls=[
                FunctionCall("get_weather", {"city": "Rome"}),
                FunctionCall("get_time", {"city": "Rome"}),
            ]
        )
    )
    body = {
        "model": "deck/upstream",
        "input": "Weather and time?",
        "tools": [WEATHER, CLOCK],
        "parallel_tool_calls": False,
    }
    events = conformance.validate_stream(read_sse(server, body))
    final = events[-1]["response"]
    assert [i["name"] for i in final["output"] if i["type"] == "function_call"] == [
        "get_weather",
        "get_time",
    ]
    assert final["parallel_tool_calls"] is False
    assert _sent(fake)[0]["parallel_tool_calls"] is False


# ---------------------------------------------------------------- a proxied provider model


def test_a_proxied_models_function_call_is_answered(server, client, fake):
    fake.queue(Reply(function_calls=[FunctionCall("get_weather", {"city": "Lima"}, "c-1")]))
    first = client.responses.create(model=PROXIED, input="Weather in Lima?", tools=[WEATHER])
    (call,) = first.output
    assert (call.type, call.call_id, call.name) == ("function_call", "c-1", "get_weather")
    assert json.loads(call.arguments) == {"city": "Lima"}
    assert _sent(fake)[0]["tools"][0]["name"] == "get_weather"
    fake.queue(Reply(text="Warm."))
    second = client.responses.create(
        model=PROXIED,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "c-1", "output": "25C"}],
        tools=[WEATHER],
    )
    assert second.output_text == "Warm."
    sent = _sent(fake)[1]["input"]
    assert [i["type"] for i in sent[-2:]] == ["function_call", "function_call_output"]


def test_a_proxied_models_function_call_streams_with_its_argument_events(server, fake):
    fake.queue(Reply(function_calls=[FunctionCall("get_weather", {"city": "Quito"})]))
    events = conformance.validate_stream(
        read_sse(server, {"model": PROXIED, "input": "Weather?", "tools": [WEATHER]})
    )
    kinds = [e["type"] for e in events]
    assert kinds[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    (call,) = events[-1]["response"]["output"]
    assert json.loads(call["arguments"]) == {"city": "Quito"}


@pytest.mark.parametrize("stream", [True, False])
def test_a_proxied_model_keeps_the_upstreams_items_and_their_order(server, fake, stream):
    extension = {"type": "acme:search", "id": "s-1", "status": "completed", "query": "q"}
    fake.queue(
        Reply(
            reasoning="Think first.",
            reasoning_encrypted="opaque==",
            text="Found it.",
            function_calls=[FunctionCall("get_weather", {"city": "Oslo"}, "c-9")],
            items=[extension],
            stream=stream,
        )
    )
    body = {"model": PROXIED, "input": "search", "tools": [WEATHER]}
    if stream:
        events = conformance.validate_stream(read_sse(server, body))
        final = events[-1]["response"]
        added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
        assert added == ["reasoning", "message", "function_call", "acme:search"]
        kinds = [e["type"] for e in events]
        # Each item is done before the next one starts, as upstream sent them.
        for index in range(3):
            done = next(
                n
                for n, e in enumerate(events)
                if e["type"] == "response.output_item.done" and e["output_index"] == index
            )
            assert kinds[done + 1] == "response.output_item.added"
    else:
        final = _response(server, body)
    assert [i["type"] for i in final["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "acme:search",
    ]
    reasoning = final["output"][0]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Think first."}]
    assert reasoning["encrypted_content"] == "opaque=="
    assert final["output"][3]["query"] == "q"


# ---------------------------------------------------------------- reasoning of a deck's model


def test_a_decks_model_reasoning_is_in_the_response(server, client, fake):
    fake.queue(Reply(reasoning="Short answer wanted.", reasoning_encrypted="sealed", text="Hi."))
    response = client.responses.create(model="deck/upstream", input="Hello")
    kinds = [o.type for o in response.output]
    assert kinds == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.summary[0].text == "Short answer wanted."
    assert reasoning.encrypted_content == "sealed"
    conformance.validate_response(
        httpx.get(server + f"/v1/responses/{response.id}", headers=HEADERS).json()
    )


# ---------------------------------------------------------------- truncation


@pytest.mark.parametrize("model", ["deck/upstream", PROXIED])
def test_a_truncated_answer_is_incomplete_everywhere(server, client, fake, model):
    fake.queue(Reply(deltas=["Once ", "upon"], terminal="incomplete"))
    events = conformance.validate_stream(read_sse(server, {"model": model, "input": "story"}))
    final = events[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["status"] == "incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["output"][-1]["status"] == "incomplete"
    fake.queue(Reply(text="Once upon", terminal="incomplete"))
    raw = client.responses.with_raw_response.create(
        model=model, input="story", max_output_tokens=16
    )
    answer = raw.parse()
    assert answer.status == "incomplete" and answer.incomplete_details.reason == "max_output_tokens"
    assert answer.output_text == "Once upon"
    results = [
        e for e in _trace(server, raw.headers["Gambit-Session-Id"]) if e["type"] == "model.result"
    ]
    assert results[-1]["finishReason"] == "length"
    assert results[-1]["incompleteDetails"] == {"reason": "max_output_tokens"}
    ends = [e for e in _trace(server, raw.headers["Gambit-Session-Id"]) if e["type"] == "run.end"]
    assert ends[-1]["status"] == "incomplete"


# ---------------------------------------------------------------- item_reference


def test_item_references_resolve_ids_the_api_returned(server, client, fake):
    fake.queue(Reply(text="My name is Fake."))
    first = client.responses.create(
        model=PROXIED, input=[{"type": "message", "role": "user", "content": "Who are you?"}]
    )
    (asked,) = client.responses.input_items.list(first.id).data
    answered = first.output[0].id
    fake.queue(Reply(text="You asked who I am."))
    second = client.responses.create(
        model=PROXIED,
        input=[
            {"type": "item_reference", "id": asked.id},
            {"type": "item_reference", "id": answered},
            {"type": "message", "role": "user", "content": "What did I ask?"},
        ],
    )
    assert second.status == "completed"
    sent = _sent(fake)[1]["input"]
    texts = [part["text"] for item in sent for part in item["content"]]
    assert texts == ["Who are you?", "My name is Fake.", "What did I ask?"]
    listed = client.responses.input_items.list(second.id, order="asc").data
    assert [item.id for item in listed[:2]] == [asked.id, answered]


def test_an_unknown_item_reference_is_a_400_before_any_model_call(server, client, fake):
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(
            model="deck/upstream", input=[{"type": "item_reference", "id": "msg-nope"}]
        )
    conformance.validate_error_body({"error": info.value.body})
    assert info.value.body["code"] == "item_not_found"
    assert info.value.body["param"] == "input[0].id"
    assert not _sent(fake)


# ---------------------------------------------------------------- images and files


@pytest.mark.parametrize("model", [PROXIED, "deck/upstream"])
def test_images_and_files_reach_a_model_that_takes_them(server, client, fake, model):
    fake.queue(Reply(text="A heart."))
    document = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
    raw = client.responses.with_raw_response.create(
        model=model,
        input=[
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": IMAGE},
                    {
                        "type": "input_image",
                        "image_url": "https://example.com/a.png",
                        "detail": "low",
                    },
                    {"type": "input_file", "file_data": document, "filename": "a.pdf"},
                ],
            }
        ],
    )
    response = raw.parse()
    assert response.output_text == "A heart."
    (message,) = [i for i in _sent(fake)[0]["input"] if i.get("role") == "user"]
    assert message["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
        {"type": "input_file", "file_data": document, "filename": "a.pdf"},
    ]
    listed = client.responses.input_items.list(response.id).data
    conformance.validate_item(listed[0].model_dump(mode="json", exclude_none=True))
    session = httpx.get(server + f"/test/{raw.headers['Gambit-Session-Id']}.json", timeout=10)
    assert session.status_code == 200  # the Test tab shows the conversation
    texts = [b["text"] for b in session.json()["conversation"] if b["kind"] == "user"]
    assert texts == ["What is this?"]


def test_a_compute_deck_refuses_images(server):
    body = {
        "model": "deck/broken",
        "input": [{"role": "user", "content": [{"type": "input_image", "image_url": IMAGE}]}],
    }
    response = _post(server, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_content"


@pytest.mark.parametrize(
    ("part", "code", "param"),
    [
        ({"type": "input_image", "image_url": IMAGE}, "unsupported_content", ".type"),
        ({"type": "input_image", "image_url": "http://x/a.png"}, "invalid_value", ".image_url"),
        (
            {"type": "input_image", "image_url": "data:image/png;base64,%%%"},
            "invalid_value",
            ".image_url",
        ),
        (
            {"type": "input_image", "image_url": "data:text/html;base64,AAAA"},
            "invalid_value",
            ".image_url",
        ),
        ({"type": "input_image", "file_id": "file-1"}, "unsupported_value", ".file_id"),
        ({"type": "input_audio", "input_audio": {}}, "unsupported_content", ".type"),
    ],
)
def test_images_a_model_cannot_take_are_structured_400s(server, fake, part, code, param):
    body = {"model": "deck/echo", "input": [{"role": "user", "content": [part]}]}
    response = _post(server, body)
    assert response.status_code == 400, response.text
    error = response.json()
    conformance.validate_error_body(error)
    assert error["error"]["code"] == code
    assert error["error"]["param"] == "input[0].content[0]" + param


# ---------------------------------------------------------------- the smaller ones


def test_max_tool_calls_reaches_a_provider_model_and_a_deck_refuses_it(server, fake):
    fake.queue(Reply(text="ok"))
    answered = _response(server, {"model": PROXIED, "input": "x", "max_tool_calls": 2})
    assert answered["max_tool_calls"] == 2 and _sent(fake)[0]["max_tool_calls"] == 2
    refused = _post(server, {"model": "deck/upstream", "input": "x", "max_tool_calls": 2})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "max_tool_calls"


@pytest.mark.parametrize(
    ("extra", "param"),
    [({"background": True}, "background"), ({"conversation": "c-1"}, "conversation")],
)
def test_background_and_conversation_are_refused(server, fake, extra, param):
    response = _post(server, {"model": "deck/upstream", "input": "x", **extra})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_value", param)
    assert not _sent(fake)


def test_every_event_reports_the_temperature_the_deck_uses(server, fake):
    fake.queue(Reply(text="ok"))
    events = conformance.validate_stream(read_sse(server, {"model": "deck/upstream", "input": "x"}))
    reported = {e["response"]["temperature"] for e in events if "response" in e}
    assert reported == {0.3}
    assert _sent(fake)[0]["temperature"] == 0.3


@pytest.mark.parametrize("model", ["deck/upstream", PROXIED])
def test_instructions_apply_to_their_request_only(server, client, fake, model):
    fake.queue(Reply(text="Arr."), Reply(text="Hello."))
    first = client.responses.create(model=model, input="Hi", instructions="Talk like a pirate.")
    client.responses.create(model=model, input="Again", previous_response_id=first.id)
    one, two = _sent(fake)
    assert one["instructions"] == "Talk like a pirate."
    assert "pirate" not in json.dumps(two)


def test_a_failing_deck_names_workspace_paths_only(server, tmp_path_factory):
    events = conformance.validate_stream(read_sse(server, {"model": "deck/broken", "input": "x"}))
    message = events[-1]["response"]["error"]["message"]
    assert "broken/deck.py" in message and "KeyError" in message
    assert "/tmp" not in message and str(tmp_path_factory.getbasetemp()) not in message


# ---------------------------------------------------------------- legacy chat completions


def _chat(server: str, body: dict) -> httpx.Response:
    return _post(server, body, "/v1/chat/completions")


def test_chat_completions_answers_a_failing_deck_with_its_error(server):
    response = _chat(
        server, {"model": "deck/broken", "messages": [{"role": "user", "content": "x"}]}
    )
    assert response.status_code == 500
    error = response.json()["error"]
    assert "KeyError" in error["message"] and error["type"] == "server_error"


def test_chat_completions_maps_tools_and_tool_messages(server, fake):
    chat_tools = [
        {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
    ]
    fake.queue(Reply(function_calls=[FunctionCall("get_weather", {"city": "Oslo"}, "c-7")]))
    first = _chat(
        server,
        {
            "model": "deck/upstream",
            "messages": [{"role": "user", "content": "Weather?"}],
            "tools": chat_tools,
        },
    ).json()
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("c-7", "get_weather")
    assert _sent(fake)[0]["tools"][0]["name"] == "get_weather"
    fake.queue(Reply(text="Sunny."))
    second = _chat(
        server,
        {
            "model": "deck/upstream",
            "tools": chat_tools,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c-7", "content": "sunny"},
            ],
        },
    ).json()
    assert second["choices"][0]["message"]["content"] == "Sunny."
    sent = _sent(fake)[1]["input"]
    assert [i.get("type") for i in sent[-2:]] == ["function_call", "function_call_output"]
    assert sent[-1]["output"] == "sunny" and sent[-2]["call_id"] == "c-7"


def test_chat_completions_refuses_an_image_the_model_cannot_take(server):
    response = _chat(
        server,
        {
            "model": "deck/echo",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": IMAGE}}],
                }
            ],
        },
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_content", "messages[0].content[0].type")


def test_chat_completions_answers_a_failing_model_with_502(server, fake):
    fake.queue(Reply.http_error(500, "upstream exploded"))
    fake.queue(Reply.http_error(500, "upstream exploded"))  # the retry, if any
    fake.queue(Reply.http_error(500, "upstream exploded"))
    response = _chat(
        server, {"model": "deck/upstream", "messages": [{"role": "user", "content": "x"}]}
    )
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["type"] == "model_error" and "upstream exploded" in error["message"]


def test_a_streamed_chat_completion_that_fails_ends_with_its_error_then_done(server):
    body = {
        "model": "deck/broken",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
    }
    with httpx.stream(
        "POST", server + "/v1/chat/completions", json=body, headers=HEADERS, timeout=30
    ) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    error = json.loads(data[-2])["error"]
    assert "KeyError" in error["message"] and error["type"] == "server_error"
    chunks = [json.loads(d) for d in data[:-2]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert not any(c["choices"][0]["finish_reason"] for c in chunks)  # no finish posing as one


def test_chat_completions_pass_an_image_to_a_model_that_takes_it(server, fake):
    fake.queue(Reply(text="A heart."))
    response = _chat(
        server,
        {
            "model": "deck/upstream",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": IMAGE, "detail": "low"}},
                    ],
                }
            ],
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "A heart."
    (message,) = [i for i in _sent(fake)[0]["input"] if i.get("role") == "user"]
    assert message["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": IMAGE, "detail": "low"},
    ]


# ---------------------------------------------------------------- chat mode


def test_gambit_serve_honours_the_chat_fallback(tmp_path):
    chat_only = FakeModelServer().start()
    write(
        tmp_path,
        "decks/plain/PROMPT.md",
        # OpenRouter's adapter speaks Chat Completions in chat mode.
        '+++\nmodelParams.model = "openrouter/fake"\n+++\nHi.\n',
    )
    proc, url, log = serve(tmp_path, env_extra={**chat_only.env(), "GAMBIT_CHAT_FALLBACK": "1"})
    try:
        chat_only.queue(Reply(text="chatted"))
        answer = _response(url, {"model": "deck/plain", "input": "hello"})
        assert answer["output"][0]["content"][0]["text"] == "chatted"
        assert chat_only.requests_to("/chat/completions") and not chat_only.requests_to(
            "/responses"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        chat_only.stop()
