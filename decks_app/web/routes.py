"""One route per page: the page and its JSON twin share a pattern (see docs/decisions.md,
"Pages and URLs").

`page_route("test/(?P<session_id>ID)", view, "session")` matches `/test/<id>` and
`/test/<id>.json` (datasette's `(\\.(?P<format>json))?$`, here `fmt`); Django's reverse()
gives the page, or with `fmt="json"` the twin. Canonical URLs have no trailing slash;
the old ones with a slash redirect (`without_trailing_slash`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    QueryDict,
)
from django.urls import Resolver404, URLPattern, re_path, resolve, reverse

# An id in a path: anything but a slash or a dot (the dot starts the `.json` suffix).
ID = r"[^/.]+"
# A trace event's id (a database key).
EVENT_ID = r"[0-9]{1,18}"
TWIN = r"(?:\.(?P<fmt>json))?$"


def page_route(route: str, view: Callable[..., Any], name: str) -> URLPattern:
    """The page at `route` and its twin at `route.json`, under one name."""
    return re_path(rf"^{route}{TWIN}", view, name=name)


def json_route(route: str, view: Callable[..., Any], name: str) -> URLPattern:
    """A JSON-only resource at `route.json` (no page of its own)."""
    return re_path(rf"^{route}\.json$", view, name=name)


def query_url(viewname: str, args: tuple[Any, ...] | list[Any] = (), **query: Any) -> str:
    """reverse(viewname, args) with `query` as the query string, every value percent-encoded
    whatever it holds (spaces, `&`, `#`, non-ASCII); empty values are left out."""
    url = reverse(viewname, args=list(args))
    pairs = QueryDict(mutable=True)
    for key, value in query.items():
        if value not in (None, ""):
            pairs[key] = str(value)
    # A slash stays readable (`?path=support/PROMPT.md`); everything else is encoded.
    return f"{url}?{pairs.urlencode(safe='/')}" if pairs else url


class PermanentRedirectKeepingMethod(HttpResponsePermanentRedirect):
    status_code = 308


def without_trailing_slash(request: HttpRequest, path: str) -> HttpResponse:
    """An old URL with a trailing slash (`/test/<id>/`, `/grade/verify/`) moved to the same
    path without it, query string kept: 301 for GET and HEAD, 308 (method kept) otherwise.
    Only a path that exists without the slash is redirected; anything else is a 404."""
    target = "/" + path
    try:
        match = resolve(target)
    except Resolver404:
        raise Http404("no such page") from None
    if match.url_name == "unknown_url":  # the last route, which answers any other path
        raise Http404("no such page")
    query = request.META.get("QUERY_STRING", "")
    location = target + (f"?{query}" if query else "")
    if request.method in ("GET", "HEAD"):
        return HttpResponsePermanentRedirect(location)
    return PermanentRedirectKeepingMethod(location)
