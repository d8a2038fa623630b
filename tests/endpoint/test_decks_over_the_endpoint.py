"""Decks served over `/v1/responses` against a real `gambit serve` whose model calls go to the
fake model server (tests/support/fake_model_server.py) on 127.0.0.1:

- the extension items a run produces (a deck's `ctx.emit_output_item`, an upstream model's
  namespaced items) are namespaced output items, streamed with output_item.added / done;
- the request's `temperature`, `top_p`, `max_output_tokens` and `tool_choice` reach the model
  calls a deck makes, over the deck's own `[modelParams]` (read back from the request the
  fake server recorded), and are echoed by the response;
- a `tool_choice` the endpoint does not support is a structured 400;
- a forced function reaches an upstream that only speaks Chat Completions in that API's
  nested shape;
- a run that fails streams the specification's `error` event, then `response.failed`;
- every call is recorded, also when the client leaves at the first byte.

Every object and event is validated against the specification's schemas (conformance.py).
"""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.endpoint import conformance
from tests.endpoint.serving import KEY, read_sse, serve, write
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

HEADERS = {"Authorization": f"Bearer {KEY}"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CARD_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
}


@pytest.fixture(scope="module")
def upstream():
    fake = FakeModelServer().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("decks")


@pytest.fixture(scope="module")
def server(folder, upstream):
    # A compute deck that emits two items: one with a bare type, one already namespaced.
    write(
        folder,
        "decks/emitter/deck.py",
        """
        import gambit


        def run(ctx):
            ctx.emit_output_item({"type": "progress", "data": {"step": 1}})
            ctx.emit_output_item({"type": "acme:note", "id": "note-1", "text": "kept as is"})
            return "emitted"


        deck = gambit.define_deck(run=run, label="Emitter")
        """,
    )
    # An LLM deck on the fake upstream, with its own [modelParams] and a declared extension
    # type; its action `card` is a compute deck that emits a declared item.
    write(
        folder,
        "decks/upstream/PROMPT.md",
        """
        +++
        label = "Upstream"

        [modelParams]
        model = "openresponses/fake"
        temperature = 0.3
        top_p = 0.5
        max_tokens = 64

        [[responseItemExtensions]]
        type = "acme:card"
        dataSchema = "./card.json"

        [[actions]]
        name = "card"
        description = "Show a card"
        execute = "./card.py"
        +++
        You answer briefly.
        """,
    )
    (folder / "decks/upstream/card.json").write_text(json.dumps(CARD_SCHEMA))
    write(
        folder,
        "decks/upstream/card.py",
        """
        import gambit


        def run(ctx):
            ctx.emit_output_item({"type": "acme:card", "data": {"title": "From the action"}})
            return "shown"


        deck = gambit.define_deck(run=run, context_schema={}, response_schema={})
        """,
    )
    write(
        folder,
        "decks/failing/deck.py",
        """
        import gambit


        def run(ctx):
            ctx.fail("the deck gave up", code="gave_up")


        deck = gambit.define_deck(run=run)
        """,
    )
    write(folder, "decks/broken/PROMPT.md", "+++\nlabel = = nope\n+++\nHi.\n")
    # Deck files that are not in the listing (GET /v1/models): an action deck inside a listed
    # deck's folder, compute decks in folders the listing skips (importing one leaves a
    # mark), a plain Markdown file.
    write(
        folder,
        "decks/upstream/child/PROMPT.md",
        '+++\nlabel = "Child"\n[modelParams]\nmodel = "openresponses/fake"\n+++\nAn action.\n',
    )
    for hidden in ("decks/.hidden/x", "decks/node_modules/pkg"):
        write(
            folder,
            f"{hidden}/deck.py",
            """
            from pathlib import Path

            import gambit

            Path(__file__).with_name("imported").write_text("yes")
            deck = gambit.define_deck(run=lambda ctx: "ran")
            """,
        )
    write(folder, "decks/notes.md", "Plain notes, no deck.\n")
    # A deck that names no model (a new user's first deck).
    write(folder, "decks/plain/PROMPT.md", '+++\nlabel = "Plain"\n+++\nYou help.\n')
    proc, url, log = serve(folder, env_extra=upstream.env())
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


def _post(server: str, body: dict) -> httpx.Response:
    return httpx.post(server + "/v1/responses", json=body, headers=HEADERS, timeout=30)


def _model_requests(fake: FakeModelServer) -> list[dict]:
    return [r.body for r in fake.requests_to("/responses")]


def test_a_calls_session_names_the_model_that_answered_not_the_deck_asked_for(server, fake):
    # Before, the Test tab listed these sessions under the model "deck/upstream", and a
    # deck answered by the offline demo model was not marked offline.
    before = set(_api_sessions(server))
    fake.queue(Reply(text="Briefly: yes."))
    assert _post(server, {"model": "deck/upstream", "input": "Is it on?"}).status_code == 200
    new = _new_completed_sessions(server, before)
    assert [(s["model"], s["offline"]) for s in new] == [("openresponses/fake", False)]
    detail = httpx.get(server + f"/test/{new[0]['id']}.json", timeout=10).json()
    assert detail["runs"][-1]["model"] == "openresponses/fake"


def test_a_deck_that_names_no_model_is_answered_by_the_demo_model(server, fake):
    # As in the CLI and the Test tab (docs/decisions.md): before, the run failed with
    # "No model configured".
    before = set(_api_sessions(server))
    answer = _post(server, {"model": "deck/plain", "input": "Hello?"})
    assert answer.status_code == 200, answer.text
    assert "offline demo model" in json.dumps(answer.json()["output"])
    new = _new_completed_sessions(server, before)
    assert [(s["model"], s["offline"]) for s in new] == [("offline/demo", True)]
    assert _model_requests(fake) == []


def test_a_deck_that_does_not_load_is_named_as_such_not_as_missing(server):
    # Before: 404 "model 'deck/broken' is not a deck of this workspace", while the Build tab
    # listed it with its TOML error.
    answer = _post(server, {"model": "deck/broken", "input": "x"})
    error = answer.json()["error"]
    assert answer.status_code == 500 and error["code"] == "deck_error"
    assert error["message"].startswith("the deck broken/PROMPT.md does not load: ")
    assert "invalid TOML front matter" in error["message"]
    missing = _post(server, {"model": "deck/nowhere", "input": "x"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    "model", ["deck/upstream/child", "deck/.hidden/x", "deck/node_modules/pkg", "deck/notes"]
)
def test_only_decks_of_the_listing_run(server, folder, fake, model):
    # Before: any deck file of the workspace ran as a root (an action escaping its parent's
    # narrowing; Python the listing never imports; a plain .md) (docs/endpoint.md, "Models").
    listed = httpx.get(server + "/v1/models", headers=HEADERS, timeout=10).json()["data"]
    assert model not in {m["id"] for m in listed}
    fake.queue(Reply(text="should not be asked"))
    answer = _post(server, {"model": model, "input": "x"})
    missing = _post(server, {"model": "deck/nowhere", "input": "x"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "model_not_found")
    assert answer.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "deck/nowhere", model
    )
    assert _model_requests(fake) == []
    assert not list(folder.rglob("imported"))


# ---------------------------------------------------------------- extension items


def test_a_compute_deck_emits_namespaced_output_items(server):
    raw = _post(server, {"model": "deck/emitter", "input": "go"}).json()
    conformance.validate_response(raw)
    kinds = [item["type"] for item in raw["output"]]
    assert kinds == ["gambit:progress", "acme:note", "message"]
    progress, note, message = raw["output"]
    assert progress["data"] == {"step": 1} and progress["status"] == "completed"
    assert note == {
        "type": "acme:note",
        "id": "note-1",
        "text": "kept as is",
        "status": "completed",
    }
    assert message["content"][0]["text"] == "emitted"


def test_emitted_items_stream_with_added_and_done(server):
    events = conformance.validate_stream(read_sse(server, {"model": "deck/emitter", "input": "go"}))
    items = [(e["type"], e["item"]["type"]) for e in events if "item" in e]
    assert items == [
        ("response.output_item.added", "gambit:progress"),
        ("response.output_item.done", "gambit:progress"),
        ("response.output_item.added", "acme:note"),
        ("response.output_item.done", "acme:note"),
        ("response.output_item.added", "message"),
        ("response.output_item.done", "message"),
    ]
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["status"] == "in_progress" and added["output_index"] == 0


def test_an_upstream_namespaced_item_and_an_action_emitted_one_reach_the_client(server, fake):
    card = {"type": "acme:card", "id": "card-9", "status": "completed", "data": {"title": "Up"}}
    fake.queue(
        Reply(function_calls=[FunctionCall("card", {}, call_id="call-card")]),
        Reply(deltas=["Here ", "you go."], items=[card]),
    )
    events = conformance.validate_stream(
        read_sse(server, {"model": "deck/upstream", "input": "a card"})
    )
    output = events[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["acme:card", "message", "acme:card"]
    emitted, message, from_model = output
    assert emitted["data"] == {"title": "From the action"}  # via ctx.emit_output_item
    assert from_model == card  # the upstream's own item, unchanged
    assert message["content"][0]["text"] == "Here you go."


def test_a_proxied_model_passes_its_namespaced_items_on(server, fake):
    item = {"type": "acme:search", "id": "s-1", "status": "completed", "query": "q"}
    fake.queue(Reply(text="found", items=[item]))
    raw = _post(server, {"model": "openresponses/fake", "input": "search"}).json()
    conformance.validate_response(raw)
    assert [i["type"] for i in raw["output"]] == ["message", "acme:search"]
    assert raw["output"][1] == item


# ---------------------------------------------------------------- request parameters


def test_request_parameters_reach_the_decks_model_calls(server, client, fake):
    fake.queue(Reply(function_calls=[FunctionCall("get_weather", {"city": "Oslo"})]))
    response = client.responses.create(
        model="deck/upstream",
        input="Weather in Oslo?",
        tools=[WEATHER],
        tool_choice="required",
        temperature=0.9,
        max_output_tokens=100,
    )
    (sent,) = _model_requests(fake)
    assert sent["temperature"] == 0.9  # the request's, over the deck's 0.3
    assert sent["top_p"] == 0.5  # the deck's own, the request set none
    assert sent["max_output_tokens"] == 100  # the request's, over the deck's max_tokens 64
    assert sent["tool_choice"] == "required"
    assert {t["name"] for t in sent["tools"]} >= {"get_weather", "card"}
    # The response reports what was used.
    assert (response.temperature, response.top_p) == (0.9, 0.5)
    assert response.max_output_tokens == 100 and response.tool_choice == "required"
    assert [o.type for o in response.output] == ["function_call"]


def test_a_forced_function_reaches_every_pass_of_the_deck(server, client, fake):
    fake.queue(Reply(function_calls=[FunctionCall("card", {})]), Reply(text="done"))
    client.responses.create(
        model="deck/upstream",
        input="go",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        top_p=0.25,
    )
    sent = _model_requests(fake)
    assert len(sent) == 2  # the action's pass, then the answer
    for body in sent:
        assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
        assert body["top_p"] == 0.25 and body["temperature"] == 0.3


def test_without_request_parameters_the_deck_keeps_its_own(server, fake):
    fake.queue(Reply(text="plain"))
    raw = _post(server, {"model": "deck/upstream", "input": "hi"}).json()
    conformance.validate_response(raw)
    (sent,) = _model_requests(fake)
    assert (sent["temperature"], sent["top_p"], sent["max_output_tokens"]) == (0.3, 0.5, 64)
    assert "tool_choice" not in sent
    assert (raw["temperature"], raw["top_p"], raw["max_output_tokens"]) == (0.3, 0.5, 64)


def test_request_parameters_reach_a_proxied_model(server, client, fake):
    fake.queue(Reply(text="ok"))
    client.responses.create(
        model="openresponses/fake",
        input="hi",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        temperature=0.1,
        top_p=0.2,
        max_output_tokens=32,
    )
    (sent,) = _model_requests(fake)
    assert (sent["temperature"], sent["top_p"], sent["max_output_tokens"]) == (0.1, 0.2, 32)
    assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}


@pytest.mark.parametrize(
    ("extra", "code", "param"),
    [
        ({"tool_choice": "sometimes"}, "invalid_value", "tool_choice"),
        ({"tool_choice": {"type": "function"}}, "invalid_value", "tool_choice"),
        (
            {"tool_choice": {"type": "function", "name": "nope"}, "tools": [WEATHER]},
            "invalid_value",
            "tool_choice.name",
        ),
        (
            {
                "tool_choice": {
                    "type": "allowed_tools",
                    "tools": [{"type": "function", "name": "get_weather"}],
                    "mode": "auto",
                },
                "tools": [WEATHER],
            },
            "unsupported_value",
            "tool_choice.type",
        ),
        ({"tool_choice": {"type": "web_search"}}, "invalid_value", "tool_choice"),
        ({"temperature": 3}, "invalid_value", "temperature"),
        ({"top_p": -0.1}, "invalid_value", "top_p"),
        ({"max_output_tokens": 8}, "invalid_value", "max_output_tokens"),
    ],
)
def test_unsupported_parameters_are_structured_400s(server, fake, extra, code, param):
    response = _post(server, {"model": "deck/upstream", "input": "x", **extra})
    assert response.status_code == 400
    body = response.json()
    conformance.validate_error_body(body)
    assert (body["error"]["code"], body["error"]["param"]) == (code, param)
    assert body["error"]["type"] == "invalid_request_error"
    assert not _model_requests(fake)  # refused before any model call


# ---------------------------------------------------------------- failures and recording


def test_a_failing_deck_streams_an_error_event_then_response_failed(server):
    events = conformance.validate_stream(read_sse(server, {"model": "deck/failing", "input": "x"}))
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    error = events[-2]["error"]
    assert error["type"] == "server_error" and "gave up" in error["message"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and "gave up" in failed["error"]["message"]
    # Stored as answered, the error with it.
    stored = httpx.get(server + f"/v1/responses/{failed['id']}", headers=HEADERS).json()
    conformance.validate_response(stored)
    assert stored == failed


def test_a_failed_upstream_answers_a_failed_response(server, client, fake):
    fake.queue(Reply(deltas=["Par", "tial"], terminal="failed"))
    frames = read_sse(server, {"model": "deck/upstream", "input": "x"})
    events = conformance.validate_stream(frames)
    assert events[-1]["type"] == "response.failed"
    message = next(i for i in events[-1]["response"]["output"] if i["type"] == "message")
    assert message["status"] == "completed"  # never `incomplete` in a failed response
    error = next(e for e in events if e["type"] == "error")["error"]
    assert error["type"] == "model_error"
    with pytest.raises(openai.APIError):  # the SDK raises on the error event
        fake.queue(Reply(text="nope", terminal="failed"))
        list(client.responses.create(model="deck/upstream", input="y", stream=True))


def test_every_call_is_recorded_even_when_the_client_leaves_at_the_first_byte(server, fake):
    fake.default_reply = Reply(deltas=["slow "] * 20, delay=0.05)
    before = _api_sessions(server)
    count = 5
    with httpx.Client(timeout=30) as http:
        for n in range(count):
            body = {"model": "openresponses/fake", "input": f"leave {n}", "stream": True}
            with http.stream("POST", server + "/v1/responses", json=body, headers=HEADERS) as r:
                next(r.iter_bytes())  # the first byte, then hang up
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        new = [s for s in _api_sessions(server).values() if s["id"] not in before]
        if len(new) == count and all(s["status"] not in ("running", "queued") for s in new):
            break
        time.sleep(0.2)
    new = [s for s in _api_sessions(server).values() if s["id"] not in before]
    assert len(new) == count, new
    assert {s["status"] for s in new} <= {"canceled", "completed"}, new


def _api_sessions(server: str) -> dict[str, dict]:
    sessions = httpx.get(server + "/test.json", timeout=10).json()["sessions"]
    return {s["id"]: s for s in sessions if s["origin"] == "api"}


def _new_completed_sessions(server: str, before: set[str]) -> list[dict]:
    """The /v1 sessions not in `before`, once the first has completed (or after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        new = [s for s in _api_sessions(server).values() if s["id"] not in before]
        if (new and new[0]["status"] == "completed") or time.monotonic() >= deadline:
            return new
        time.sleep(0.1)


# ---------------------------------------------------------------- the chat fallback


def test_a_forced_function_reaches_a_chat_completions_upstream_in_its_shape(tmp_path):
    """An upstream without `/responses`: the deck's calls fall back to Chat Completions, and
    the request's `{"type": "function", "name": N}` arrives as Chat Completions' nested
    `{"type": "function", "function": {"name": N}}` (string forms unchanged)."""
    chat_only = FakeModelServer().start()
    chat_only.responses_enabled = False
    write(
        tmp_path,
        "decks/plain/PROMPT.md",
        '+++\nmodelParams.model = "openresponses/fake"\n+++\nAnswer briefly.\n',
    )
    proc, url, log = serve(tmp_path, env_extra=chat_only.env())
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        chat_only.queue(
            Reply(function_calls=[FunctionCall("get_weather", {"city": "Oslo"})]),
            Reply(text="sure"),
        )
        forced = client.responses.create(
            model="deck/plain",
            input="Weather in Oslo?",
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"},
        )
        assert [o.type for o in forced.output] == ["function_call"]
        client.responses.create(model="deck/plain", input="hi", tool_choice="none")
        chats = [r.body for r in chat_only.requests_to("/chat/completions")]
        assert [c["tool_choice"] for c in chats] == [
            {"type": "function", "function": {"name": "get_weather"}},
            "none",
        ]
        assert chats[0]["tools"][0]["function"]["name"] == "get_weather"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        chat_only.stop()


# ---------------------------------------------------------------- connections


def test_calls_reuse_the_servers_connections_to_the_upstream(server, fake):
    # Each call built its own provider router before, so each opened a new connection to
    # the upstream (for an https one, a CA bundle load and a TLS handshake on every call).
    # The server's run loop now shares its routers, and their connections, with its calls.
    fake.queue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    for body in (
        {"model": "openresponses/fake", "input": "a"},
        {"model": "deck/upstream", "input": "b"},
        {"model": "openresponses/fake", "input": "c"},
    ):
        assert _post(server, body).json()["status"] == "completed"
    peers = {r.peer for r in fake.requests_to("/responses")}
    assert len(fake.requests_to("/responses")) == 3 and len(peers) == 1, peers
