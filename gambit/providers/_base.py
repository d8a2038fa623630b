"""The base of the HTTP adapters: one class per provider derives from `HttpProvider`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from contextlib import aclosing
from typing import Any, ClassVar, Self

import httpx

from gambit.core.provider import (
    BaseChatProvider,
    CreateResponseRequest,
    CreateResponseResponse,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    StreamEventCallback,
)

from ._chat_wire import (
    ChatStreamConverter,
    ChatStreamError,
    chat_body,
    parse_chat_completion,
)
from ._http import (
    HttpClient,
    JsonBody,
    RetryPolicy,
    Sleep,
    StreamBroken,
    embedded_error,
    shown_url,
    structured_error,
)
from ._pricing import ModelPricing, apply_cost, lookup_pricing
from ._responses_wire import ResponsesAccumulator, WireOptions, parse_response, responses_body

__all__ = ["HttpProvider", "settings_http_options"]

# After the terminal event, how long to wait for `[DONE]` / the end of the body before
# closing the connection (reading to the end lets the connection be reused).
_DRAIN_SECONDS = 0.2


def settings_http_options(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Constructor options from a `[providers.<name>]` table of gambit.toml.

    Keys: `base_url`, `connect_timeout`, `read_timeout` (seconds), `max_retries`,
    `retry_base_delay`, `max_retry_after`.
    """
    settings = settings or {}
    options: dict[str, Any] = {}
    connect = settings.get("connect_timeout")
    read = settings.get("read_timeout")
    if connect is not None or read is not None:
        options["timeout"] = httpx.Timeout(
            connect=float(connect) if connect is not None else 10.0,
            read=float(read) if read is not None else 300.0,
            write=30.0,
            pool=10.0,
        )
    retry_keys = {"max_retries", "retry_base_delay", "max_retry_after"}
    if retry_keys & settings.keys():
        defaults = RetryPolicy()
        options["retry"] = RetryPolicy(
            max_retries=int(settings.get("max_retries", defaults.max_retries)),
            base_delay=float(settings.get("retry_base_delay", defaults.base_delay)),
            max_delay=defaults.max_delay,
            max_retry_after=float(settings.get("max_retry_after", defaults.max_retry_after)),
        )
    return options


class HttpProvider(BaseChatProvider):
    """Common machinery: HTTP client, Responses and Chat Completions calls, chat mode, cost.

    Constructor (every adapter): `base_url`, `api_key`, `client` (an `httpx.AsyncClient`)
    or `transport`, `timeout` (`httpx.Timeout` or seconds), `retry` (`RetryPolicy`),
    `headers` (extra), `pricing` (model -> `ModelPricing`), `name`. Use `async with` or
    `aclose()` to release an owned client.
    """

    name: str = "http"
    prefix: ClassVar[str] = ""
    offline: bool = False
    default_base_url: ClassVar[str | None] = None
    wire_options: ClassVar[WireOptions] = WireOptions()
    chat_reasoning_object: ClassVar[bool] = False
    # Content parts besides text that the adapter passes to its server as they are (over
    # the Responses API; Chat Completions carries text only, docs/endpoint.md "Images and
    # files").
    input_content: ClassVar[frozenset[str]] = frozenset({"input_image", "input_file"})
    # What `from_env` reads: the variables of the API key and of the base URL, and whether
    # a call needs the key.
    env_api_key: ClassVar[str | None] = None
    env_base_url: ClassVar[str | None] = None
    api_key_required: ClassVar[bool] = False

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, settings: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Self:
        """The adapter as the environment and its `[providers.<name>]` table of gambit.toml
        configure it: the API key (`env_api_key`), the base URL (`env_base_url`, else the
        table's `base_url`, else `default_base_url`), the table's HTTP options and the
        adapter's own (`settings_options`); `kwargs` win. Without a base URL, or without a
        required key, it is built unconfigured: its calls fail saying which variable to set."""
        settings = settings or {}
        base = (
            (env.get(cls.env_base_url) if cls.env_base_url else None)
            or settings.get("base_url")
            or cls.default_base_url
        )
        key = (env.get(cls.env_api_key) if cls.env_api_key else None) or None
        options = {
            **settings_http_options(settings),
            **cls.settings_options(env, settings),
            **kwargs,
        }
        provider = cls(base_url=base or "http://missing.invalid", api_key=key, **options)
        if not base:
            provider.missing_config = f"{cls.env_base_url} is not set"
        elif cls.api_key_required and not key:
            provider.missing_config = f"{cls.env_api_key} is not set"
        return provider

    @classmethod
    def settings_options(
        cls, env: Mapping[str, str], settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Constructor options of this adapter's own, from its settings table (and the
        environment); `from_env` passes them."""
        return {}

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        pricing: Mapping[str, ModelPricing] | None = None,
        name: str | None = None,
        sleep: Sleep | None = None,
    ):
        self.name = name or type(self).name
        base = base_url or self.default_base_url
        if not base:
            raise ValueError(f"{self.name}: a base_url is required")
        self.api_key = api_key
        all_headers: dict[str, str] = {}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self.http = HttpClient(
            self.name,
            base,
            headers=all_headers,
            client=client,
            transport=transport,
            timeout=timeout,
            retry=retry,
            sleep=sleep,
        )
        self.pricing: dict[str, ModelPricing] = dict(pricing or {})
        # Set by `from_env` when required configuration is missing; calls then fail fast.
        self.missing_config: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={shown_url(self.base_url)!r})"

    @property
    def base_url(self) -> str:
        return self.http.base_url

    def provider_model(self, model: str) -> str:
        """The model name the server expects: this provider's routing prefix stripped."""
        if self.prefix and model.startswith(self.prefix + "/"):
            return model[len(self.prefix) + 1 :]
        return model

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> HttpProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _check_configured(self) -> None:
        if self.missing_config:
            raise ProviderError(self.missing_config, provider=self.name)

    def _error(self, message: str, **kwargs: Any) -> ProviderError:
        return ProviderError(message, provider=self.name, **kwargs)

    # ------------------------------------------------------------------ protocol

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        """A Responses call (chat mode too: the messages go through it, docs/providers.md
        "What every adapter does")."""
        self._check_configured()
        request = call.request
        model = self.provider_model(request.model)
        body = self.responses_body(request, model)
        response = await self._call_responses(body, on_event=call.on_event)
        self._apply_cost(response, request.model, model)
        return ProviderResponse(response=response)

    # ------------------------------------------------------------------ building blocks

    def responses_body(self, request: CreateResponseRequest, model: str) -> dict[str, Any]:
        return responses_body(request, model=model, options=self.wire_options)

    def chat_body(self, request: CreateResponseRequest, model: str) -> dict[str, Any]:
        return chat_body(
            request,
            model=model,
            reasoning_object=self.chat_reasoning_object,
            stub_context_tools=self.wire_options.stub_context_tools,
        )

    def _apply_cost(self, response: CreateResponseResponse, *names: str) -> None:
        if self.pricing:
            apply_cost(response.usage, lookup_pricing(self.pricing, *names))

    async def _call_responses(
        self,
        body: dict[str, Any],
        *,
        on_event: StreamEventCallback | None,
        path: str = "responses",
    ) -> CreateResponseResponse:
        """POST a Responses body; stream when `body["stream"]`; raise on failure."""
        if not body.get("stream"):
            data = await self.http.request_json("POST", path, body)
            return self._completed(data)
        acc = ResponsesAccumulator()
        try:
            async with aclosing(self.http.events(path, body)) as events:
                async for sse in events:
                    if isinstance(sse, JsonBody):  # the server does not stream
                        return self._completed(sse.data)
                    data = sse.data
                    if data == "[DONE]":
                        break
                    if not data:
                        continue
                    event = self._decode(data, acc.partial_text)
                    if not isinstance(event, dict):
                        continue
                    if "type" not in event and sse.event and sse.event != "message":
                        event["type"] = sse.event
                    acc.feed(event)
                    if on_event is not None:
                        on_event(event)
                    if acc.terminal is not None:
                        await _drain(events)
                        break
        except StreamBroken as exc:
            if acc.terminal is None:
                raise self._broken(exc, f"{acc.events} events", acc.partial_text) from exc
        if acc.terminal is None:
            raise self._error(
                f"the stream ended without a terminal event (response.completed, "
                f"response.incomplete or response.failed) after {acc.events} events from "
                f"{self.http.shown_url(path)}{_kept(acc.partial_text)}",
                partial_text=acc.partial_text,
                retryable=True,
            )
        if acc.terminal in ("response.failed", "error"):
            what = "the response failed" if acc.terminal == "response.failed" else "stream error"
            raise structured_error(
                self.name,
                what,
                acc.error or {"message": "no error message"},
                partial_text=acc.partial_text,
            )
        return acc.result()

    def _broken(self, exc: StreamBroken, progress: str, partial: str) -> ProviderError:
        where = f" from {exc.url}" if exc.url else ""
        return self._error(
            f"the stream broke after {progress}{where}{_kept(partial)}: {exc.reason}",
            partial_text=partial,
            retryable=True,
        )

    def _completed(self, data: Any) -> CreateResponseResponse:
        """A whole (non-streamed) Responses answer; raises when it reports a failure."""
        err = embedded_error(data)
        if err is not None:
            raise structured_error(self.name, "the server answered with an error", err)
        response = parse_response(data)
        if response.status == "failed":
            raw = data.get("error") if isinstance(data, Mapping) else None
            raise structured_error(
                self.name,
                "the response failed",
                raw if isinstance(raw, Mapping) and raw else {"message": "no error message"},
            )
        return response

    def _decode(self, data: str, partial: str) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            raise self._error(
                f"invalid JSON in a stream event: {data[:200]!r}", partial_text=partial
            ) from None

    async def _call_chat(
        self,
        body: dict[str, Any],
        *,
        on_event: StreamEventCallback | None,
        path: str = "chat/completions",
    ) -> CreateResponseResponse:
        """POST a Chat Completions body; streams are converted to Open Responses events."""
        if not body.get("stream"):
            return self._chat_completed(await self.http.request_json("POST", path, body))
        converter = ChatStreamConverter(on_event)
        done = False
        try:
            async with aclosing(self.http.events(path, body)) as events:
                async for sse in events:
                    if isinstance(sse, JsonBody):
                        return self._chat_completed(sse.data)
                    data = sse.data
                    if data == "[DONE]":
                        done = True
                        await _drain(events)
                        break
                    if not data.strip():
                        continue
                    chunk = self._decode(data, converter.partial_text)
                    if isinstance(chunk, dict):
                        converter.feed(chunk)
        except ChatStreamError as exc:
            raise structured_error(
                self.name, "stream error", exc.error, partial_text=converter.partial_text
            ) from None
        except StreamBroken as exc:
            raise self._broken(exc, f"{converter.chunks} chunks", converter.partial_text) from exc
        if converter.finish_reason == "error":
            raise self._error(
                "the stream ended with finish_reason 'error' (the upstream model failed)"
                + _kept(converter.partial_text),
                partial_text=converter.partial_text,
                retryable=True,
            )
        if not done and not converter.saw_finish:
            raise self._error(
                f"the stream ended without [DONE] or a finish_reason after {converter.chunks} "
                f"chunks from {self.http.shown_url(path)}{_kept(converter.partial_text)}",
                partial_text=converter.partial_text,
                retryable=True,
            )
        return converter.finish()

    def _chat_completed(self, data: Any) -> CreateResponseResponse:
        err = embedded_error(data)
        if err is not None:
            raise structured_error(self.name, "the server answered with an error", err)
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if (
            choices
            and isinstance(choices[0], Mapping)
            and choices[0].get("finish_reason") == "error"
        ):
            raise self._error(
                "the completion ended with finish_reason 'error' (the upstream model failed)",
                retryable=True,
            )
        return parse_chat_completion(data)


def _kept(partial: str) -> str:
    return f" ({len(partial)} characters of text had arrived)" if partial else ""


async def _drain(events: Any) -> None:
    """Read what is left of a finished stream (`[DONE]`), briefly, ignoring errors."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, StreamBroken, httpx.HTTPError):
        pass
