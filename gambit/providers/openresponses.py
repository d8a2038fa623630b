"""`openresponses/`: any Open Responses server (vLLM, LM Studio, LiteLLM, another Gambit).

What the Open Responses specification (https://www.openresponses.org/) asks of a client:
items keep their `status`; structured errors
(`type`/`code`/`param`/`message`) become `ProviderError` fields; reasoning and namespaced
`ns:type` extension items are passed through untouched, in the input and in the output.

When the server has no `/responses` (it answers 404 or 405), the call is retried against
`/chat/completions` and, once that works, the base URL is remembered as chat-only for the
rest of the process (`chat_only_base_urls()`); streams are converted to the same Open
Responses events.
"""

from __future__ import annotations

from typing import Any

from gambit.core.provider import (
    CreateResponseRequest,
    CreateResponseResponse,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    StreamEventCallback,
)

from ._base import HttpProvider

__all__ = ["OpenResponsesProvider", "chat_only_base_urls", "forget_chat_only_base_urls"]

_CHAT_ONLY: set[str] = set()


def chat_only_base_urls() -> frozenset[str]:
    """Base URLs found, in this process, to have no `/responses` endpoint."""
    return frozenset(_CHAT_ONLY)


def forget_chat_only_base_urls() -> None:
    _CHAT_ONLY.clear()


class OpenResponsesProvider(HttpProvider):
    """A generic Open Responses server, with a Chat Completions fallback.

    `OpenResponsesProvider(base_url=..., api_key=None, client=None, transport=None,
    timeout=None, retry=None, headers=None, pricing=None, name=None, chat_fallback=True)`.
    """

    name = "openresponses"
    prefix = "openresponses"
    env_base_url = "OPENRESPONSES_BASE_URL"
    env_api_key = "OPENRESPONSES_API_KEY"

    def __init__(self, *, chat_fallback: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.chat_fallback = chat_fallback

    @property
    def uses_chat_completions(self) -> bool:
        return self.base_url in _CHAT_ONLY

    @property
    def input_content(self) -> frozenset[str]:  # type: ignore[override]
        """Images and files pass over `/responses`; a chat-only server gets text only."""
        if self.chat_fallback and self.uses_chat_completions:
            return frozenset()
        return frozenset({"input_image", "input_file"})

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        self._check_configured()
        request = call.request
        model = self.provider_model(request.model)
        response = await self._responses_or_chat(request, model, call.on_event)
        self._apply_cost(response, request.model, model)
        return ProviderResponse(response=response)

    async def _responses_or_chat(
        self,
        request: CreateResponseRequest,
        model: str,
        on_event: StreamEventCallback | None,
    ) -> CreateResponseResponse:
        if self.chat_fallback and self.base_url in _CHAT_ONLY:
            return await self._call_chat(self.chat_body(request, model), on_event=on_event)
        try:
            return await self._call_responses(
                self.responses_body(request, model), on_event=on_event
            )
        except ProviderError as exc:
            if not (self.chat_fallback and exc.status in (404, 405) and not exc.partial_text):
                raise
            original = exc
        try:
            response = await self._call_chat(self.chat_body(request, model), on_event=on_event)
        except ProviderError as exc:
            if exc.status in (404, 405):
                raise original from None  # neither endpoint: report the first answer
            raise
        _CHAT_ONLY.add(self.base_url)
        return response
