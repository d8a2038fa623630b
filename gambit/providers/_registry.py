"""The provider registry: routing prefix -> adapter class, environment, configuration check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gambit.core.provider import ModelProvider

from .ollama import OLLAMA_DEFAULT_BASE_URL, OllamaProvider
from .openai_api import OPENAI_DEFAULT_BASE_URL, OpenAIResponsesProvider
from .openresponses import OpenResponsesProvider
from .openrouter import OPENROUTER_DEFAULT_BASE_URL, OpenRouterProvider

__all__ = ["PROVIDERS", "ProviderSpec", "provider_spec", "split_model"]

Factory = Callable[..., ModelProvider]


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: its prefix (also its name), env variables and how to build it."""

    name: str
    description: str
    env_vars: tuple[str, ...]
    required_env: tuple[str, ...]
    base_url_env: str | None
    default_base_url: str | None
    factory: Factory  # from_env(env, *, settings=..., **kwargs)
    offline: bool = False
    check: Callable[[Mapping[str, str]], str | None] | None = None  # beyond required env

    @property
    def prefix(self) -> str:
        return self.name + "/"

    def unconfigured_reason(self, env: Mapping[str, str]) -> str | None:
        """Why the provider cannot be used with this environment, or None."""
        for var in self.required_env:
            if not env.get(var):
                return f"{var} is not set"
        return self.check(env) if self.check is not None else None

    def base_url(
        self, env: Mapping[str, str], settings: Mapping[str, Any] | None = None
    ) -> str | None:
        if self.base_url_env and env.get(self.base_url_env):
            return env[self.base_url_env]
        if settings and settings.get("base_url"):
            return str(settings["base_url"])
        return self.default_base_url


def _executable_check(setting: str, default: str) -> Callable[[Mapping[str, str]], str | None]:
    def check(env: Mapping[str, str]) -> str | None:
        import os
        import shutil

        binary = env.get(setting) or default
        if "/" in binary:
            return None if os.path.isfile(binary) else f"{binary} ({setting}) does not exist"
        if shutil.which(binary, path=env.get("PATH", os.defpath)) is None:
            return f"`{binary}` is not on PATH (install it or set {setting})"
        return None

    return check


def _codex_factory(env: Mapping[str, str], **_: Any) -> ModelProvider:
    from .agent_bridges import CodexCliProvider

    return CodexCliProvider.from_env(env)


def _claude_factory(env: Mapping[str, str], **_: Any) -> ModelProvider:
    from .agent_bridges import ClaudeCodeProvider

    return ClaudeCodeProvider.from_env(env)


def _offline_factory(env: Mapping[str, str], **_: Any) -> ModelProvider:
    from .offline import ScriptedProvider  # imported on demand: only offline/ models need it

    try:  # the pause between streamed words of the demo models (reads like a model)
        delay = max(0.0, float(env.get("GAMBIT_DEMO_DELAY_MS") or 0) / 1000)
    except ValueError:
        delay = 0.0
    return ScriptedProvider(fallback_models=True, chunk_delay=delay)


PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="openrouter",
            description="OpenRouter (Chat Completions; Responses API in responses mode)",
            env_vars=("OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "GAMBIT_OPENROUTER_RESPONSES"),
            required_env=("OPENROUTER_API_KEY",),
            base_url_env="OPENROUTER_BASE_URL",
            default_base_url=OPENROUTER_DEFAULT_BASE_URL,
            factory=OpenRouterProvider.from_env,
        ),
        ProviderSpec(
            name="openai-api",
            description="OpenAI Responses API (chaining, prompt cache, reasoning, cost)",
            env_vars=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
            required_env=("OPENAI_API_KEY",),
            base_url_env="OPENAI_BASE_URL",
            default_base_url=OPENAI_DEFAULT_BASE_URL,
            factory=OpenAIResponsesProvider.from_env,
        ),
        ProviderSpec(
            name="ollama",
            description="Ollama (OpenAI-compatible API; Chat Completions fallback)",
            env_vars=("OLLAMA_BASE_URL", "OLLAMA_API_KEY"),
            required_env=(),
            base_url_env="OLLAMA_BASE_URL",
            default_base_url=OLLAMA_DEFAULT_BASE_URL,
            factory=OllamaProvider.from_env,
        ),
        ProviderSpec(
            name="openresponses",
            description="any Open Responses server (Chat Completions fallback)",
            env_vars=("OPENRESPONSES_BASE_URL", "OPENRESPONSES_API_KEY"),
            required_env=("OPENRESPONSES_BASE_URL",),
            base_url_env="OPENRESPONSES_BASE_URL",
            default_base_url=None,
            factory=OpenResponsesProvider.from_env,
        ),
        ProviderSpec(
            name="codex-cli",
            description="the Codex CLI as a coding agent (codex exec --json)",
            env_vars=("GAMBIT_CODEX_BIN",),
            required_env=(),
            base_url_env=None,
            default_base_url=None,
            factory=_codex_factory,
            check=_executable_check("GAMBIT_CODEX_BIN", "codex"),
        ),
        ProviderSpec(
            name="claude-code-cli",
            description="Claude Code as a coding agent (claude --print stream-json)",
            env_vars=("GAMBIT_CLAUDE_CODE_BIN", "GAMBIT_CLAUDE_CODE_PERMISSION_MODE"),
            required_env=(),
            base_url_env=None,
            default_base_url=None,
            factory=_claude_factory,
            check=_executable_check("GAMBIT_CLAUDE_CODE_BIN", "claude"),
        ),
        ProviderSpec(
            name="offline",
            description="offline demo models (no network; labelled offline)",
            env_vars=("GAMBIT_DEMO_DELAY_MS",),
            required_env=(),
            base_url_env=None,
            default_base_url=None,
            factory=_offline_factory,
            offline=True,
        ),
    )
}


def provider_spec(name: str) -> ProviderSpec | None:
    return PROVIDERS.get(name)


def split_model(model: str) -> tuple[str | None, str]:
    """(`provider name`, model without the prefix) for a known prefix, else (None, model)."""
    head, sep, rest = model.partition("/")
    if sep and head in PROVIDERS:
        return head, rest
    return None, model
