"""Helpers shared by the view modules: JSON twins, 404 for bad ids, htmx fragments."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django_htmx.middleware import HtmxDetails


def wants_json(request: HttpRequest, fmt: str | None = None) -> bool:
    return fmt == "json" or request.GET.get("format") == "json"


class HtmxHttpRequest(HttpRequest):
    """A request as our views see it: `HtmxMiddleware` has set `request.htmx` (django-htmx's
    documented way to type it, https://django-htmx.readthedocs.io/en/latest/tips.html)."""

    htmx: HtmxDetails


def is_htmx(request: HttpRequest) -> bool:
    """For helpers that may also see a request the middleware never touched (an error
    handler's): views read `request.htmx`."""
    return bool(getattr(request, "htmx", False))


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx request for a page's partial: not a boosted link, and not htmx restoring a
    pushed URL it has no snapshot of (that one needs the whole page)."""
    htmx = getattr(request, "htmx", None)
    if not htmx:
        return False
    return not htmx.boosted and not htmx.history_restore_request


def json_response(data: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


class PageData:
    """One page's data, built once by its view (datasette's JsonDataView): `to_json()` is
    the page's JSON twin, and the template receives the object whole as `page` (with `tab`
    for the navigation). A live part of the page is rendered from the same object."""

    tab = ""
    # The named partial of the page's template that its live view sends over the socket
    # ("" for a page with no live part): render_page gives the page its digest.
    live_partial = ""

    def to_json(self) -> Any:
        raise NotImplementedError

    def context(self, **extra: Any) -> dict[str, Any]:
        workspace = getattr(self, "workspace", None)  # the top bar shows its root
        return {"page": self, "tab": self.tab, "workspace": workspace, **extra}


def render_page(
    request: HttpRequest,
    template: str,
    data: PageData,
    fmt: str | None = None,
    *,
    fragment: str | None = None,
) -> HttpResponse:
    """The page's JSON twin, or its template rendered from the same data (for htmx
    requests, the named partial `fragment` alone)."""
    if wants_json(request, fmt):
        return json_response(data.to_json())
    if fragment and wants_fragment(request):
        return render(request, f"{template}#{fragment}", data.context())
    extra = {}
    if data.live_partial:
        # The page says in its hello what it shows, so the socket's first answer swaps the
        # part only if it changed since: a swap on connect would take a field being typed in.
        extra["live_digest"] = live_digest(live_part(f"{template}#{data.live_partial}", data))
    return render(request, template, data.context(**extra))


def live_part(template: str, data: PageData) -> str:
    """A page's live part as an htmx out-of-band swap (sent over the session socket)."""
    return render_to_string(template, data.context(oob=True))


def live_digest(html: str) -> str:
    """What identifies a live part as rendered (sent by the page, kept by the socket)."""
    return hashlib.sha256(html.encode()).hexdigest()[:32]


def page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    data: Any,
    fmt: str | None = None,
    fragment: str | None = None,
) -> HttpResponse:
    """The HTML page, its JSON twin, or (for htmx requests) one named partial."""
    if wants_json(request, fmt):
        return json_response(data)
    if fragment and wants_fragment(request):
        return render(request, f"{template}#{fragment}", context)
    return render(request, template, context)


def error_response(
    request: HttpRequest,
    message: str,
    status: int = 400,
    fmt: str | None = None,
    *,
    code: str | None = None,
    back: str | None = None,
) -> HttpResponse:
    """One sentence: JSON `{"error", "code"?}`, an inline fragment for htmx, or a page with
    the app's navigation and a way back (`back`, else the referring page)."""
    if wants_json(request, fmt) or request.headers.get("Accept", "").startswith("application/json"):
        return json_response({"error": message, **({"code": code} if code else {})}, status=status)
    if is_htmx(request):  # a fragment the page shows inline
        return render(request, "web/error.html#error", {"message": message}, status=status)
    back = back or request.headers.get("Referer") or "/"
    return render(
        request,
        "web/error.html",
        {"message": message, "status": status, "back": back},
        status=status,
    )


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
