"""gambit.toml, aliases, fallback lists, prefix routing, `describe_providers`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gambit.core._messages import ChatMessage
from gambit.core._openresponses import CreateResponseRequest
from gambit.core._provider import ModelNotAvailableError, ModelProvider, ProviderError
from gambit.providers import (
    ConfigError,
    GambitConfig,
    ModelPricing,
    OllamaProvider,
    OpenAIResponsesProvider,
    OpenRouterProvider,
    ProviderRouter,
    describe_providers,
    find_config,
    load_config,
    split_model,
)
from gambit.providers._config import parse_config
from tests.support.fake_model_server import FakeModelServer, Reply

TOML = """
[providers]
default = "openai-api"

[providers.openai-api]
prompt_cache_key = "proj"
max_retries = 0

[models.aliases]
fast = "openai-api/gpt-4.1-mini"
smart = ["ollama/llama3", "openrouter/openai/gpt-4.1"]

[models.aliases.local]
model = ["ollama/mistral", "ollama/qwen3:0.6b"]
description = "local first"
params = { temperature = 0.1, top_p = 0.5 }

[pricing."openai-api/gpt-4.1-mini"]
input = 1.0
cached_input = 0.5
output = 2.0
"""


def write_config(folder: Path, text: str = TOML) -> Path:
    path = folder / "gambit.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_split_model() -> None:
    assert split_model("openrouter/openai/gpt-4o") == ("openrouter", "openai/gpt-4o")
    assert split_model("openai-api/gpt-4o") == ("openai-api", "gpt-4o")
    assert split_model("openai/gpt-4o") == (None, "openai/gpt-4o")
    assert split_model("gpt-4o") == (None, "gpt-4o")


def test_config_is_found_walking_up_and_parsed(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    deck_dir = tmp_path / "decks" / "support"
    deck_dir.mkdir(parents=True)
    (deck_dir / "PROMPT.md").write_text("+++\n+++\nhi\n")
    assert find_config(deck_dir) == path
    assert find_config(deck_dir / "PROMPT.md") == path
    config = load_config(deck_dir)
    assert config.path == path.resolve()
    assert config.default_provider == "openai-api"
    assert config.aliases["fast"].models == ["openai-api/gpt-4.1-mini"]
    assert config.aliases["smart"].models == ["ollama/llama3", "openrouter/openai/gpt-4.1"]
    local = config.aliases["local"]
    assert local.params == {"temperature": 0.1, "top_p": 0.5} and local.description == "local first"
    assert config.pricing["openai-api/gpt-4.1-mini"] == ModelPricing(1.0, 2.0, 0.5)
    assert config.provider_settings["openai-api"] == {"prompt_cache_key": "proj", "max_retries": 0}
    assert load_config(deck_dir) is config  # cached per file


def test_no_config_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config.path is None and config.default_provider == "openrouter"
    assert config.aliases == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[providers", "gambit.toml"),
        ('[models.aliases]\nx = ""', "models.aliases.x must be a model name"),
        ("[models.aliases]\nx = []", "models.aliases.x must be a model name"),
        ('[pricing."m"]\ninput = 1', "needs `input` and `output`"),
        ('[pricing."m"]\ninput = "cheap"\noutput = 1', "must be a number"),
        ("providers = 3", "[providers] must be a table"),
    ],
)
def test_config_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(text)


def test_default_provider_forms() -> None:
    assert parse_config('[providers]\nfallback = "ollama"').default_provider == "ollama"
    assert parse_config('[providers]\ndefault = "none"').default_provider is None
    odd = parse_config('[providers]\ndefault = "codex"')
    assert odd.default_provider == "openrouter"
    assert "unknown providers.default 'codex'" in odd.warnings[0]


def test_aliases_and_fallback_lists_pick_the_first_available(
    tmp_path: Path, fake_server: FakeModelServer
) -> None:
    config = load_config(write_config(tmp_path))
    router = ProviderRouter(
        config=config, env={"OLLAMA_BASE_URL": fake_server.base_url, "OPENAI_API_KEY": "k"}
    )
    # `local`: mistral is not pulled on the fake server, qwen3:0.6b is.
    resolved = router.resolve_model("local", params={"temperature": 0.9}, deck_path="/d/PROMPT.md")
    assert resolved.model == "ollama/qwen3:0.6b"
    assert resolved.params == {"temperature": 0.9, "top_p": 0.5}  # deck params win
    assert isinstance(resolved.provider, OllamaProvider)
    assert [r.path for r in fake_server.requests] == ["/api/tags", "/api/tags"]

    # A plain prefixed string is routed without probing.
    fast = router.resolve_model("fast", params=None, deck_path=None)
    assert fast.model == "openai-api/gpt-4.1-mini"
    assert isinstance(fast.provider, OpenAIResponsesProvider)

    # A list: the first candidate whose provider is configured.
    chosen = router.resolve_model(
        ["openrouter/x/y", "openai-api/gpt-4o"], params=None, deck_path=None
    )
    assert chosen.model == "openai-api/gpt-4o"


def test_no_available_model_lists_every_candidate_with_its_reason(
    tmp_path: Path, fake_server: FakeModelServer
) -> None:
    config = load_config(write_config(tmp_path))
    fake_server.models = ["qwen3:0.6b"]
    router = ProviderRouter(config=config, env={"OLLAMA_BASE_URL": fake_server.base_url})
    with pytest.raises(ModelNotAvailableError) as info:
        router.resolve_model("smart", params=None, deck_path="/decks/a/PROMPT.md")
    message = str(info.value)
    assert message.startswith("No available model found for deck /decks/a/PROMPT.md. Tried: ")
    assert "ollama/llama3 (ollama: model 'llama3' is not pulled (ollama pull llama3))" in message
    assert "openrouter/openai/gpt-4.1 (openrouter: OPENROUTER_API_KEY is not set)" in message

    with pytest.raises(ModelNotAvailableError) as info:
        router.resolve_model(["openai-api/gpt-4o", "ollama/mistral"], params=None, deck_path=None)
    assert "openai-api/gpt-4o (openai-api: OPENAI_API_KEY is not set)" in str(info.value)
    assert "ollama/mistral (ollama: model 'mistral' is not pulled (ollama pull mistral))" in str(
        info.value
    )


def test_unreachable_ollama_reason() -> None:
    router = ProviderRouter(env={"OLLAMA_BASE_URL": "http://127.0.0.1:9/v1"})
    with pytest.raises(ModelNotAvailableError, match=r"ollama/a \(ollama: cannot connect to"):
        router.resolve_model(["ollama/a", "ollama/b"], params=None, deck_path=None)


def test_plain_model_with_unconfigured_provider_is_not_available() -> None:
    router = ProviderRouter(env={})
    with pytest.raises(
        ModelNotAvailableError, match=r"openai/gpt-4o \(openrouter: OPENROUTER_API_KEY is not set\)"
    ):
        router.resolve_model("openai/gpt-4o", params=None, deck_path=None)
    none = ProviderRouter(config=parse_config('[providers]\ndefault = "none"'), env={})
    with pytest.raises(ModelNotAvailableError, match="no default provider"):
        none.resolve_model("gpt-4o", params=None, deck_path=None)
    with pytest.raises(ModelNotAvailableError, match="No model configured"):
        none.resolve_model(["", " "], params=None, deck_path="/d")


def test_missing_alias_warns_and_uses_the_literal(tmp_path: Path) -> None:
    router = ProviderRouter(config=load_config(write_config(tmp_path)), env={"OPENAI_API_KEY": "k"})
    resolved = router.resolve_model("gpt-4o", params=None, deck_path=None)
    assert resolved.model == "gpt-4o"  # unprefixed -> default provider (openai-api)
    assert isinstance(resolved.provider, OpenAIResponsesProvider)
    assert router.warnings == [
        "Model alias 'gpt-4o' is not defined in gambit.toml; using literal value"
    ]


async def test_router_dispatches_by_prefix_with_env_and_config(
    tmp_path: Path, fake_server: FakeModelServer
) -> None:
    config = load_config(write_config(tmp_path))
    router = ProviderRouter(config=config, env=fake_server.env())
    assert isinstance(router, ModelProvider)
    fake_server.queue(
        Reply(text="from openai", usage={"input_tokens": 1_000_000, "output_tokens": 0}),
        Reply(text="from openrouter"),
        Reply(text="default provider"),
    )
    first = await router.responses(
        CreateResponseRequest(model="openai-api/gpt-4.1-mini", input="hi")
    )
    assert first.response.usage.model_extra["costUsd"] == 1.0  # gambit.toml pricing
    assert fake_server.last_request.body["prompt_cache_key"] == "proj"  # [providers.openai-api]
    chat = await router.chat(
        model="openrouter/openai/gpt-4o", messages=[ChatMessage(role="user", content="x")]
    )
    assert chat.message.content == "from openrouter"
    assert fake_server.last_request.path == "/v1/chat/completions"
    assert fake_server.last_request.headers["x-title"] == "Gambit CLI"
    await router.responses(CreateResponseRequest(model="gpt-4o", input="hi"))
    assert fake_server.last_request.body["model"] == "gpt-4o"
    assert isinstance(router.provider("openrouter"), OpenRouterProvider)
    await router.aclose()


async def test_router_surfaces_provider_errors(fake_server: FakeModelServer) -> None:
    router = ProviderRouter(env={"OPENROUTER_BASE_URL": fake_server.base_url})
    with pytest.raises(ProviderError, match="openrouter: OPENROUTER_API_KEY is not set"):
        await router.responses(CreateResponseRequest(model="openai/gpt-4o", input="hi"))


async def test_offline_prefix_routes_to_the_offline_provider() -> None:
    router = ProviderRouter(env={})
    resolved = router.resolve_model("offline/echo", params=None, deck_path=None)
    assert resolved.provider is not None and resolved.provider.offline is True


def test_from_env_uses_the_config_found_from_start(tmp_path: Path) -> None:
    write_config(tmp_path)
    router = ProviderRouter.from_env({"OPENAI_API_KEY": "k"}, start=tmp_path)
    assert router.config.default_provider == "openai-api"
    assert router.resolve_model("gpt-4o", params=None, deck_path=None).model == "gpt-4o"
    assert ProviderRouter.from_env(start=tmp_path).env.get("PATH") == os.environ.get("PATH")


def test_describe_providers(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    env = {"OPENAI_API_KEY": "secret-value", "OLLAMA_BASE_URL": "http://127.0.0.1:1/v1"}
    rows = describe_providers(
        ["fast", "smart", "openresponses/x", "gpt-4o", "offline/echo"], env, config
    )
    by_model = {row["model"]: row for row in rows}
    assert [row["model"] for row in rows] == [
        "openai-api/gpt-4.1-mini",
        "ollama/llama3",
        "openrouter/openai/gpt-4.1",
        "openresponses/x",
        "gpt-4o",
        "offline/echo",
    ]
    fast = by_model["openai-api/gpt-4.1-mini"]
    assert fast["alias"] == "fast" and fast["provider"] == "openai-api"
    assert fast["providerModel"] == "gpt-4.1-mini"
    assert fast["configured"] is True and fast["reason"] is None
    assert fast["baseUrl"] == "https://api.openai.com/v1"
    assert fast["env"] == {"OPENAI_API_KEY": "set", "OPENAI_BASE_URL": "unset"}
    assert "secret-value" not in repr(rows)
    assert by_model["ollama/llama3"]["baseUrl"] == "http://127.0.0.1:1/v1"
    assert by_model["openrouter/openai/gpt-4.1"]["reason"] == "OPENROUTER_API_KEY is not set"
    assert by_model["openresponses/x"]["reason"] == "OPENRESPONSES_BASE_URL is not set"
    assert by_model["gpt-4o"]["provider"] == "openai-api"  # the configured default
    assert by_model["offline/echo"]["offline"] is True and by_model["offline/echo"]["configured"]
    plain = describe_providers(["openai/gpt-4o"], {}, GambitConfig())
    assert plain[0]["provider"] == "openrouter" and plain[0]["providerModel"] == "openai/gpt-4o"
