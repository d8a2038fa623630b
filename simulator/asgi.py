"""ASGI entry point: HTTP through Django, websockets through Channels (origin checked).

It composes: the body limit, then `/v1/*` to the API's own handler (`endpoint.asgi`), the
rest (and static files) to the simulator's."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")

from channels.routing import ProtocolTypeRouter, URLRouter
from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

from endpoint.asgi import ApiHandler, error_body, is_api_path

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponseBase

# ASGI callables, as Django's handlers type them.
_Scope = dict[str, Any]
_Receive = Callable[[], Awaitable[Mapping[str, Any]]]
_Send = Callable[[Mapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


class StaticFiles(ASGIStaticFilesHandler):
    """Static files; a path that tries to leave the static folders is a 404, not a 500."""

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        from django.core.exceptions import SuspiciousOperation
        from django.http import HttpResponseNotFound

        try:
            response = await super().get_response_async(request)
        except SuspiciousOperation:
            return HttpResponseNotFound("not found", content_type="text/plain")
        response["X-Content-Type-Options"] = "nosniff"  # static files skip the middleware
        return response


class BodyLimit:
    """Refuse a request body over `limit` bytes with a 413 before reading it.

    Django's ASGI handler reads the whole body (spooling it to disk) before any middleware
    or view runs, and file uploads are not bound by DATA_UPLOAD_MAX_MEMORY_SIZE: a 100 MB
    import was read and parsed in full. A declared Content-Length over the limit is refused
    at once; a body without one is counted as it arrives and cut off at the limit.
    """

    def __init__(self, app: _App, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(scope, send)
        seen = 0
        over = False
        started = False

        async def counted_receive() -> Mapping[str, Any]:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    over = True
                    return {"type": "http.disconnect"}  # Django stops reading: aborted
            return message

        async def tracked_send(message: Mapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if over and not started:
            await self._refuse(scope, send)

    async def _refuse(self, scope: _Scope, send: _Send) -> None:
        import json

        mb, rest = divmod(self.limit, 1024 * 1024)
        size = f"{mb} MB" if mb and not rest else f"{self.limit:,} bytes"
        message = f"the request body is larger than {size}"
        if is_api_path(scope.get("path", "")):
            error = error_body("invalid_request_error", "body_too_large", message)
        else:
            error = {"error": message}
        body = json.dumps(error).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class ApiFirst:
    """`/v1/...` to the API's handler (`endpoint.asgi.ApiHandler`), everything else to the
    simulator's."""

    def __init__(self, api: _App, app: _App) -> None:
        self.api = api
        self.app = app

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http" and is_api_path(scope.get("path", "")):
            return await self.api(scope, receive, send)
        return await self.app(scope, receive, send)


# Daphne serves no static files itself; the simulator's few (htmx, CSS) come from here.
_simulator = StaticFiles(get_asgi_application())
django_asgi_app = BodyLimit(
    ApiFirst(ApiHandler(), _simulator), limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE
)

from decks_app.routing import websocket_urlpatterns  # noqa: E402


class SameOrigin:
    """Websockets only from pages of this very server: the Origin's host must be allowed
    (ALLOWED_HOSTS) and its host and port must equal the Host the socket was opened on, so
    another local app (another port) or a rebinding DNS name cannot use the socket. With an
    access token (non-loopback serve), the token cookie is required too."""

    def __init__(self, app: Any) -> None:  # a channels router (its own ASGI typing)
        self.app = app

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        from urllib.parse import urlsplit

        from django.http.request import split_domain_port, validate_host

        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin", b"").decode("latin-1")
        host = headers.get(b"host", b"").decode("latin-1")
        parsed = urlsplit(origin) if origin else None
        ok = (
            parsed is not None
            and parsed.scheme in ("http", "https")
            and parsed.netloc.lower() == host.lower()
            and validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS)
        )
        if ok and getattr(settings, "GAMBIT_ACCESS_TOKEN", ""):
            from http.cookies import SimpleCookie

            from decks_app.web.middleware import TOKEN_COOKIE, token_ok

            cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
            ok = TOKEN_COOKIE in cookies and token_ok(cookies[TOKEN_COOKIE].value)
        if not ok:
            await receive()  # the handshake's websocket.connect, answered with a refusal (403)
            await send({"type": "websocket.close", "code": 4403})
            return
        return await self.app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # the ignore: channels-stubs want its own URL pattern type; these are Django's re_path
        "websocket": SameOrigin(URLRouter(websocket_urlpatterns)),  # type: ignore[arg-type]
    }
)
