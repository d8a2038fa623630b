"""`ollama/`: OpenAI-compatible API, native tags and pull, Chat Completions fallback."""

from __future__ import annotations

import pytest

from gambit.core._openresponses import CreateResponseRequest, UnknownItem
from gambit.core._provider import ProviderError
from gambit.providers import OllamaProvider
from gambit.providers.ollama import native_base_url
from gambit.providers.openresponses import chat_only_base_urls
from tests.providers.helpers import FAST_RETRY, Events, request
from tests.support.fake_model_server import FakeModelServer, Reply


@pytest.mark.parametrize(
    ("base", "native"),
    [
        ("http://localhost:11434/v1", "http://localhost:11434/"),
        ("http://localhost:11434/v1/", "http://localhost:11434/"),
        ("http://host/ollama/v1", "http://host/ollama/"),
        ("http://host/ollama", "http://host/ollama/"),
    ],
)
def test_native_base_url(base: str, native: str) -> None:
    assert native_base_url(base) == native


def test_defaults_and_from_env(fake_server: FakeModelServer) -> None:
    default = OllamaProvider.from_env({})
    assert default.base_url == "http://localhost:11434/v1"
    assert default.http.headers["Authorization"] == "Bearer ollama"
    assert default.missing_config is None
    configured = OllamaProvider.from_env(
        {"OLLAMA_BASE_URL": fake_server.base_url, "OLLAMA_API_KEY": "sek"}
    )
    assert configured.base_url == fake_server.base_url
    assert configured.http.headers["Authorization"] == "Bearer sek"


async def test_responses_with_prefix_stripped_and_extension_items_kept(
    fake_server: FakeModelServer,
) -> None:
    fake_server.queue(
        Reply(deltas=["hi"], items=[{"type": "ollama:stats", "data": {"eval_ms": 3}}])
    )
    events = Events()
    async with OllamaProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        result = await p.responses(
            request(model="ollama/llama3", stream=True), on_stream_event=events
        )
    assert fake_server.last_request.body["model"] == "llama3"
    assert fake_server.last_request.path == "/v1/responses"
    assert events.deltas() == ["hi"]
    ext = result.response.output[-1]
    assert isinstance(ext, UnknownItem) and ext.to_dict() == {
        "type": "ollama:stats",
        "data": {"eval_ms": 3},
    }


async def test_older_ollama_without_responses_falls_back_to_chat(
    fake_server: FakeModelServer,
) -> None:
    fake_server.responses_enabled = False
    fake_server.queue(Reply(deltas=["from ", "chat"]), Reply(text="second"))
    async with OllamaProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        events = Events()
        first = await p.responses(
            request(model="ollama/llama3", stream=True), on_stream_event=events
        )
        second = await p.responses(request(model="ollama/llama3"))
    assert events.deltas() == ["from ", "chat"]
    assert first.response.output[0].content[0].text == "from chat"
    assert second.response.output[0].content[0].text == "second"
    assert [r.path for r in fake_server.requests] == [
        "/v1/responses",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert fake_server.base_url in chat_only_base_urls()


async def test_tags_and_pull(fake_server: FakeModelServer) -> None:
    async with OllamaProvider(base_url=fake_server.base_url) as p:
        assert await p.list_models() == ["llama3:latest", "qwen3:0.6b"]
        assert p.list_models_sync() == ["llama3:latest", "qwen3:0.6b"]
        assert p.has_model_sync("ollama/llama3")  # `:latest` is implied
        assert p.has_model_sync("qwen3:0.6b")
        assert not p.has_model_sync("mistral")
        statuses: list[str] = []
        await p.pull("ollama/mistral", on_status=statuses.append)
        assert statuses == ["pulling manifest", "success"]
        assert fake_server.last_request.path == "/api/pull"
        assert fake_server.last_request.body == {"name": "mistral"}
        assert "mistral" in await p.list_models()
    assert fake_server.requests_to("/api/tags")[0].path == "/api/tags"


def test_unreachable_ollama_is_reported() -> None:
    p = OllamaProvider(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(
        ProviderError, match="ollama: cannot connect to http://127.0.0.1:9/api/tags"
    ):
        p.list_models_sync(timeout=0.5)


async def test_model_not_found_error_is_structured(fake_server: FakeModelServer) -> None:
    # Ollama answers a missing model with 404 on both endpoints; nothing is remembered.
    fake_server.queue(
        Reply(
            status=404,
            body={
                "error": {
                    "message": 'model "nope" not found, try pulling it first',
                    "type": "api_error",
                }
            },
        ),
        Reply(status=404, body={"error": 'model "nope" not found'}),
    )
    async with OllamaProvider(base_url=fake_server.base_url, retry=FAST_RETRY) as p:
        with pytest.raises(ProviderError) as info:
            await p.responses(CreateResponseRequest(model="ollama/nope", input="hi"))
    assert info.value.status == 404
    assert "try pulling it first" in str(info.value)
    assert fake_server.base_url not in chat_only_base_urls()
