"""`openai-api/`: Responses API chaining, prompt cache, reasoning, usage and cost
(docs/providers.md, "OpenAI Responses API")."""

from __future__ import annotations

from typing import Any

import pytest

from gambit.core._openresponses import (
    CreateResponseRequest,
    UnknownItem,
    function_call_output_item,
    message_item,
)
from gambit.core._provider import ProviderError
from gambit.core._state import SavedState, new_state
from gambit.providers import ModelPricing, OpenAIResponsesProvider
from gambit.providers.openai_api import CHAIN_META_KEY
from tests.providers.helpers import FAST_RETRY, Events
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

MODEL = "openai-api/gpt-4.1"


@pytest.fixture
def provider(fake_server: FakeModelServer) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        base_url=fake_server.base_url, api_key="sk-test", retry=FAST_RETRY
    )


class Conversation:
    """Plays the runtime: keeps the full item list and the state between passes."""

    def __init__(self, provider: OpenAIResponsesProvider, state: SavedState | None = None):
        self.provider = provider
        self.items: list[Any] = [message_item("system", "You are terse.")]
        self.state = state or new_state()

    async def send(self, *new_items: Any, deck_path: str | None = None, **fields: Any):
        self.items.extend(new_items)
        req = CreateResponseRequest(
            model=fields.pop("model", MODEL), input=list(self.items), **fields
        )
        result = await self.provider.responses(req, state=self.state, deck_path=deck_path)
        self.items.extend(result.response.output)
        if result.updated_state is not None:
            self.state = result.updated_state
        return result


async def test_first_call_sends_full_input_and_auth(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    convo = Conversation(provider)
    await convo.send(message_item("user", "hi"))
    sent = fake_server.last_request
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["model"] == "gpt-4.1"
    assert "previous_response_id" not in sent.body
    assert [i["role"] for i in sent.body["input"]] == ["system", "user"]


async def test_chains_with_previous_response_id_and_sends_only_new_items(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.validate_previous_response_id = True
    fake_server.queue(
        Reply(
            function_calls=[FunctionCall("read_file", {"path": "config.yaml"}, call_id="call_a")]
        ),
        Reply(text="The config has a port."),
        Reply(text="Done."),
    )
    convo = Conversation(provider)
    first = await convo.send(message_item("user", "Read config.yaml"))
    record = convo.state.meta[CHAIN_META_KEY]["(root)"]
    assert record["lastResponseId"] == first.response.id
    assert record["model"] == "gpt-4.1"
    assert len(record["history"]) == 3  # system, user, function_call

    # Turn 2: only the tool result is new.
    await convo.send(function_call_output_item("call_a", "port: 80"))
    body = fake_server.last_request.body
    assert body["previous_response_id"] == first.response.id
    assert body["input"] == [
        {"type": "function_call_output", "call_id": "call_a", "output": "port: 80"}
    ]

    # Turn 3: only the new user message.
    second_id = convo.state.meta[CHAIN_META_KEY]["(root)"]["lastResponseId"]
    await convo.send(message_item("user", "Now 8080"))
    body = fake_server.last_request.body
    assert body["previous_response_id"] == second_id
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now 8080"}]}
    ]
    assert len(fake_server.requests) == 3


async def test_rejected_previous_response_id_is_retried_with_full_history(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    convo = Conversation(provider)
    await convo.send(message_item("user", "one"))
    fake_server.reject_previous_response_id = True
    events = Events()
    convo.items.append(message_item("user", "two"))
    req = CreateResponseRequest(model=MODEL, input=list(convo.items), stream=True)
    result = await provider.responses(req, state=convo.state, on_stream_event=events)
    rejected, retried = fake_server.requests[1:]
    assert rejected.body["previous_response_id"]
    assert "previous_response_id" not in retried.body
    assert [i.get("role") for i in retried.body["input"]] == ["system", "user", "assistant", "user"]
    assert events.types[-1] == "response.completed"
    new_record = result.updated_state.meta[CHAIN_META_KEY]["(root)"]
    assert new_record["lastResponseId"] == result.response.id


async def test_resumed_session_rebuilds_full_context_instead_of_an_old_id(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    convo = Conversation(provider)
    await convo.send(message_item("user", "one"))
    # A saved state from another process: same shape, an id this process never issued.
    saved = convo.state.to_dict()
    saved["meta"][CHAIN_META_KEY]["(root)"]["lastResponseId"] = "resp_from_yesterday"
    resumed = Conversation(provider, state=SavedState.model_validate(saved))
    resumed.items = list(convo.items)
    await resumed.send(message_item("user", "two"))
    body = fake_server.last_request.body
    assert "previous_response_id" not in body
    assert len(body["input"]) == 4


async def test_chains_are_kept_per_deck(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    convo = Conversation(provider)
    root = await convo.send(message_item("user", "root"), deck_path="/decks/root/PROMPT.md")
    child = Conversation(provider, state=convo.state)
    await child.send(message_item("user", "child"), deck_path="/decks/child/PROMPT.md")
    convo.state = child.state
    await convo.send(message_item("user", "root again"), deck_path="/decks/root/PROMPT.md")
    body = fake_server.last_request.body
    assert body["previous_response_id"] == root.response.id
    assert [i["content"][0]["text"] for i in body["input"]] == ["root again"]
    assert set(convo.state.meta[CHAIN_META_KEY]) == {
        "/decks/root/PROMPT.md",
        "/decks/child/PROMPT.md",
    }


@pytest.mark.parametrize(
    "change",
    [
        {"model": "openai-api/gpt-4.1-mini"},  # another model
        {"params": {"store": False}},  # nothing stored server-side
        {"rewrite_history": True},  # the runtime changed an earlier item
    ],
)
async def test_chain_breaks_when_it_cannot_be_trusted(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer, change: dict
) -> None:
    convo = Conversation(provider)
    await convo.send(message_item("user", "one"))
    if change.pop("rewrite_history", False):
        convo.items[1] = message_item("user", "ONE (edited)")
    await convo.send(message_item("user", "two"), **change)
    body = fake_server.last_request.body
    assert "previous_response_id" not in body
    assert len(body["input"]) == 4


async def test_explicit_previous_response_id_is_respected(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    req = CreateResponseRequest(
        model=MODEL, input=[message_item("user", "x")], previous_response_id="resp_mine"
    )
    await provider.responses(req, state=new_state())
    assert fake_server.last_request.body["previous_response_id"] == "resp_mine"


async def test_no_state_means_no_chaining(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    req = CreateResponseRequest(model=MODEL, input=[message_item("user", "x")])
    result = await provider.responses(req)
    assert result.updated_state is None


async def test_prompt_cache_key_and_retention_from_params_or_config(
    fake_server: FakeModelServer,
) -> None:
    p = OpenAIResponsesProvider(
        base_url=fake_server.base_url,
        api_key="k",
        prompt_cache_key="project-key",
        prompt_cache_retention="24h",
    )
    await p.responses(CreateResponseRequest(model=MODEL, input="hi"))
    body = fake_server.last_request.body
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("project-key", "24h")
    params = {"prompt_cache_key": "deck-key", "prompt_cache_retention": "in-memory"}
    await p.responses(CreateResponseRequest(model=MODEL, input="hi", params=params))
    body = fake_server.last_request.body
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("deck-key", "in-memory")
    await p.aclose()


async def test_reasoning_params_items_and_usage(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    fake_server.queue(
        Reply(
            reasoning="Let me think.",
            text="42",
            usage={
                "input_tokens": 2000,
                "output_tokens": 500,
                "cached_tokens": 1500,
                "reasoning_tokens": 300,
            },
        )
    )
    events = Events()
    req = CreateResponseRequest(
        model="openai-api/o4-mini",
        input="why?",
        stream=True,
        params={
            "reasoning": {"effort": "high", "summary": "detailed"},
            "max_tokens": 900,
            "verbosity": "low",
        },
    )
    result = await provider.responses(req, on_stream_event=events)
    body = fake_server.last_request.body
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert body["max_output_tokens"] == 900
    assert body["text"] == {"verbosity": "low"} and "verbosity" not in body
    assert "response.reasoning_summary_text.delta" in events.types
    reasoning = result.response.output[0]
    assert isinstance(reasoning, UnknownItem) and reasoning.type == "reasoning"
    usage = result.response.usage.to_dict()
    assert usage["cachedTokens"] == 1500 and usage["reasoningTokens"] == 300
    # o4-mini default price: 1.10 in, 0.275 cached, 4.40 out per 1M tokens.
    expected = (500 * 1.10 + 1500 * 0.275 + 500 * 4.40) / 1_000_000
    assert usage["costUsd"] == pytest.approx(expected)


async def test_pricing_override_and_dated_snapshot(fake_server: FakeModelServer) -> None:
    p = OpenAIResponsesProvider(
        base_url=fake_server.base_url,
        api_key="k",
        pricing={"openai-api/gpt-4o": ModelPricing(input=1.0, output=2.0)},
    )
    fake_server.queue(
        Reply(text="a", usage={"input_tokens": 1_000_000, "output_tokens": 1_000_000}),
        Reply(
            text="b",
            usage={"input_tokens": 1_000_000, "output_tokens": 0, "cached_tokens": 1_000_000},
        ),
        Reply(text="c"),
    )
    first = await p.responses(CreateResponseRequest(model="openai-api/gpt-4o", input="x"))
    assert first.response.usage.model_extra["costUsd"] == 3.0
    dated = await p.responses(
        CreateResponseRequest(model="openai-api/gpt-4.1-2025-04-14", input="x")
    )
    assert dated.response.usage.model_extra["costUsd"] == 0.5  # cached input of gpt-4.1
    unknown = await p.responses(CreateResponseRequest(model="openai-api/my-finetune", input="x"))
    assert "costUsd" not in (unknown.response.usage.model_extra or {})
    await p.aclose()


async def test_gambit_ids_and_extension_items_are_not_sent_to_openai(
    provider: OpenAIResponsesProvider, fake_server: FakeModelServer
) -> None:
    req = CreateResponseRequest(
        model=MODEL,
        input=[
            message_item("user", "hi", id="msg-0123456789abcdef01234567"),
            message_item("assistant", "hello", id="msg_abc123"),
            UnknownItem(type="acme:note", id="n1"),
            UnknownItem(type="reasoning", id="rs_1", summary=[]),
        ],
    )
    await provider.responses(req)
    sent = fake_server.last_request.body["input"]
    assert "id" not in sent[0]
    assert sent[1]["id"] == "msg_abc123"
    assert [i["type"] for i in sent] == ["message", "message", "reasoning"]


async def test_missing_key_fails_fast_and_other_errors_propagate(
    fake_server: FakeModelServer,
) -> None:
    p = OpenAIResponsesProvider.from_env({"OPENAI_BASE_URL": fake_server.base_url})
    with pytest.raises(ProviderError, match="openai-api: OPENAI_API_KEY is not set"):
        await p.responses(CreateResponseRequest(model=MODEL, input="x"))
    assert fake_server.requests == []
    ok = OpenAIResponsesProvider.from_env(
        {"OPENAI_BASE_URL": fake_server.base_url, "OPENAI_API_KEY": "k"},
        settings={"prompt_cache_key": "cfg", "max_retries": 0},
    )
    fake_server.queue(
        Reply.http_error(401, "bad key", type="invalid_request_error", code="invalid_api_key")
    )
    with pytest.raises(ProviderError) as info:
        await ok.responses(CreateResponseRequest(model=MODEL, input="x"), state=new_state())
    assert info.value.status == 401 and info.value.code == "invalid_api_key"
    assert fake_server.last_request.body["prompt_cache_key"] == "cfg"
    await ok.aclose()
