"""The error pages (400, 403, 404, 500): one sentence and the way on, never internals.

Django's own 404 page lists every URL pattern it tried (`admin/` among them), and a
`Resolver404`'s text is that list too; its CSRF and debug pages name settings and files.
Here every error is one sentence of ours (the message of an `Http404` our views raise, which
says what is missing; otherwise a fixed sentence per status), as a page with the tabs and a
way back, as JSON for the JSON twins, or as the OpenAI-style error object on /v1. The
`friendly_errors` middleware answers for the 4xx exceptions a view raises even when
`GAMBIT_DEBUG=1` turns Django's debug pages on, and `unknown_url` (the last route) answers for
a path no route matches, so `gambit serve` never shows the technical 404 (docs/simulator.md,
"Error pages").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

SENTENCES = {
    400: "The request could not be read.",
    403: "This action is not allowed.",
    404: "There is no page at this address.",
    500: "Something went wrong on our side; it is logged.",
}
V1_TYPES = {
    400: ("invalid_request_error", "bad_request"),
    403: ("permission_error", "forbidden"),
    404: ("not_found", "not_found"),
    500: ("server_error", "server_error"),
}


def _message(status: int, exception: BaseException | None) -> str:
    """Our own words: an Http404's message when a view of ours wrote one (a plain string,
    "no such session"), never a Resolver404's (the list of patterns tried) nor another
    exception's."""
    if status == 404 and type(exception) is Http404 and exception.args:
        text = exception.args[0]
        if isinstance(text, str) and text and len(text) <= 200:
            return text
    if status == 400 and _not_utf8(exception):
        return "the request must be UTF-8 text; this one is not"
    return SENTENCES[status]


def _not_utf8(exception: BaseException | None) -> bool:
    """A body or query Django could not decode (it says which encoding it expected)."""
    seen: set[int] = set()
    while exception is not None and id(exception) not in seen:
        if isinstance(exception, UnicodeDecodeError) or "UTF-8" in str(exception):
            return True
        seen.add(id(exception))
        exception = exception.__cause__ or exception.__context__
    return False


def _sentence(message: str) -> str:
    """A message as the page shows it: capitalised, with its full stop."""
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


def _wants_json(request: HttpRequest) -> bool:
    return (
        request.path.endswith(".json")
        or request.GET.get("format") == "json"
        or request.headers.get("Accept", "").startswith("application/json")
    )


def error_page(request: HttpRequest, status: int, exception: BaseException | None = None):
    message = _message(status, exception)
    if request.path.startswith("/v1/"):
        kind, code = V1_TYPES[status]
        error = {"type": kind, "code": code, "param": None, "message": message}
        return JsonResponse({"error": error}, status=status)
    if _wants_json(request):
        return JsonResponse({"error": message}, status=status)
    message = _sentence(message)
    if getattr(request, "htmx", False):  # shown inline by the page that asked
        return render(request, "web/error.html#error", {"message": message}, status=status)
    ctx = {"message": message, "status": status, "back": "/", "path": request.path}
    return render(request, "web/error.html", ctx, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 for a request Django cannot even parse (a form that is not UTF-8, a broken
    multipart body); never reads the body again."""
    return error_page(request, 400, exception)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(request, 403, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form sent without its CSRF token (an old tab, cookies blocked): say what to do."""
    response = error_page(request, 403)
    if not request.path.startswith("/v1/") and not _wants_json(request):
        ctx = {
            "message": "This form has expired: reload the page and send it again.",
            "status": 403,
            "back": request.headers.get("Referer") or "/",
        }
        return render(request, "web/error.html", ctx, status=403)
    return response


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_page(request, 404, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    return error_page(request, 500)


def unknown_url(request: HttpRequest, **_: Any) -> HttpResponse:
    """The last route: a path no other route matches (answered here rather than by
    Django's resolver, whose debug 404 page lists every route)."""
    return error_page(request, 404)


def friendly_errors(get_response: Callable[[HttpRequest], HttpResponse]):
    """Our page for a 4xx exception raised by a view, whatever `DEBUG` says."""

    def middleware(request: HttpRequest) -> HttpResponse:
        return get_response(request)

    def process_exception(request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return error_page(request, 404, exception)
        if isinstance(exception, PermissionDenied):
            return error_page(request, 403, exception)
        if isinstance(exception, SuspiciousOperation):  # logged as Django logs it
            name = f"django.security.{type(exception).__name__}"
            logging.getLogger(name).error(str(exception))
            return error_page(request, 400, exception)
        if isinstance(exception, BadRequest):
            return error_page(request, 400, exception)
        return None  # a 500: Django logs it and calls server_error (or, with DEBUG, its page)

    middleware.process_exception = process_exception  # type: ignore[attr-defined]
    return middleware
