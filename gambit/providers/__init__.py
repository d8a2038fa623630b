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
prefix (`ModelProvider`). See docs/providers.md.
"""

from ._config import ConfigError, GambitConfig, ModelAlias, find_config, load_config
from ._http import DEFAULT_TIMEOUT, RetryPolicy
from ._pricing import DEFAULT_OPENAI_PRICING, ModelPricing
from ._registry import PROVIDERS, ProviderSpec, split_model
from ._router import ProviderRouter, describe_model_list, describe_providers
from .ollama import OllamaProvider
from .openai_api import OpenAIResponsesProvider
from .openresponses import OpenResponsesProvider
from .openrouter import OpenRouterProvider

__all__ = [
    "DEFAULT_OPENAI_PRICING",
    "DEFAULT_TIMEOUT",
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
    "describe_model_list",
    "describe_providers",
    "find_config",
    "load_config",
    "split_model",
]
