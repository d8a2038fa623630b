"""Shared HTTP plumbing for the provider adapters: timeouts, retries with backoff, SSE.

Retry rules (docs/providers.md "Reliability"):

- A request is retried, up to `RetryPolicy.max_retries` times, when the server answers 408,
  429 or a 5xx other than 501/505, or when the connection fails (connect error, timeout,
  connection closed) before anything reached the caller.
- The wait is exponential backoff with jitter (`base_delay * 2**attempt`, capped at
  `max_delay`, times a random factor in [0.5, 1]), unless the server sent `Retry-After`
  (seconds or an HTTP date) or `retry-after-ms`, which is honoured up to `max_retry_after`.
- Once one event of a stream has been handed to the caller nothing is retried: a broken
  stream raises `StreamBroken`, which the adapter turns into a `ProviderError` that keeps
  the partial text.

Every URL an error or log line shows goes through `shown_url`: a base URL may carry a user
name and password (`http://user:pw@host/v1`), and an error reaches session pages, traces,
exports, logs and `/v1` error bodies (docs/providers.md, "Reliability").
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

# httpx imports httpcore (and h11) at its first request. Imported with this module instead,
# they are in place before the console script freezes start-up's objects (gambit/cli/main.py),
# so the collector's passes during a run and at exit do not walk them again.
import httpcore  # noqa: F401
import httpx

from gambit.core.provider import ProviderError

__all__ = [
    "DEFAULT_TIMEOUT",
    "HttpClient",
    "JsonBody",
    "RetryPolicy",
    "SSEDecoder",
    "ServerSentEvent",
    "StreamBroken",
    "describe_transport_error",
    "embedded_error",
    "error_details",
    "error_from_body",
    "parse_retry_after",
    "shown_url",
    "structured_error",
]


# The user name and password of a URL: what follows the scheme's `//` (or the start, for a URL
# without a scheme) up to the last `@` before the first `/`, `?` or `#`.
def shown_url(url: str) -> str:
    """`url` as an error or a log line may show it: its user name and password, if any,
    replaced by `***` (`http://user:pw@host/v1` -> `http://***@host/v1`).

    Everything from the authority's start (after `//`, else after leading blanks) to the last
    `@` goes: a password may hold `/`, `?` or `#` unencoded, and a URL may come with blanks
    or a mistyped scheme. An `@` in a path hides a little more than it must, never less."""
    start, at = _userinfo_span(url)
    return url if at < start else f"{url[:start]}***{url[at:]}"


def _userinfo_span(url: str) -> tuple[int, int]:
    slashes = url.find("//")
    return (slashes + 2 if slashes >= 0 else len(url) - len(url.lstrip())), url.rfind("@")


def scrubbed(text: str, url: str) -> str:
    """`text` (an HTTP library's message about `url`) without `url`'s user name or password:
    the URL shown as `shown_url` shows it, and each part of its user info taken out wherever
    else it appears (httpx quotes a password it read as a port)."""
    text = text.replace(url, shown_url(url))
    start, at = _userinfo_span(url)
    if at >= start:
        userinfo = url[start:at]
        pieces = re.split(r"[:/?#]", userinfo)  # how a parser may have cut it up
        for part in sorted({userinfo, *pieces}, key=len, reverse=True):
            if len(part) >= 3:
                text = text.replace(part, "***")
    return text


DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)
"""Connect 10 s; read 300 s (the longest silence tolerated between two stream chunks)."""


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed call (429, 5xx, dropped connections)."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def should_retry_status(self, status: int) -> bool:
        return status in (408, 429) or (status >= 500 and status not in (501, 505))

    def backoff(self, attempt: int) -> float:
        delay = min(self.max_delay, self.base_delay * (2**attempt))
        return delay * (0.5 + random.random() / 2)

    def delay_for(self, attempt: int, headers: Mapping[str, str] | None) -> float:
        hinted = parse_retry_after(headers) if headers is not None else None
        if hinted is None:
            return self.backoff(attempt)
        return min(hinted, self.max_retry_after)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ServerSentEvent(NamedTuple):
    event: str
    data: str


class SSEDecoder:
    """An incremental `text/event-stream` decoder over raw bytes.

    Bytes may be split anywhere (inside a UTF-8 character, inside `\r\n\r\n`): events are
    cut at blank lines first and decoded whole. Lines end with `\n`, `\r\n` or `\r`;
    comment lines (`: ping`) are skipped; `data` lines are joined with `\n`; an event
    without an `event:` field is `"message"`; `id` and `retry` are ignored. (A byte-level
    decoder rather than httpx-sse's line iterator: it costs a third as much per event.)
    """

    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._cr = False  # the last chunk ended with \r: maybe the first half of \r\n

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        # Only the new chunk is normalised and searched, so a long event arriving in many
        # small chunks costs linear time (re-scanning the whole buffer was quadratic).
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if chunk.endswith(b"\r"):
            chunk, self._cr = chunk[:-1], True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        start = max(len(buf) - 1, 0)  # a blank line may straddle the old and new bytes
        buf += chunk
        if buf.find(b"\n\n", start) < 0:
            return []
        end = buf.rfind(b"\n\n")
        blocks = bytes(buf[:end]).split(b"\n\n")
        del buf[: end + 2]
        events = []
        for block in blocks:
            event = _parse_block(block)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """The last event when the body ended without a blank line (lenient)."""
        block = bytes(self._buf).replace(b"\r", b"")
        self._buf, self._cr = bytearray(), False
        event = _parse_block(block) if block.strip() else None
        return [event] if event is not None else []


def _parse_block(block: bytes) -> ServerSentEvent | None:
    text = block.decode("utf-8", "replace")
    event = ""
    data: list[str] = []
    for line in text.split("\n"):
        if not line or line[0] == ":":
            continue
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if not data and not event:
        return None
    return ServerSentEvent(event or "message", "\n".join(data))


class StreamBroken(Exception):
    """The stream failed after part of it reached the caller (or retries ran out). `url` is
    where from, as messages show it (`shown_url`)."""

    def __init__(self, reason: str, *, cause: BaseException | None = None, url: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.cause = cause
        self.url = shown_url(url)


@dataclass
class JsonBody:
    """A server answered a streaming request with a plain JSON body (it cannot stream)."""

    data: Any


# Each transport failure and how it reads ({url}, and {detail}: the exception's text); the
# first class the exception is an instance of wins (ConnectTimeout before ConnectError).
_TRANSPORT_ERRORS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (httpx.ConnectTimeout, "timed out connecting to {url}"),
    (httpx.ConnectError, "cannot connect to {url}: {detail}"),
    (httpx.ReadTimeout, "timed out waiting for data from {url} (read timeout)"),
    ((httpx.WriteTimeout, httpx.PoolTimeout), "timed out sending the request to {url}"),
    (httpx.RemoteProtocolError, "the server closed the connection ({detail})"),
    (httpx.ReadError, "the connection was lost ({detail})"),
    (
        httpx.UnsupportedProtocol,
        "cannot use the URL {url}: it needs an http:// or https:// scheme ({detail})",
    ),
    (httpx.DecodingError, "cannot decode the answer from {url} ({detail})"),
)


def describe_transport_error(exc: BaseException, url: str) -> str:
    shown = shown_url(url)
    detail = scrubbed(str(exc) or type(exc).__name__, url)
    for types, template in _TRANSPORT_ERRORS:
        if isinstance(exc, types):
            return template.format(url=shown, detail=detail)
    return f"{type(exc).__name__}: {detail}"


def _short(text: str, limit: int = 500) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


RETRYABLE_ERROR_TYPES = frozenset(
    {"server_error", "too_many_requests", "rate_limit_error", "overloaded_error", "timeout"}
)
"""Error `type`s (or codes) in a stream's `error` / `response.failed` that a retry could fix."""


def error_details(err: Mapping[str, Any] | None) -> str:
    """` (code X, param Y, type Z)` from a structured error, only the fields present."""
    if not isinstance(err, Mapping):
        return ""
    parts = [
        f"{label} {err[key]}"
        for key, label in (("code", "code"), ("param", "param"), ("type", "type"))
        if err.get(key) not in (None, "")
    ]
    return f" ({', '.join(parts)})" if parts else ""


def structured_error(
    provider: str,
    what: str,
    err: Mapping[str, Any] | str | None,
    *,
    status: int | None = None,
    retryable: bool | None = None,
    partial_text: str = "",
) -> ProviderError:
    """A `ProviderError` from an Open Responses / OpenAI structured error object.

    The message is `<what>: <message> (code C, param P, type T)`; the fields are also set on
    the exception (`code`, `param`, `status`, and `error_type` for the type). `retryable`
    defaults to whether the type or code names a transient failure.
    """
    fields: dict[str, Any] = dict(err) if isinstance(err, Mapping) else {}
    message = fields.get("message") if fields else err
    if message is not None and not isinstance(message, str):
        message = json.dumps(message)
    text = f"{what}: {message}" if message else what
    text += error_details(fields)
    code, param, err_type = fields.get("code"), fields.get("param"), fields.get("type")
    if retryable is None:
        retryable = str(err_type) in RETRYABLE_ERROR_TYPES or str(code) in RETRYABLE_ERROR_TYPES
    error = ProviderError(
        text,
        provider=provider,
        status=status,
        code=str(code) if code is not None else None,
        param=str(param) if param is not None else None,
        retryable=retryable,
        partial_text=partial_text,
    )
    error.error_type = str(err_type) if err_type is not None else None  # type: ignore[attr-defined]
    return error


def error_from_body(
    provider: str, status: int, body: bytes | str | Any, url: str, *, retryable: bool = False
) -> ProviderError:
    """A `ProviderError` for an HTTP error answer, with the structured fields when present.

    Understands `{"error": {type, code, param, message}}` (Open Responses / OpenAI),
    `{"error": "text"}` (Ollama), `{"detail": ...}` (FastAPI) and `{"message": ...}`.
    The message reads `HTTP 400 from URL: <message> (code C, param P, type T)`; the error
    `type` is kept on the exception as `error_type`.
    """
    data: Any = body
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError:
            data = _short(text)
    err: Mapping[str, Any] | str | None = None
    nested = data.get("error") if isinstance(data, dict) else None
    if isinstance(nested, dict | str):
        err = nested
    elif isinstance(data, dict):
        detail = data.get("detail") or data.get("message")
        err = detail if isinstance(detail, str) else (json.dumps(detail) if detail else None)
    elif isinstance(data, str) and data:
        err = data
    return structured_error(
        provider, f"HTTP {status} from {shown_url(url)}", err, status=status, retryable=retryable
    )


def embedded_error(data: Any) -> Mapping[str, Any] | None:
    """The `{"error": {...}}` of a 200 answer that carries no result (OpenRouter does this)."""
    if not isinstance(data, Mapping):
        return None
    err = data.get("error")
    if not err or data.get("choices") or data.get("output") or data.get("status"):
        return None
    return err if isinstance(err, Mapping) else {"message": str(err)}


Sleep = Callable[[float], Awaitable[Any]]


class HttpClient:
    """One provider's HTTP access: base URL, headers, timeouts, retries, SSE.

    `client` (an `httpx.AsyncClient`) or `transport` is the test seam; without them an
    `AsyncClient` is created on first use (and re-created if the event loop changed) and
    closed by `aclose()`.
    """

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
    ):
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.headers = {k: v for k, v in (headers or {}).items() if v is not None}
        # An injected client keeps its own timeouts unless `timeout` is given.
        self._send_timeout = timeout is not None or client is None
        if timeout is None:
            self.timeout = DEFAULT_TIMEOUT
        elif isinstance(timeout, httpx.Timeout):
            self.timeout = timeout
        else:
            self.timeout = httpx.Timeout(timeout)
        self.retry = retry or RetryPolicy()
        self._sleep: Sleep = sleep if sleep is not None else asyncio.sleep
        self._injected = client
        self._transport = transport
        # Owned clients, one for plain-http URLs and one for https (see `_client`).
        self._owned: dict[bool, httpx.AsyncClient] = {}
        self._owned_loop: asyncio.AbstractEventLoop | None = None

    def url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    def shown_url(self, path: str) -> str:
        """`url(path)` as an error shows it (without a user name or password)."""
        return shown_url(self.url(path))

    def _client(self, url: str | None = None) -> httpx.AsyncClient:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        if self._owned_loop is not loop:
            self._owned = {}  # a pooled connection belongs to the loop that opened it
            self._owned_loop = loop
        # A plain-http URL (a local server) never uses TLS, so its client skips loading the
        # CA bundle, which cost 40 ms of every CLI run. It follows no redirects, so it never
        # reaches an https URL; https URLs always get a verifying client.
        secure = not (url or self.base_url).startswith("http://")
        client = self._owned.get(secure)
        if client is None or client.is_closed:
            client = self._owned[secure] = httpx.AsyncClient(
                transport=self._transport, timeout=self.timeout, verify=secure
            )
        return client

    async def aclose(self) -> None:
        for client in self._owned.values():
            if not client.is_closed:
                await client.aclose()
        self._owned = {}

    # ------------------------------------------------------------------ requests

    async def _retry_after(self, exc: httpx.TransportError, url: str, attempt: int) -> int:
        """The number of the next attempt after a transport failure, once its backoff has
        passed; a retryable ProviderError when no attempt is left."""
        if attempt >= self.retry.max_retries:
            raise ProviderError(
                describe_transport_error(exc, url) + _attempts(attempt),
                provider=self.provider,
                retryable=True,
            ) from exc
        await self._sleep(self.retry.backoff(attempt))
        return attempt + 1

    async def _send(self, method: str, path: str, body: Any, *, accept: str) -> httpx.Response:
        """Send with retries; return an open (streaming) 2xx response, or raise ProviderError."""
        url = self.url(path)
        client = self._client(url)
        headers = {**self.headers, "Accept": accept}
        attempt = 0
        while True:
            extra: dict[str, Any] = {"timeout": self.timeout} if self._send_timeout else {}
            try:
                request = client.build_request(method, url, json=body, headers=headers, **extra)
            except httpx.InvalidURL as exc:
                raise ProviderError(
                    f"invalid URL {shown_url(url)!r}: {scrubbed(str(exc), url)}",
                    provider=self.provider,
                ) from exc
            try:
                response = await client.send(request, stream=True)
            except httpx.UnsupportedProtocol as exc:
                raise ProviderError(
                    describe_transport_error(exc, url), provider=self.provider
                ) from exc
            except httpx.TransportError as exc:
                attempt = await self._retry_after(exc, url, attempt)
                continue
            if response.status_code < 400:
                return response
            try:
                raw = await response.aread()
            except httpx.TransportError:
                raw = b""
            finally:
                await response.aclose()
            retryable = self.retry.should_retry_status(response.status_code)
            if retryable and attempt < self.retry.max_retries:
                await self._sleep(self.retry.delay_for(attempt, response.headers))
                attempt += 1
                continue
            error = error_from_body(
                self.provider, response.status_code, raw, url, retryable=retryable
            )
            if attempt:
                error.args = (error.args[0] + _attempts(attempt),)
            raise error

    async def request_json(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request/answer, with retries (a body that fails mid-read is retried too)."""
        attempt = 0
        while True:
            response = await self._send(method, path, body, accept="application/json")
            try:
                raw = await response.aread()
            except httpx.TransportError as exc:
                attempt = await self._retry_after(exc, self.url(path), attempt)
                continue
            except httpx.RequestError as exc:  # a body that cannot be decoded
                raise ProviderError(
                    describe_transport_error(exc, self.url(path)), provider=self.provider
                ) from exc
            finally:
                await response.aclose()
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                raise ProviderError(
                    f"invalid JSON from {self.shown_url(path)}: "
                    f"{_short(raw.decode('utf-8', 'replace'), 200)}",
                    provider=self.provider,
                    status=response.status_code,
                ) from None

    async def events(
        self, path: str, body: Any
    ) -> AsyncGenerator[ServerSentEvent | JsonBody, None]:
        """POST and yield the server-sent events as they arrive.

        Retries (see the module docstring) happen only while nothing has been yielded. A
        server that answers with JSON instead of a stream yields one `JsonBody`. A transport
        failure after the first event raises `StreamBroken`. Use with
        `contextlib.aclosing` so the connection is released when the caller stops early.
        """
        url = self.url(path)
        attempt = 0
        while True:
            response = await self._send("POST", path, body, accept="text/event-stream")
            delivered = False
            try:
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    raw = await response.aread()
                    try:
                        data = json.loads(raw) if raw else None
                    except ValueError:
                        raise ProviderError(
                            f"expected an event stream from {shown_url(url)}, "
                            f"got {ctype or 'no content type'}: "
                            f"{_short(raw.decode('utf-8', 'replace'), 200)}",
                            provider=self.provider,
                            status=response.status_code,
                        ) from None
                    delivered = True
                    yield JsonBody(data)
                    return
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    for sse in decoder.feed(chunk):
                        delivered = True
                        yield sse
                for sse in decoder.flush():
                    delivered = True
                    yield sse
                return
            except httpx.TransportError as exc:
                if not delivered and attempt < self.retry.max_retries:
                    await self._sleep(self.retry.backoff(attempt))
                    attempt += 1
                    continue
                reason = describe_transport_error(exc, url)
                if not delivered:
                    reason += _attempts(attempt)
                raise StreamBroken(reason, cause=exc, url=url) from exc
            except httpx.RequestError as exc:  # undecodable bytes: a retry would not help
                reason = describe_transport_error(exc, url)
                raise StreamBroken(reason, cause=exc, url=url) from exc
            finally:
                await response.aclose()


def _attempts(retries: int) -> str:
    return f" (after {retries + 1} attempts)" if retries else ""
