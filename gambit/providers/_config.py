"""`gambit.toml`: the default provider, per-provider settings, model aliases and pricing.

`load_config(where)` finds the nearest `gambit.toml` (walking up from a deck's folder) and
parses it into a `GambitConfig`, cached per file and modification time; `parse_config`
parses text. A wrong shape raises `ConfigError` naming the file and the key; softer problems
(an unknown default provider, settings for an unknown provider) become `warnings`. The
router (`_router.py`) reads the result; nothing here builds a provider or reads the
environment.

```toml
[providers]
default = "openrouter"            # provider for unprefixed models; "none" disables it
                                  # (`fallback`, the TypeScript Gambit's name, is read too)
[providers.openai-api]            # per-provider settings (all optional)
prompt_cache_key = "my-project"
prompt_cache_retention = "24h"
read_timeout = 120                # seconds; also connect_timeout, max_retries,
                                  # retry_base_delay, max_retry_after, base_url

[models.aliases]
fast = "openai-api/gpt-4.1-mini"
smart = ["openai-api/gpt-4.1", "openrouter/openai/gpt-4.1"]   # ordered fallback

[models.aliases.local]            # the table form
model = ["ollama/llama3", "openrouter/meta-llama/llama-3-8b-instruct"]
description = "local first"
params = { temperature = 0.2 }    # merged under the deck's own params

[pricing."openai-api/gpt-4.1"]    # USD per 1M tokens; also [pricing."gpt-4.1"]
input = 2.0
cached_input = 0.5
output = 8.0
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli

from gambit.core.provider import GambitError

from ._pricing import ModelPricing
from ._registry import all_providers, provider_spec

__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT_PROVIDER",
    "ConfigError",
    "GambitConfig",
    "ModelAlias",
    "find_config",
    "load_config",
    "parse_config",
]

CONFIG_FILENAME = "gambit.toml"
DEFAULT_PROVIDER = "openrouter"


class ConfigError(GambitError):
    """`gambit.toml` cannot be read or has a wrong shape; the message names the file."""


@dataclass
class ModelAlias:
    """A `[models.<name>]` alias of gambit.toml: the models it stands for, in fallback order."""

    name: str
    models: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    description: str | None = None


@dataclass
class GambitConfig:
    """A loaded gambit.toml (or the defaults when there is none)."""

    path: Path | None = None
    default_provider: str | None = DEFAULT_PROVIDER
    aliases: dict[str, ModelAlias] = field(default_factory=dict)
    pricing: dict[str, ModelPricing] = field(default_factory=dict)
    provider_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest `gambit.toml` in `start` (a directory or a file's directory) or above."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
    return None


_CACHE: dict[Path, tuple[float, GambitConfig]] = {}


def load_config(where: str | os.PathLike[str] | None = None) -> GambitConfig:
    """Load `gambit.toml`: `where` is the file, or a directory to search upwards from.

    No file gives the defaults. Cached per file (and modification time).
    """
    path = Path(where) if where is not None else None
    if path is None or path.is_dir() or not path.exists():
        path = find_config(path)
        if path is None:
            return GambitConfig()
    path = path.resolve()
    mtime = path.stat().st_mtime
    cached = _CACHE.get(path)
    if cached and cached[0] == mtime:
        return cached[1]
    config = parse_config(path.read_bytes(), path=path)
    _CACHE[path] = (mtime, config)
    return config


def parse_config(data: bytes | str, *, path: Path | None = None) -> GambitConfig:
    where = str(path) if path else CONFIG_FILENAME
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        raw = tomli.loads(text)
    except (UnicodeDecodeError, tomli.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    config = GambitConfig(path=path)

    providers = raw.get("providers", {})
    if not isinstance(providers, Mapping):
        raise ConfigError(f"{where}: [providers] must be a table")
    default = providers.get("default", providers.get("fallback", DEFAULT_PROVIDER))
    if not isinstance(default, str):
        raise ConfigError(f"{where}: providers.default must be a string")
    if default == "none":
        config.default_provider = None
    elif provider_spec(default) is not None:
        config.default_provider = default
    else:
        known = ", ".join(sorted(all_providers()))
        config.warnings.append(
            f"{where}: unknown providers.default {default!r} (known: {known}, none); "
            f"using {DEFAULT_PROVIDER}"
        )
    for key, value in providers.items():
        if isinstance(value, Mapping):
            if provider_spec(key) is None:
                config.warnings.append(f"{where}: [providers.{key}] names no known provider")
            config.provider_settings[key] = dict(value)

    models = raw.get("models", {})
    aliases = models.get("aliases", {}) if isinstance(models, Mapping) else {}
    if not isinstance(aliases, Mapping):
        raise ConfigError(f"{where}: [models.aliases] must be a table")
    for name, value in aliases.items():
        config.aliases[name] = _alias(name, value, where)

    pricing = raw.get("pricing", {})
    if not isinstance(pricing, Mapping):
        raise ConfigError(f"{where}: [pricing] must be a table")
    for model, value in pricing.items():
        if not isinstance(value, Mapping):
            raise ConfigError(f'{where}: [pricing."{model}"] must be a table')
        try:
            config.pricing[model] = ModelPricing.from_mapping(value)
        except ValueError as exc:
            raise ConfigError(f'{where}: [pricing."{model}"]: {exc}') from None
    return config


def _model_list(value: Any, where: str, name: str) -> list[str]:
    models = [value] if isinstance(value, str) else value
    if (
        not isinstance(models, list)
        or not models
        or not all(isinstance(m, str) and m.strip() for m in models)
    ):
        raise ConfigError(
            f"{where}: models.aliases.{name} must be a model name or a non-empty list of them"
        )
    return [m.strip() for m in models]


def _alias(name: str, value: Any, where: str) -> ModelAlias:
    if isinstance(value, Mapping):
        params = value.get("params", {})
        if not isinstance(params, Mapping):
            raise ConfigError(f"{where}: models.aliases.{name}.params must be a table")
        desc = value.get("description")
        return ModelAlias(
            name=name,
            models=_model_list(value.get("model"), where, name),
            params=dict(params),
            description=str(desc) if desc is not None else None,
        )
    return ModelAlias(name=name, models=_model_list(value, where, name))
