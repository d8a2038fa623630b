"""`ollama/`: a local Ollama through its OpenAI-compatible API (`OLLAMA_BASE_URL`).

Requests use `/v1/responses`; an Ollama without it (older than the Responses API) falls
back to `/v1/chat/completions`, remembered per base URL like any Open Responses server.
The native API (`/api/tags`, `/api/pull`) lives at the base URL without its trailing `/v1`,
keeping any other path prefix (`http://host/ollama/v1` -> `http://host/ollama/api/tags`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from gambit.core.provider import ProviderError

from ._http import describe_transport_error, error_from_body, shown_url
from .openresponses import OpenResponsesProvider

__all__ = ["OLLAMA_DEFAULT_BASE_URL", "OllamaProvider", "native_base_url"]

OLLAMA_DEFAULT_BASE_URL = "http://localhost:11434/v1"


def native_base_url(base_url: str) -> str:
    """The native API base: a trailing `/v1` removed, with a trailing slash."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/"


def _model_matches(wanted: str, available: str) -> bool:
    if wanted == available:
        return True
    # `llama3` is `llama3:latest`.
    return ":" not in wanted and available == f"{wanted}:latest"


class OllamaProvider(OpenResponsesProvider):
    """`OllamaProvider(base_url="http://localhost:11434/v1", api_key="ollama", ...)`."""

    name = "ollama"
    prefix = "ollama"
    default_base_url = OLLAMA_DEFAULT_BASE_URL
    env_base_url = "OLLAMA_BASE_URL"
    env_api_key = "OLLAMA_API_KEY"

    def __init__(self, *, api_key: str | None = "ollama", **kwargs: Any):
        super().__init__(api_key=api_key or "ollama", **kwargs)

    @property
    def native_base_url(self) -> str:
        return native_base_url(self.base_url)

    async def list_models(self) -> list[str]:
        """Model names from `GET <native>/api/tags`."""
        data = await self.http.request_json("GET", self.native_base_url + "api/tags")
        return _tag_names(data)

    def list_models_sync(self, *, timeout: float = 2.0) -> list[str]:
        """`list_models` without an event loop (for model resolution); one quick attempt."""
        url = self.native_base_url + "api/tags"
        try:
            response = httpx.get(url, timeout=timeout, headers=self.http.headers)
        except httpx.HTTPError as exc:
            raise ProviderError(describe_transport_error(exc, url), provider=self.name) from exc
        if response.status_code >= 400:
            raise error_from_body(self.name, response.status_code, response.content, url)
        try:
            return _tag_names(response.json())
        except ValueError:
            raise ProviderError(f"invalid JSON from {shown_url(url)}", provider=self.name) from None

    def has_model_sync(self, model: str) -> bool:
        name = self.provider_model(model)
        return any(_model_matches(name, tag) for tag in self.list_models_sync())

    async def pull(self, model: str, *, on_status: Any = None) -> None:
        """`POST <native>/api/pull`; reads the NDJSON status lines, raises on an `error` line."""
        url = self.native_base_url + "api/pull"
        client = self.http._client(url)
        name = self.provider_model(model)
        async with client.stream(
            "POST", url, json={"name": name}, headers=self.http.headers
        ) as resp:
            if resp.status_code >= 400:
                raise error_from_body(self.name, resp.status_code, await resp.aread(), url)
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except ValueError:
                    continue
                if isinstance(data, Mapping) and data.get("error"):
                    raise ProviderError(f"pull {name}: {data['error']}", provider=self.name)
                if on_status is not None and isinstance(data, Mapping) and data.get("status"):
                    on_status(str(data["status"]))


def _tag_names(data: Any) -> list[str]:
    models = data.get("models") if isinstance(data, Mapping) else None
    return [str(m.get("name")) for m in models or [] if isinstance(m, Mapping) and m.get("name")]
