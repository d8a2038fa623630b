"""The provider registry: routing prefix -> how to build the adapter, its environment, checks.

`PROVIDERS` holds the built-in providers (`openrouter`, `openai-api`, `ollama`,
`openresponses`, `codex-cli`, `claude-code-cli`, `offline`), one `ProviderSpec` each. Third-party
providers come from installed distributions through the `gambit.providers` entry-point group
(`_plugins.py`, docs/providers.md "Writing a provider plugin"); they are added to
`PROVIDERS` the first time a name is asked for that is not built in (`provider_spec`,
`split_model`), or when every provider is listed (`all_providers`). So a run that only uses
built-in prefixes never looks at plugins, and `gambit --help` imports none of this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gambit.core.provider import ModelProvider

from ._base import HttpProvider
from .ollama import OllamaProvider
from .openai_api import OpenAIResponsesProvider
from .openresponses import OpenResponsesProvider
from .openrouter import OpenRouterProvider

__all__ = [
    "BUILTIN_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "PROVIDERS",
    "ProviderSpec",
    "all_providers",
    "load_plugins",
    "provider_spec",
    "split_model",
]

Factory = Callable[..., ModelProvider]

ENTRY_POINT_GROUP = "gambit.providers"
"""The entry-point group a distribution declares its provider plugins in."""


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: its name (the routing prefix without `/`) and how to build it.

    - `factory(env, *, settings, **kwargs) -> ModelProvider` builds the adapter once per
      router: `env` is the environment mapping, `settings` the provider's
      `[providers.<name>]` table of `gambit.toml` (a dict, possibly empty); `kwargs` may
      carry `pricing` (model -> `ModelPricing`), so accept `**kwargs`.
    - `description` is shown where providers are listed.
    - `env_vars` are the variables it reads (reported as set/unset, never their values);
      `required_env` the ones without which it is not configured.
    - `base_url_env` / `default_base_url` say where it connects (shown by `gambit check
      --providers`).
    - `offline` labels providers that need no network (demo and test models).
    - `check(env) -> reason | None`: a configuration check beyond `required_env`.
    - `plugin` is set by the registry: "<distribution> <version>" for a provider that a
      plugin registered, None for a built-in one.
    """

    name: str
    factory: Factory
    description: str = ""
    env_vars: tuple[str, ...] = ()
    required_env: tuple[str, ...] = ()
    base_url_env: str | None = None
    default_base_url: str | None = None
    offline: bool = False
    check: Callable[[Mapping[str, str]], str | None] | None = None  # beyond required env
    plugin: str | None = None

    @property
    def prefix(self) -> str:
        return self.name + "/"

    def unconfigured_reason(
        self, env: Mapping[str, str], settings: Mapping[str, Any] | None = None
    ) -> str | None:
        """Why the provider cannot be used with this environment and its `[providers.<name>]`
        settings, or None. A base URL may come from either (`base_url`)."""
        for var in self.required_env:
            if var == self.base_url_env and settings and settings.get("base_url"):
                continue
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
    # Imported on demand: only offline/ models need them.
    from .offline import ScriptedProvider
    from .offline.demo import BUILTIN_MODELS

    try:  # the pause between streamed words of the demo models (reads like a model)
        delay = max(0.0, float(env.get("GAMBIT_DEMO_DELAY_MS") or 0) / 1000)
    except ValueError:
        delay = 0.0
    return ScriptedProvider(models=BUILTIN_MODELS, chunk_delay=delay)


def _http_spec(
    adapter: type[HttpProvider], description: str, *, extra_env: tuple[str, ...] = ()
) -> ProviderSpec:
    """An HTTP adapter's spec, from what its `from_env` reads: its API key and base URL
    variables (one of them required: the key when the adapter needs one, else the base URL
    when it has no default) and its default base URL."""
    key, base_url = adapter.env_api_key, adapter.env_base_url
    assert key is not None and base_url is not None
    required = key if adapter.api_key_required else None
    if adapter.default_base_url is None:
        required = base_url
    return ProviderSpec(
        name=adapter.name,
        description=description,
        env_vars=(key, base_url, *extra_env),
        required_env=(required,) if required else (),
        base_url_env=base_url,
        default_base_url=adapter.default_base_url,
        factory=adapter.from_env,
    )


PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        _http_spec(
            OpenRouterProvider,
            "OpenRouter (Chat Completions; Responses API in responses mode)",
            extra_env=("GAMBIT_OPENROUTER_RESPONSES",),
        ),
        _http_spec(
            OpenAIResponsesProvider,
            "OpenAI Responses API (chaining, prompt cache, reasoning, cost)",
        ),
        _http_spec(OllamaProvider, "Ollama (OpenAI-compatible API; Chat Completions fallback)"),
        _http_spec(OpenResponsesProvider, "any Open Responses server (Chat Completions fallback)"),
        ProviderSpec(
            name="codex-cli",
            description="the Codex CLI as a coding agent (codex exec --json)",
            env_vars=("GAMBIT_CODEX_BIN",),
            factory=_codex_factory,
            check=_executable_check("GAMBIT_CODEX_BIN", "codex"),
        ),
        ProviderSpec(
            name="claude-code-cli",
            description="Claude Code as a coding agent (claude --print stream-json)",
            env_vars=("GAMBIT_CLAUDE_CODE_BIN", "GAMBIT_CLAUDE_CODE_PERMISSION_MODE"),
            factory=_claude_factory,
            check=_executable_check("GAMBIT_CLAUDE_CODE_BIN", "claude"),
        ),
        ProviderSpec(
            name="offline",
            description="offline demo models (no network; labelled offline)",
            env_vars=("GAMBIT_DEMO_DELAY_MS",),
            factory=_offline_factory,
            offline=True,
        ),
    )
}


BUILTIN_PROVIDERS: frozenset[str] = frozenset(PROVIDERS)
"""The names of the built-in providers; a plugin cannot replace one."""

_plugins_loaded = False
_plugins_lock = threading.Lock()


def load_plugins() -> bool:
    """Add the providers of installed plugins to `PROVIDERS`, once per process.

    Returns True when this call loaded them (False when they were loaded already). A plugin
    that fails is skipped with one warning (`_plugins.py`); this never raises.
    """
    global _plugins_loaded
    if _plugins_loaded:
        return False
    with _plugins_lock:
        if _plugins_loaded:
            return False
        from ._plugins import load_provider_plugins

        load_provider_plugins(PROVIDERS, builtin=BUILTIN_PROVIDERS)
        _plugins_loaded = True
        return True


def provider_spec(name: str) -> ProviderSpec | None:
    """The provider called `name`, built in or from a plugin (plugins load on first miss)."""
    spec = PROVIDERS.get(name)
    if spec is None and load_plugins():
        spec = PROVIDERS.get(name)
    return spec


def all_providers() -> dict[str, ProviderSpec]:
    """Every provider, built-in ones first, then those of plugins (loading them)."""
    load_plugins()
    return dict(PROVIDERS)


def split_model(model: str) -> tuple[str | None, str]:
    """(`provider name`, model without the prefix) for a known prefix, else (None, model).

    A prefix that is not built in makes the registry load plugins (once) before giving up.
    """
    head, sep, rest = model.partition("/")
    if sep and provider_spec(head) is not None:
        return head, rest
    return None, model
