"""The API's own ASGI handler: `/v1/*` is served by Django's handler without the browser
middleware chain (the project's `simulator/asgi.py` routes the paths to it).

The API needs none of that chain (no sessions, CSRF, messages or templates: its views check
API keys and answer JSON), and every `MiddlewareMixin` runs its `process_request` and
`process_response` through the request's sync thread: a dozen thread hand-offs before the
first byte, each a scheduling delay on a busy machine (most of the time to first byte the
endpoint added in bench/bench_endpoint.py; docs/decisions.md, "Time to first byte"). What
the API does need of it is here: the Host check (ALLOWED_HOSTS), `nosniff`, and a structured
error (docs/endpoint.md, "Errors") instead of a page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.handlers.asgi import ASGIHandler

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponseBase, JsonResponse

API_PREFIX = "/v1"


def is_api_path(path: str) -> bool:
    """Whether a request path is the API's (`/v1` and below)."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def error_body(type_: str, code: str, message: str) -> dict[str, Any]:
    """The API's error envelope, `{"error": {type, code, param, message}}`."""
    return {"error": {"type": type_, "code": code, "param": None, "message": message}}


class ApiHandler(ASGIHandler):
    """`/v1/*`: Django's handler without the browser middleware chain (see the module doc)."""

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Callable[..., Any]] = []
        self._template_response_middleware: list[Callable[..., Any]] = []
        self._exception_middleware: list[Callable[..., Any]] = []
        self._middleware_chain = self._guarded

    async def _guarded(self, request: HttpRequest) -> HttpResponseBase:
        from django.core.exceptions import PermissionDenied, SuspiciousOperation
        from django.http import Http404

        try:
            request.get_host()  # validates the Host header against ALLOWED_HOSTS
            # the ignore: BaseHandler._get_response_async is private, absent from django-stubs
            response = await self._get_response_async(request)  # type: ignore[attr-defined]
        except Http404:
            response = _api_error(404, "not_found", "not_found", f"no endpoint {request.path}")
        except PermissionDenied:
            response = _api_error(403, "invalid_request_error", "forbidden", "forbidden")
        except SuspiciousOperation as exc:  # a bad Host header, among others
            response = _api_error(400, "invalid_request_error", "bad_request", str(exc)[:200])
        except Exception:
            logging.getLogger("django.request").exception("%s failed", request.path)
            response = _api_error(500, "server_error", "server_error", "internal error")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


def _api_error(status: int, type_: str, code: str, message: str) -> JsonResponse:
    from django.http import JsonResponse

    return JsonResponse(error_body(type_, code, message), status=status)
