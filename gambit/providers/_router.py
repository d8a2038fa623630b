"""`ProviderRouter`: which provider serves a model, and whether it can now.

- **Prefix routing.** `openai-api/gpt-4.1` goes to the `openai-api` adapter as `gpt-4.1`; a
  name without a known prefix goes, whole, to `gambit.toml`'s default provider. Adapters are
  built lazily, once, from the environment mapping the router was given and their
  `[providers.<name>]` settings (the registry, `_registry.py`, says how to build each).
- **Aliases and fallback lists.** `resolve_model` expands `[models.aliases]` and takes the
  first candidate of a list whose provider is configured (for `ollama/` candidates in a
  list, Ollama is asked whether the model is pulled). Nothing is switched after a call fails.
- **Availability without the network.** `describe_providers` and `describe_model_list`
  back `gambit check --providers`: which provider serves each model and whether it is
  configured, from the environment alone, never printing a variable's value.

The router is itself a `ModelProvider` (`responses`, `chat`) that dispatches on the request's
model, and the `ModelResolver` the CLI and the simulator give the runtime. See
docs/providers.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gambit.core.provider import (
    BaseChatProvider,
    ChatProvider,
    ChatResult,
    CreateResponseRequest,
    GambitError,
    ModelNotAvailableError,
    ModelProvider,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    ResolvedModel,
)

from ._config import GambitConfig, load_config
from ._http import shown_url
from ._registry import ProviderSpec, all_providers, provider_spec, split_model

__all__ = ["ProviderRouter", "describe_model_list", "describe_providers"]

log = logging.getLogger("gambit.providers")


def _known_spec(name: str) -> ProviderSpec:
    spec = provider_spec(name)
    if spec is None:
        raise ProviderError(f"unknown provider {name!r}", provider=name)
    return spec


@dataclass
class _Route:
    """One candidate of a model list, split into its provider and that provider's model name."""

    candidate: str  # as written (prefix included)
    provider: str | None  # provider name, None when no default provider is configured
    provider_model: str


class ProviderRouter(BaseChatProvider):
    """Routes models to providers by prefix; resolves aliases and fallback lists.

    It is both a `ModelResolver` (`resolve_model`) and a `ModelProvider` (`responses`,
    `chat`) that dispatches on the request's model prefix; an unprefixed model goes to the
    default provider, with its whole name. Providers are built lazily from `env` (a mapping,
    never read from `os.environ` here) and the config's `[providers.<name>]` settings;
    `providers` injects ready instances by name (tests, the offline provider).
    """

    name = "router"
    offline = False

    def __init__(
        self,
        *,
        config: GambitConfig | None = None,
        env: Mapping[str, str] | None = None,
        providers: Mapping[str, ModelProvider] | None = None,
        probe_ollama: bool = True,
        offline_fallback: str | None = None,
        on_offline_fallback: Callable[[str | None, str], None] | None = None,
    ):
        """`offline_fallback` (e.g. "offline/demo") answers a deck none of whose models is
        available, instead of failing; `on_offline_fallback(deck_path, tried)` is told each
        time, so the caller can label the answer as offline."""
        self.offline_fallback = offline_fallback
        self.on_offline_fallback = on_offline_fallback
        self.config = config or GambitConfig()
        self.env: Mapping[str, str] = dict(env or {})
        self._providers: dict[str, ModelProvider] = dict(providers or {})
        self.probe_ollama = probe_ollama
        self.warnings: list[str] = list(self.config.warnings)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        start: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> ProviderRouter:
        """Config from the `gambit.toml` found from `start` (default: cwd), env from `env`
        (default: `os.environ`)."""
        return cls(
            config=load_config(start),
            env=os.environ if env is None else env,
            **kwargs,
        )

    # ------------------------------------------------------------------ providers

    def route(self, model: str) -> _Route:
        name, rest = split_model(model)
        if name is not None:
            return _Route(model, name, rest)
        return _Route(model, self.config.default_provider, model)

    def provider(self, name: str) -> ModelProvider:
        """The provider called `name` (built on first use)."""
        if name not in self._providers:
            spec = provider_spec(name)
            if spec is None:
                raise ProviderError(f"unknown provider {name!r}", provider=name)
            settings = self.config.provider_settings.get(name, {})
            kwargs: dict[str, Any] = {"settings": settings}
            if self.config.pricing and not spec.offline:
                kwargs["pricing"] = dict(self.config.pricing)
            try:
                self._providers[name] = spec.factory(self.env, **kwargs)
            except GambitError:
                raise
            except Exception as exc:
                if spec.plugin is None:
                    raise
                raise ProviderError(
                    f"the provider plugin {spec.plugin} failed to build the provider: "
                    f"{type(exc).__name__}: {exc}",
                    provider=name,
                ) from exc
        return self._providers[name]

    def provider_for(self, model: str) -> ModelProvider:
        route = self.route(model)
        if route.provider is None:
            raise ProviderError(
                f"no default provider is configured for the unprefixed model {model!r} "
                '([providers] default = "none" in gambit.toml); use a prefix such as '
                + ", ".join(spec.prefix for spec in all_providers().values()),
                provider=self.name,
            )
        return self.provider(route.provider)

    def input_content(self, model: str) -> frozenset[str]:
        """The content parts besides text (`input_image`, `input_file`) that `model`'s
        provider passes to its server; none for a provider that does not say (offline
        models, agent bridges, plugins) or that cannot be built."""
        try:
            provider = self.provider_for(self.expand(model)[0][0] if model else model)
        except (GambitError, IndexError):
            return frozenset()
        accepted = getattr(provider, "input_content", None)
        return frozenset(accepted) if accepted else frozenset()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    # ------------------------------------------------------------------ resolver

    def expand(self, model: str | Sequence[str]) -> tuple[list[str], dict[str, Any], bool]:
        """(candidates, alias params, whether an alias or a list was involved)."""
        names = [model] if isinstance(model, str) else list(model)
        out: list[str] = []
        params: dict[str, Any] = {}
        expanded = not isinstance(model, str)
        for name in names:
            name = name.strip()
            if not name:
                continue
            alias = self.config.aliases.get(name)
            if alias is not None:
                expanded = True
                if not params:
                    params = dict(alias.params)
                for target in alias.models:
                    inner = self.config.aliases.get(target)
                    out.extend(inner.models if inner is not None and target != name else [target])
                continue
            if self.config.aliases and "/" not in name:
                message = f"Model alias {name!r} is not defined in gambit.toml; using literal value"
                if message not in self.warnings:
                    self.warnings.append(message)
                    log.warning(message)
            out.append(name)
        return out, params, expanded

    def unavailable_reason(self, model: str, *, probe: bool) -> str | None:
        """Why `model` cannot be served now, or None. `probe` asks Ollama for its models."""
        route = self.route(model)
        if route.provider is None:
            return 'no default provider ([providers] default = "none")'
        spec = _known_spec(route.provider)
        if route.provider in self._providers:
            missing = getattr(self._providers[route.provider], "missing_config", None)
            if missing:
                return missing
        else:
            reason = spec.unconfigured_reason(
                self.env, self.config.provider_settings.get(route.provider)
            )
            if reason:
                return reason
        if probe and route.provider == "ollama" and self.probe_ollama:
            provider = self.provider("ollama")
            has_model = getattr(provider, "has_model_sync", None)
            if has_model is not None:
                try:
                    if not has_model(route.provider_model):
                        return f"model {route.provider_model!r} is not pulled (ollama pull {route.provider_model})"
                except ProviderError as exc:
                    return str(exc).removeprefix("ollama: ")
        return None

    def resolve_model(
        self,
        model: str | list[str],
        *,
        params: dict[str, Any] | None = None,
        deck_path: str | None = None,
    ) -> ResolvedModel:
        candidates, alias_params, expanded = self.expand(model)
        merged = {**alias_params, **(params or {})} or None
        if not candidates:
            if self.offline_fallback is not None:
                return self._fall_back(deck_path, "", merged)
            raise ModelNotAvailableError(
                f"No model configured for deck {deck_path or '(unknown)'} and no --model "
                'provided (fix: add model = "..." under [modelParams], or pass --model)'
            )
        tried: list[str] = []
        for candidate in candidates:
            reason = self.unavailable_reason(candidate, probe=expanded and len(candidates) > 1)
            if reason is None:
                return ResolvedModel(
                    model=candidate, params=merged, provider=self.provider_for(candidate)
                )
            route = self.route(candidate)
            tried.append(f"{candidate} ({route.provider or 'default'}: {reason})")
        deck = f" for deck {deck_path}" if deck_path else ""
        if self.offline_fallback is not None:
            return self._fall_back(deck_path, ", ".join(tried), merged)
        raise ModelNotAvailableError(f"No available model found{deck}. Tried: " + ", ".join(tried))

    def _fall_back(
        self, deck_path: str | None, tried: str, params: dict[str, Any] | None
    ) -> ResolvedModel:
        """The offline fallback answers; `tried` is empty when the deck names no model."""
        assert self.offline_fallback is not None
        if self.on_offline_fallback is not None:
            self.on_offline_fallback(deck_path, tried)
        return ResolvedModel(
            model=self.offline_fallback,
            params=params,
            provider=self.provider_for(self.offline_fallback),
        )

    # ------------------------------------------------------------------ provider

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        provider = self.provider_for(call.request.model)
        return await provider.responses(
            call.request, state=call.state, deck_path=call.deck_path, on_stream_event=call.on_event
        )

    async def count_input_tokens(self, request: CreateResponseRequest) -> int | None:
        """The input tokens of `request` as its provider counts them; None when that
        provider cannot count (the runtime then uses a tokenizer or an estimate)."""
        counter = getattr(self.provider_for(request.model), "count_input_tokens", None)
        if counter is None:
            return None
        tokens = await counter(request)
        return tokens if isinstance(tokens, int) else None

    async def execute_chat(self, call: ProviderCall) -> ChatResult:
        """A chat-mode call goes to the provider's own `chat` when it has one."""
        request = call.request
        provider = self.provider_for(request.model)
        if not isinstance(provider, ChatProvider):
            return await super().execute_chat(call)
        return await provider.chat(
            model=request.model,
            messages=call.messages or [],
            tools=request.tools,
            stream=bool(request.stream),
            state=call.state,
            deck_path=call.deck_path,
            on_stream_text=call.on_stream_text,
            params=request.params,
        )


# --------------------------------------------------------------------------- check


def _spec_info(spec: ProviderSpec, env: Mapping[str, str], config: GambitConfig) -> dict[str, Any]:
    settings = config.provider_settings.get(spec.name, {})
    reason = spec.unconfigured_reason(env, settings)
    return {
        "provider": spec.name,
        "configured": reason is None,
        "reason": reason,
        "offline": spec.offline,
        "baseUrl": shown_url(spec.base_url(env, settings) or "") or None,
        "env": {var: ("set" if env.get(var) else "unset") for var in spec.env_vars},
    }


def _expand_with_alias(
    names: Sequence[str], config: GambitConfig
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """[(candidate, alias it came from)], warnings: aliases expanded (one level of nesting,
    like `ProviderRouter.expand`), undefined alias-like names noted."""
    out: list[tuple[str, str | None]] = []
    warnings: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        alias = config.aliases.get(name)
        if alias is None:
            if config.aliases and "/" not in name:
                warnings.append(
                    f"Model alias {name!r} is not defined in gambit.toml; using literal value"
                )
            out.append((name, None))
            continue
        for target in alias.models:
            inner = config.aliases.get(target)
            if inner is not None and target != name:
                out.extend((m, name) for m in inner.models)
            else:
                out.append((target, name))
    return out, warnings


def _describe_candidate(
    router: ProviderRouter, candidate: str, alias: str | None, env: Mapping[str, str]
) -> dict[str, Any]:
    route = router.route(candidate)
    entry: dict[str, Any] = {
        "model": candidate,
        "alias": alias,
        "providerModel": route.provider_model,
    }
    if route.provider is None:
        entry.update(
            {
                "provider": None,
                "configured": False,
                "reason": 'no default provider ([providers] default = "none")',
                "offline": False,
                "baseUrl": None,
                "env": {},
            }
        )
    else:
        entry.update(_spec_info(_known_spec(route.provider), env, router.config))
    return entry


def describe_providers(
    models: Sequence[str],
    env: Mapping[str, str],
    config: GambitConfig | None = None,
) -> list[dict[str, Any]]:
    """For `gambit check --providers`: which provider serves each model, and whether it is
    configured. No network access. Aliases expand to one entry per candidate; values of
    environment variables are never included (only "set"/"unset").

    Entry: `{model, alias, provider, providerModel, configured, reason, offline, baseUrl, env}`.
    """
    config = config or GambitConfig()
    router = ProviderRouter(config=config, env=env)
    candidates, _ = _expand_with_alias(models, config)
    return [_describe_candidate(router, model, alias, env) for model, alias in candidates]


def describe_model_list(
    models: str | Sequence[str],
    env: Mapping[str, str],
    config: GambitConfig | None = None,
) -> dict[str, Any]:
    """One deck's `[modelParams].model` (a name, an alias or an ordered fallback list) as
    `gambit check --providers` sees it, without network access:

    `{"candidates": [describe_providers entries], "model": the first configured candidate
    or None, "available": bool, "tried": "a (provider: reason), ..." when none is,
    "warnings": [...]}`. Ollama is not asked whether a model is pulled (that needs the
    network); `gambit run` does ask, for lists.
    """
    config = config or GambitConfig()
    names = [models] if isinstance(models, str) else list(models)
    router = ProviderRouter(config=config, env=env, probe_ollama=False)
    expanded, warnings = _expand_with_alias(names, config)
    candidates = [_describe_candidate(router, model, alias, env) for model, alias in expanded]
    chosen = next((c["model"] for c in candidates if c["configured"]), None)
    tried = ", ".join(
        f"{c['model']} ({c['provider'] or 'default'}: {c['reason']})"
        for c in candidates
        if not c["configured"]
    )
    return {
        "candidates": candidates,
        "model": chosen,
        "available": chosen is not None,
        "tried": tried if chosen is None else None,
        "warnings": warnings,
    }
