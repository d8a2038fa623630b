"""`openrouter/`: OpenRouter, over Chat Completions and the Responses API.

How the adapter learns the mode: the runtime calls `responses()` in responses mode and
`chat()` in chat mode (`GAMBIT_CHAT_FALLBACK=1`).

- `responses()` always posts to `/responses`.
- `chat()` posts to `/chat/completions`, unless the provider was built with
  `responses_api=True` (`from_env` sets it from `GAMBIT_OPENROUTER_RESPONSES=1`); then chat
  messages are mapped to items and sent to `/responses` (docs/providers.md, "Chat mode").

Requests carry `HTTP-Referer` and `X-Title`. A replayed `gambit_context`/`gambit_init` call
in the input gets a stub tool definition when the tools list lacks it (OpenRouter's
upstreams reject calls to undeclared tools), and a `json_schema` text format is sent with
`strict: false` on the Responses endpoint (docs/providers.md, "What every adapter does").
OpenRouter's own `usage.cost` is reported as `usage.costUsd`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gambit.core.provider import ProviderCall, ProviderResponse

from ._base import HttpProvider
from ._responses_wire import WireOptions

__all__ = ["OPENROUTER_DEFAULT_BASE_URL", "OpenRouterProvider"]

OPENROUTER_DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class OpenRouterProvider(HttpProvider):
    """`OpenRouterProvider(api_key=..., base_url="https://openrouter.ai/api/v1",
    responses_api=False, referer="https://gambit.local", title="Gambit CLI", client=None,
    transport=None, timeout=None, retry=None, headers=None, pricing=None)`."""

    name = "openrouter"
    prefix = "openrouter"
    default_base_url = OPENROUTER_DEFAULT_BASE_URL
    env_api_key = "OPENROUTER_API_KEY"
    env_base_url = "OPENROUTER_BASE_URL"
    api_key_required = True
    wire_options = WireOptions(stub_context_tools=True, text_strict=False)
    chat_reasoning_object = True

    def __init__(
        self,
        *,
        responses_api: bool = False,
        referer: str = "https://gambit.local",
        title: str = "Gambit CLI",
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ):
        merged = {"HTTP-Referer": referer, "X-Title": title, **(headers or {})}
        super().__init__(headers=merged, **kwargs)
        self.responses_api = responses_api

    @classmethod
    def settings_options(
        cls, env: Mapping[str, str], settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"responses_api": _truthy(env.get("GAMBIT_OPENROUTER_RESPONSES"))}
        for name in ("referer", "title"):
            if settings.get(name):
                options[name] = str(settings[name])
        return options

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        if call.mode == "responses" or self.responses_api:
            return await super().execute(call)
        self._check_configured()
        request = call.request
        provider_model = self.provider_model(request.model)
        response = await self._call_chat(
            self.chat_body(request, provider_model), on_event=call.on_event
        )
        self._apply_cost(response, request.model, provider_model)
        return ProviderResponse(response=response)
