"""Toasts: short confirmations ("Saved.", "Deck created.") shown in a corner of the page.

One mechanism, Django's messages framework: a view calls `messages.success(request, text)`
(or `.info`, `.warning`, `.error`). A full page shows the pending messages in base.html's
`#toasts` region; an htmx response (which replaces a fragment, not the page) gets them
appended to that region out of band by the middleware below. Either way they are consumed
once. static/decks_app/toasts.js dismisses them.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.messages.storage.base import BaseStorage
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string


def toasts(get_response: Callable[[HttpRequest], HttpResponse]):
    """Append the request's unread messages to an htmx HTML response as an out-of-band swap
    into `#toasts`. Listed right after MessageMiddleware, so it runs before the messages
    are stored for the next request, and outside HtmxMiddleware, whose `request.htmx` it
    reads on the way out."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if not getattr(request, "htmx", False) or request.headers.get("HX-Boosted"):
            return response
        if response.streaming or response.status_code in (204, 301, 302, 303, 307, 308):
            return response
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        if any(response.has_header(h) for h in ("HX-Redirect", "HX-Location", "HX-Refresh")):
            return response  # the messages wait for the page htmx goes to
        storage = messages.get_messages(request)
        if not isinstance(storage, BaseStorage) or storage.used or not len(storage):
            return response
        response.content += render_to_string(
            "web/toasts.html#oob", {"messages": storage}, request=request
        ).encode(response.charset)
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))
        return response

    return middleware
