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

[context]                         # keeping conversations within the model's window
window = 128000                   # tokens, for every model without its own below
compact_ratio = 0.8               # compact past this share of the window
compact = true                    # false: never compact (as --no-compact)
[context.windows]
"openai-api/gpt-4.1" = 1047576

[simulator]
summary_model = "openai-api/gpt-4.1-mini"   # short session titles; none: no titles
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli

from gambit.core.provider import GambitError

from ._pricing import ModelPricing
from ._registry import all_providers, provider_spec

if TYPE_CHECKING:
    from gambit.core import CompactionSettings

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
    # [context]: context windows and compaction (docs/decks.md, "Context window and compaction")
    context_window: int | None = None
    compact_ratio: float | None = None
    compact: bool = True
    context_windows: dict[str, int] = field(default_factory=dict)
    # [simulator] summary_model: the weak model that titles sessions (None: no titles)
    summary_model: str | None = None

    def compaction(self, *, enabled: bool = True) -> CompactionSettings:
        """The runtime's compaction settings from `[context]`; `enabled=False` is
        `--no-compact`."""
        from gambit.core import CompactionSettings  # the runtime's: loaded with it

        return CompactionSettings(
            context_window=self.context_window,
            compact_ratio=self.compact_ratio,
            enabled=enabled and self.compact,
            model_windows=dict(self.context_windows),
        )


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

    _context_table(raw.get("context"), config, where)
    simulator = raw.get("simulator", {})
    if not isinstance(simulator, Mapping):
        raise ConfigError(f"{where}: [simulator] must be a table")
    summary_model = simulator.get("summary_model")
    if summary_model is not None:
        if not isinstance(summary_model, str):
            raise ConfigError(
                f'{where}: simulator.summary_model must be a model name (summary_model = "openai-api/gpt-4.1-mini")'
            )
        config.summary_model = summary_model.strip() or None

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


def _window(value: Any, where: str, key: str) -> int:
    if type(value) is not int or value < 256:
        raise ConfigError(
            f"{where}: {key} must be a context window in tokens, a whole number of at least 256 "
            f"({key.rsplit('.', 1)[-1]} = 128000); got {value!r}"
        )
    return value


def _context_table(table: Any, config: GambitConfig, where: str) -> None:
    if table is None:
        return
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: [context] must be a table")
    for key, value in table.items():
        if key == "window":
            config.context_window = _window(value, where, "context.window")
        elif key == "compact_ratio":
            if type(value) not in (int, float) or not 0 < value <= 1:
                raise ConfigError(
                    f"{where}: context.compact_ratio must be a number above 0 and at most 1 "
                    f"(compact_ratio = 0.8); got {value!r}"
                )
            config.compact_ratio = float(value)
        elif key == "compact":
            if type(value) is not bool:
                raise ConfigError(f"{where}: context.compact must be true or false; got {value!r}")
            config.compact = value
        elif key == "windows":
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f'{where}: [context.windows] must be a table of model = tokens ("openai-api/gpt-4.1" = 1047576)'
                )
            for model, tokens in value.items():
                config.context_windows[model] = _window(tokens, where, f'context.windows."{model}"')
        else:
            config.warnings.append(
                f"{where}: unknown key context.{key} (known: window, compact_ratio, compact, windows)"
            )


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
