"""gambit.providers: the model provider adapters, their configuration and the router.

| prefix           | class                      | environment                                  |
|------------------|----------------------------|----------------------------------------------|
| `openrouter/`    | `OpenRouterProvider`       | OPENROUTER_API_KEY, OPENROUTER_BASE_URL      |
| `openai-api/`    | `OpenAIResponsesProvider`  | OPENAI_API_KEY, OPENAI_BASE_URL              |
| `ollama/`        | `OllamaProvider`           | OLLAMA_BASE_URL (OLLAMA_API_KEY optional)    |
| `openresponses/` | `OpenResponsesProvider`    | OPENRESPONSES_BASE_URL, OPENRESPONSES_API_KEY|
| `offline/`       | `offline.ScriptedProvider` | none (demo models, labelled offline)         |
| none             | the `gambit.toml` default provider (`openrouter` unless set)              |

`ProviderRouter` resolves aliases and fallback lists (`ModelResolver`) and dispatches by
prefix (`ModelProvider`). Installed distributions add prefixes through the `gambit.providers`
entry-point group (`ENTRY_POINT_GROUP`; loaded on first use of a prefix that is not built in,
`all_providers()` lists them all). Adapters build on `gambit.core.provider`, the engine's
public surface for providers. See docs/providers.md.

The modules: `_registry` (prefix -> `ProviderSpec`), `_plugins` (entry points), `_config`
(`gambit.toml`), `_router` (`ProviderRouter`, `describe_*`), `_http` (retries, SSE),
`_base` (the shared HTTP adapter), `_responses_wire` / `_chat_wire` (the two wire formats),
`_pricing`, one module per adapter, `offline/` (scripted, demo and replayed models),
`agent_bridges` / `_agent_cli` (coding agents as providers).
"""

import sys as _sys
import types as _types

# httpx imports its command-line client (`httpx._main`: click, rich, pygments) whenever
# those are installed, and ours are: about 55 ms of every `gambit` command's start-up for a
# CLI we never run (encode/httpx#3547 moves it to `python -m httpx`). A stand-in module
# whose `main` imports the real one on demand keeps `httpx.main` working.
if "httpx" not in _sys.modules and "httpx._main" not in _sys.modules:

    def _httpx_cli_main(*args: object, **kwargs: object) -> object:
        del _sys.modules["httpx._main"]
        from httpx._main import main

        return main(*args, **kwargs)

    _stand_in = _types.ModuleType("httpx._main", "httpx's CLI, imported when first run")
    vars(_stand_in)["main"] = _httpx_cli_main
    _sys.modules["httpx._main"] = _stand_in

from ._config import ConfigError, GambitConfig, ModelAlias, find_config, load_config
from ._http import DEFAULT_TIMEOUT, RetryPolicy, shown_url
from ._pricing import DEFAULT_OPENAI_PRICING, ModelPricing
from ._registry import ENTRY_POINT_GROUP, PROVIDERS, ProviderSpec, all_providers, split_model
from ._router import ProviderRouter, describe_model_list, describe_providers
from .ollama import OllamaProvider
from .openai_api import OpenAIResponsesProvider
from .openresponses import OpenResponsesProvider
from .openrouter import OpenRouterProvider

__all__ = [
    "DEFAULT_OPENAI_PRICING",
    "DEFAULT_TIMEOUT",
    "ENTRY_POINT_GROUP",
    "PROVIDERS",
    "ConfigError",
    "GambitConfig",
    "ModelAlias",
    "ModelPricing",
    "OllamaProvider",
    "OpenAIResponsesProvider",
    "OpenResponsesProvider",
    "OpenRouterProvider",
    "ProviderRouter",
    "ProviderSpec",
    "RetryPolicy",
    "all_providers",
    "describe_model_list",
    "describe_providers",
    "find_config",
    "load_config",
    "shown_url",
    "split_model",
]
