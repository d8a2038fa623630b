"""Session routing against a real `gambit serve`, driven by the official `openai` SDK: calls
with the same `Gambit-Session` header (or the same `user`), key and model land in one
simulator session, as turns of one conversation; the session JSON twin (`/test/<id>.json`)
shows them. Every call answers its session's id in the `Gambit-Session-Id` header.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.endpoint import conformance
from tests.endpoint.serving import KEY, serve, write
from tests.support.fake_model_server import FakeModelServer, Reply

OTHER = "other-key-9876543210"
SESSION_ID = "gambit-session-id"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def upstream():
    fake = FakeModelServer().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, upstream):
    folder = tmp_path_factory.mktemp("routing")
    write(
        folder,
        "decks/echo/PROMPT.md",
        '+++\nlabel = "Echo"\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n',
    )
    write(
        folder,
        "decks/assistant/PROMPT.md",
        '+++\nlabel = "Assistant"\nmodelParams.model = "offline/demo"\n+++\nUse tools.\n',
    )
    write(
        folder,
        "decks/upstream/PROMPT.md",
        '+++\nmodelParams.model = "openresponses/fake"\n+++\nYou answer briefly.\n',
    )
    env = {**upstream.env(), "GAMBIT_API_KEYS": f"{KEY},{OTHER}"}
    proc, url, log = serve(folder, env_extra=env)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def fake(upstream):
    upstream.reset()
    return upstream


def sdk(server: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key=key, max_retries=0)


def call(client: openai.OpenAI, session: str | None = None, **kwargs):
    """(response, the session id the server answered)."""
    headers = {"Gambit-Session": session} if session is not None else None
    kwargs.setdefault("model", "deck/echo")
    raw = client.responses.with_raw_response.create(extra_headers=headers, **kwargs)
    return raw.parse(), raw.headers[SESSION_ID]


def twin(server: str, session_id: str) -> dict:
    response = httpx.get(server + f"/test/{session_id}.json", timeout=10)
    assert response.status_code == 200
    return response.json()


def said(detail: dict) -> list[str]:
    return [b["text"] for b in detail["conversation"] if b["kind"] in ("user", "assistant")]


def test_calls_with_one_session_header_are_turns_of_one_session(server):
    client = sdk(server)
    ids = set()
    for text in ("first", "second", "third"):
        response, session_id = call(client, "alice-1", input=text)
        assert response.output_text == f"You said: {text}"
        ids.add(session_id)
    (session_id,) = ids
    detail = twin(server, session_id)
    assert detail["origin"] == "api" and len(detail["runs"]) == 3
    assert said(detail) == [
        "first",
        "You said: first",
        "second",
        "You said: second",
        "third",
        "You said: third",
    ]
    # Another name, and no name at all, are other sessions.
    _, bob = call(client, "bob-1", input="hi")
    _, loose_a = call(client, input="hi")
    _, loose_b = call(client, input="hi")
    assert len({session_id, bob, loose_a, loose_b}) == 4
    assert said(twin(server, bob)) == ["hi", "You said: hi"]


def test_the_user_field_routes_like_the_header(server):
    client = sdk(server)
    first, session_id = call(client, input="one", user="carol-2")
    assert first.user == "carol-2"  # echoed by the response
    conformance.validate_response(
        httpx.get(
            server + f"/v1/responses/{first.id}", headers={"Authorization": f"Bearer {KEY}"}
        ).json()
    )
    _, again = call(client, input="two", user="carol-2")
    # The header and `user` name conversations in one namespace; the header wins.
    _, by_header = call(client, "carol-2", input="three", user="someone-else")
    assert session_id == again == by_header
    assert said(twin(server, session_id))[::2] == ["one", "two", "three"]


def test_sessions_are_per_key_and_per_model(server):
    mine = sdk(server)
    theirs = sdk(server, OTHER)
    _, a = call(mine, "dana-3", input="x")
    _, b = call(theirs, "dana-3", input="x")
    _, c = call(mine, "dana-3", model="deck/assistant", input="x")
    assert len({a, b, c}) == 3
    assert len(twin(server, a)["runs"]) == 1 and len(twin(server, b)["runs"]) == 1


def test_a_session_id_in_the_header_continues_that_session(server):
    client = sdk(server)
    _, session_id = call(client, input="started plainly")
    response, same = call(client, session_id, input="continued by id")
    assert same == session_id and response.output_text == "You said: continued by id"
    assert said(twin(server, session_id))[::2] == ["started plainly", "continued by id"]
    # Not another key's, not one that does not exist, and only with its own model.
    with pytest.raises(openai.NotFoundError) as info:
        call(sdk(server, OTHER), session_id, input="let me in")
    assert (info.value.body["code"], info.value.body["param"]) == (
        "session_not_found",
        "Gambit-Session",
    )
    with pytest.raises(openai.NotFoundError):
        call(client, "session-0123456789abcdef01234567", input="x")
    with pytest.raises(openai.BadRequestError) as info:
        call(client, session_id, model="deck/assistant", input="x")
    assert info.value.body["param"] == "model"
    assert len(twin(server, session_id)["runs"]) == 2


def test_a_client_tool_round_trip_over_a_routed_session(server):
    """The client's `function_call_output` resumes the run through the header alone."""
    client = sdk(server)
    first, session_id = call(
        client, "tools-4", model="deck/assistant", input="Weather in Paris?", tools=[WEATHER]
    )
    (function_call,) = [o for o in first.output if o.type == "function_call"]
    second, same = call(
        client,
        "tools-4",
        model="deck/assistant",
        tools=[WEATHER],
        input=[
            {
                "type": "function_call_output",
                "call_id": function_call.call_id,
                "output": json.dumps({"temp": 21}),
            }
        ],
    )
    assert same == session_id
    assert second.status == "completed" and "temp: 21" in second.output_text


def test_a_routed_proxied_model_gets_the_conversation_so_far(server, fake):
    fake.queue(Reply(text="Hello Eve."), Reply(text="You are Eve."))
    client = sdk(server)
    _, session_id = call(client, "eve-5", model="openresponses/fake", input="I am Eve.")
    _, same = call(client, "eve-5", model="openresponses/fake", input="Who am I?")
    assert same == session_id
    first, second = [r.body for r in fake.requests_to("/responses")]
    assert [_text(i) for i in first["input"]] == ["I am Eve."]
    assert [_text(i) for i in second["input"]] == ["I am Eve.", "Hello Eve.", "Who am I?"]


def test_previous_response_id_gives_a_proxied_model_the_conversation_too(server, fake):
    fake.queue(Reply(text="Noted: 42."), Reply(text="It was 42."))
    client = sdk(server)
    first = client.responses.create(model="openresponses/fake", input="Remember 42.")
    client.responses.create(
        model="openresponses/fake", input="What was it?", previous_response_id=first.id
    )
    second = fake.requests_to("/responses")[1].body
    assert [_text(i) for i in second["input"]] == ["Remember 42.", "Noted: 42.", "What was it?"]


def _text(item: dict) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def test_one_call_at_a_time_per_routed_session(server):
    long = " ".join(f"w{i}" for i in range(80))
    headers = {"Authorization": f"Bearer {KEY}", "Gambit-Session": "busy-6"}
    body = {"model": "deck/echo", "input": long, "stream": True}
    with httpx.stream(
        "POST", server + "/v1/responses", json=body, headers=headers, timeout=30
    ) as stream:
        session_id = stream.headers[SESSION_ID]
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data: {") and "output_text.delta" in line:
                break  # the run is going
        busy = httpx.post(
            server + "/v1/responses",
            json={"model": "deck/echo", "input": "me too"},
            headers=headers,
            timeout=30,
        )
        assert busy.status_code == 409
        conformance.validate_error_body(busy.json())
        assert busy.json()["error"]["code"] == "conversation_busy"
        assert busy.json()["error"]["param"] == "Gambit-Session"
        for _ in lines:
            pass
    assert len(twin(server, session_id)["runs"]) == 1


def test_routing_and_previous_response_id_must_agree(server):
    client = sdk(server)
    first, session_id = call(client, "frank-7", input="one")
    second, same = call(client, "frank-7", input="two", previous_response_id=first.id)
    assert same == session_id and second.output_text == "You said: two"
    elsewhere = client.responses.create(model="deck/echo", input="unrouted")
    with pytest.raises(openai.BadRequestError) as info:
        call(client, "frank-7", input="three", previous_response_id=elsewhere.id)
    assert info.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(
    ("headers", "body", "param"),
    [
        ({"Gambit-Session": "x" * 257}, {}, "Gambit-Session"),
        ({"Gambit-Session": ""}, {}, "Gambit-Session"),
        ({}, {"user": ""}, "user"),
        ({}, {"user": "tab\there"}, "user"),
        ({}, {"user": "u" * 257}, "user"),
        ({}, {"safety_identifier": "s" * 65}, "safety_identifier"),
    ],
)
def test_bad_routing_values_are_structured_400s(server, headers, body, param):
    answer = httpx.post(
        server + "/v1/responses",
        json={"model": "deck/echo", "input": "x", **body},
        headers={"Authorization": f"Bearer {KEY}", **headers},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    conformance.validate_error_body(answer.json())
    assert answer.json()["error"]["param"] == param


def test_safety_identifier_and_prompt_cache_key_are_echoed_not_routed(server):
    client = sdk(server)
    a, first = call(client, input="x", safety_identifier="end-user-1", prompt_cache_key="pck")
    _, second = call(client, input="y", safety_identifier="end-user-1", prompt_cache_key="pck")
    assert first != second
    assert (a.safety_identifier, a.prompt_cache_key) == ("end-user-1", "pck")
