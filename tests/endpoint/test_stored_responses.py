"""Stored responses against a real `gambit serve`, with the official `openai` SDK and a raw
HTTP client: `GET /v1/responses/{id}`, `GET /v1/responses/{id}/input_items` and
`DELETE /v1/responses/{id}`; `store: false`; one key cannot see another key's responses.

Objects are validated against the specification's schemas (conformance.py) and the SDK's
own types; every error body is the specification's `{error: {type, code, param, message}}`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.responses import Response
from openai.types.responses.response_item_list import ResponseItemList

from tests.endpoint import conformance
from tests.endpoint.serving import KEY, serve, write

OTHER = "other-key-9876543210"  # a second key of GAMBIT_API_KEYS
SESSION_ID_HEADER = "gambit-session-id"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stored")
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
    # A key made with `gambit keys create` (stored, by digest) beside the two of the
    # environment: responses belong to the key that made them, whichever kind it is.
    gambit = str(Path(sys.executable).parent / "gambit")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["GAMBIT_SIM_DB"] = str(folder / "sim.sqlite3")
    created = subprocess.run(
        [gambit, "keys", "create", "stored", "--workspace", str(folder / "decks")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    proc, url, log = serve(folder, env_extra={"GAMBIT_API_KEYS": f"{KEY},{OTHER}"})
    yield url, created.stdout.strip()
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def server(served) -> str:
    return served[0]


def sdk(server: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key=key, max_retries=0)


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def create(server: str, key: str = KEY, **body) -> httpx.Response:
    response = httpx.post(
        server + "/v1/responses",
        json={"model": "deck/echo", "input": "hello", **body},
        headers=auth(key),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


def get(server: str, path: str, key: str = KEY, **params) -> httpx.Response:
    return httpx.get(server + path, params=params, headers=auth(key), timeout=30)


def assert_error(response: httpx.Response, status: int, code: str, param: str | None = None):
    assert response.status_code == status, response.text
    body = response.json()
    conformance.validate_error_body(body)
    assert body["error"]["code"] == code, body
    if param is not None:
        assert body["error"]["param"] == param, body
    return body["error"]


# ---------------------------------------------------------------- GET /v1/responses/{id}


def test_a_stored_response_is_retrieved_as_it_was_answered(server):
    answered = create(server, input="keep this", metadata={"k": "v"}).json()
    raw = get(server, f"/v1/responses/{answered['id']}")
    assert raw.status_code == 200
    stored = raw.json()
    conformance.validate_response(stored)  # the specification's ResponseResource
    assert stored == answered
    retrieved = sdk(server).responses.retrieve(answered["id"])
    assert isinstance(retrieved, Response)
    assert retrieved.output_text == "You said: keep this" and retrieved.metadata == {"k": "v"}
    assert retrieved.status == "completed" and retrieved.store is True


def test_a_streamed_response_is_stored_as_its_final_event_says(server):
    events = list(sdk(server).responses.create(model="deck/echo", input="streamed", stream=True))
    final = events[-1].response
    stored = get(server, f"/v1/responses/{final.id}").json()
    conformance.validate_response(stored)
    assert stored == final.model_dump(mode="json", exclude_unset=True)


def test_a_running_response_is_in_progress_and_cannot_be_deleted_yet(server):
    long = " ".join(f"w{i}" for i in range(60))  # the offline echo streams word by word
    with httpx.stream(
        "POST",
        server + "/v1/responses",
        json={"model": "deck/echo", "input": long, "stream": True},
        headers=auth(),
        timeout=30,
    ) as stream:
        response_id = None
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data: {"):
                event = json.loads(line[len("data: ") :])
                response_id = event["response"]["id"] if "response" in event else response_id
                if event["type"] == "response.output_text.delta":
                    break  # recorded by now (recording precedes the run)
        running = get(server, f"/v1/responses/{response_id}")
        assert running.status_code == 200 and running.json()["status"] == "in_progress"
        conformance.validate_response(running.json())
        early = httpx.delete(server + f"/v1/responses/{response_id}", headers=auth())
        assert_error(early, 409, "response_in_progress", "response_id")
        for _ in lines:
            pass
    done = get(server, f"/v1/responses/{response_id}").json()
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == f"You said: {long}"


@pytest.mark.parametrize(
    "response_id",
    [
        "resp-0123456789abcdef01234567",  # well formed, unknown
        "resp-0",  # malformed: never looked up
        "resp_0123456789abcdef01234567",  # another server's form
        "x" * 300,
        "resp-0123456789ABCDEF01234567",
    ],
)
def test_unknown_and_malformed_ids_are_structured_404s(server, response_id):
    for path in (f"/v1/responses/{response_id}", f"/v1/responses/{response_id}/input_items"):
        assert_error(get(server, path), 404, "response_not_found", "response_id")
    deleted = httpx.delete(server + f"/v1/responses/{response_id}", headers=auth())
    assert_error(deleted, 404, "response_not_found", "response_id")
    with pytest.raises(openai.NotFoundError):
        sdk(server).responses.retrieve(response_id)


def test_the_state_routes_need_a_key_and_answer_405_for_other_methods(server):
    response_id = create(server).json()["id"]
    for path in (f"/v1/responses/{response_id}", f"/v1/responses/{response_id}/input_items"):
        anonymous = httpx.get(server + path)
        assert_error(anonymous, 401, "invalid_api_key")
        wrong = httpx.get(server + path, headers=auth("not-a-key"))
        assert_error(wrong, 401, "invalid_api_key")
    for method, path, allow in (
        ("POST", f"/v1/responses/{response_id}", "GET, DELETE"),
        ("PUT", f"/v1/responses/{response_id}", "GET, DELETE"),
        ("POST", f"/v1/responses/{response_id}/input_items", "GET"),
        ("DELETE", f"/v1/responses/{response_id}/input_items", "GET"),
    ):
        answer = httpx.request(method, server + path, headers=auth(), json={})
        assert_error(answer, 405, "method_not_allowed")
        assert answer.headers["allow"] == allow
    streamed = get(server, f"/v1/responses/{response_id}", stream="true")
    assert_error(streamed, 400, "unsupported_value", "stream")
    assert get(server, f"/v1/responses/{response_id}").status_code == 200  # untouched


# ---------------------------------------------------------------- input items

CONVERSATION = [
    {"type": "message", "role": "developer", "content": "Be terse."},
    {"type": "message", "role": "user", "content": "one"},
    {"type": "message", "role": "assistant", "content": "You said: one"},
    {"role": "user", "content": [{"type": "input_text", "text": "two"}], "id": "msg-client"},
    {"type": "message", "role": "user", "content": "three"},
]


def test_input_items_list_the_request_input_newest_first(server):
    response_id = create(server, input=CONVERSATION).json()["id"]
    body = get(server, f"/v1/responses/{response_id}/input_items").json()
    items = conformance.validate_item_list(body)
    ResponseItemList.model_validate(body)  # and the SDK's list type
    assert body["has_more"] is False
    texts = [(i["role"], i["content"][0]["text"]) for i in items]
    assert texts == [
        ("user", "three"),
        ("user", "two"),
        ("assistant", "You said: one"),
        ("user", "one"),
        ("developer", "Be terse."),
    ]
    assert [i["content"][0]["type"] for i in items] == ["input_text"] * 2 + ["output_text"] + [
        "input_text"
    ] * 2
    assert items[1]["id"] == "msg-client"  # the client's id is kept
    assert len({i["id"] for i in items}) == 5 and all(i["status"] == "completed" for i in items)


def test_input_items_page_with_limit_order_and_cursors(server):
    response_id = create(server, input=CONVERSATION).json()["id"]
    path = f"/v1/responses/{response_id}/input_items"
    everything = get(server, path, order="asc").json()["data"]
    first = get(server, path, order="asc", limit=2).json()
    conformance.validate_item_list(first)
    assert first["data"] == everything[:2] and first["has_more"] is True
    second = get(server, path, order="asc", limit=2, after=first["last_id"]).json()
    assert second["data"] == everything[2:4] and second["has_more"] is True
    third = get(server, path, order="asc", limit=2, after=second["last_id"]).json()
    assert third["data"] == everything[4:] and third["has_more"] is False
    past_the_end = get(server, path, after=everything[0]["id"]).json()  # desc: nothing after
    conformance.validate_item_list(past_the_end)
    assert past_the_end["data"] == [] and past_the_end["first_id"] is None
    before = get(server, path, order="asc", limit=2, before=everything[4]["id"]).json()
    assert before["data"] == everything[2:4] and before["has_more"] is True
    # The SDK pages with `after` until `has_more` is false.
    paged = list(sdk(server).responses.input_items.list(response_id, order="asc", limit=2))
    assert [item.id for item in paged] == [item["id"] for item in everything]


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"after": "msg-nope"}, "after"),
        ({"before": "msg-nope"}, "before"),
        ({"after": "a" * 201}, "after"),
    ],
)
def test_bad_list_parameters_are_structured_400s(server, params, param):
    response_id = create(server).json()["id"]
    answer = get(server, f"/v1/responses/{response_id}/input_items", **params)
    assert_error(answer, 400, "invalid_value", param)


def test_function_call_outputs_are_listed_as_input_items(server):
    items = [
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp": 21}'},
    ]
    response_id = create(server, input=items).json()["id"]
    body = get(server, f"/v1/responses/{response_id}/input_items", order="asc").json()
    listed = conformance.validate_item_list(body)
    assert [i["type"] for i in listed] == ["message", "function_call", "function_call_output"]
    assert listed[1]["name"] == "get_weather" and listed[2]["output"] == '{"temp": 21}'
    ResponseItemList.model_validate(body)


# ---------------------------------------------------------------- DELETE


def test_a_deleted_response_is_gone_from_the_api_but_its_session_stays(server):
    created = create(server, input="forget me")
    response_id, session_id = created.json()["id"], created.headers[SESSION_ID_HEADER]
    deleted = httpx.delete(server + f"/v1/responses/{response_id}", headers=auth())
    assert deleted.status_code == 200
    conformance.validate_deletion(deleted.json(), response_id)
    for path in (f"/v1/responses/{response_id}", f"/v1/responses/{response_id}/input_items"):
        error = assert_error(get(server, path), 404, "response_not_found", "response_id")
        assert "deleted" in error["message"]
    again = httpx.delete(server + f"/v1/responses/{response_id}", headers=auth())
    assert_error(again, 404, "response_not_found")
    with pytest.raises(openai.NotFoundError) as info:
        sdk(server).responses.create(
            model="deck/echo", input="and then?", previous_response_id=response_id
        )
    assert info.value.body["code"] == "previous_response_not_found"
    assert "deleted" in info.value.body["message"]
    # The simulator's recording of the call is the operator's, deleted in the Test tab.
    twin = httpx.get(server + f"/test/{session_id}.json", timeout=10).json()
    assert [r["status"] for r in twin["runs"]] == ["completed"]
    assert twin["runs"][0]["result"] == {"id": response_id, "store": True, "deleted": True}


def test_the_sdk_deletes(server):
    client = sdk(server)
    response = client.responses.create(model="deck/echo", input="sdk delete")
    assert client.responses.delete(response.id) is None  # the SDK returns nothing on success
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


# ---------------------------------------------------------------- store: false


def test_a_response_made_with_store_false_is_not_kept(server):
    client = sdk(server)
    raw = client.responses.with_raw_response.create(
        model="deck/echo", input="ephemeral", store=False
    )
    response = raw.parse()
    assert response.store is False and response.output_text == "You said: ephemeral"
    conformance.validate_response(raw.http_response.json())
    for path in (f"/v1/responses/{response.id}", f"/v1/responses/{response.id}/input_items"):
        error = assert_error(get(server, path), 404, "response_not_found", "response_id")
        assert "store: false" in error["message"]
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="deck/echo", input="more", previous_response_id=response.id)
    assert info.value.body["code"] == "previous_response_not_found"
    assert "store: false" in info.value.body["message"]
    # Still recorded in the simulator (without the response object).
    twin = httpx.get(server + f"/test/{raw.headers[SESSION_ID_HEADER]}.json", timeout=10)
    (run,) = twin.json()["runs"]
    assert run["result"] == {"id": response.id, "store": False}
    texts = [b["text"] for b in twin.json()["conversation"] if b["kind"] in ("user", "assistant")]
    assert texts == ["ephemeral", "You said: ephemeral"]


# ---------------------------------------------------------------- keys are isolated


@pytest.mark.parametrize("owner", ["env", "stored"])
def test_a_key_cannot_read_continue_or_delete_another_keys_response(served, owner):
    server, stored_key = served
    mine, theirs = (KEY, OTHER) if owner == "env" else (stored_key, KEY)
    response_id = create(server, key=mine, input="private").json()["id"]
    unknown = get(server, "/v1/responses/resp-0123456789abcdef01234567", key=theirs).json()
    for path in (f"/v1/responses/{response_id}", f"/v1/responses/{response_id}/input_items"):
        answer = get(server, path, key=theirs)
        assert_error(answer, 404, "response_not_found", "response_id")
        # Indistinguishable from an id that does not exist (but for the id itself).
        assert answer.json()["error"]["message"].replace(response_id, "X") == unknown["error"][
            "message"
        ].replace("resp-0123456789abcdef01234567", "X")
    refused = httpx.delete(server + f"/v1/responses/{response_id}", headers=auth(theirs))
    assert_error(refused, 404, "response_not_found")
    with pytest.raises(openai.NotFoundError) as info:
        sdk(server, theirs).responses.create(
            model="deck/echo", input="let me in", previous_response_id=response_id
        )
    assert info.value.body["code"] == "previous_response_not_found"
    # The owner still has it all.
    assert get(server, f"/v1/responses/{response_id}", key=mine).status_code == 200
    follow = sdk(server, mine).responses.create(
        model="deck/echo", input="mine", previous_response_id=response_id
    )
    assert follow.output_text == "You said: mine"
