"""Exposure guards (docs/simulator.md, "Security defaults"): an access token when the
simulator listens beyond loopback, and the admin only once a user exists to log in with."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound, HttpResponseRedirect

TOKEN_COOKIE = "gambit_token"


def token_ok(candidate: str | None) -> bool:
    expected = getattr(settings, "GAMBIT_ACCESS_TOKEN", "")
    if not expected or not candidate:
        return False
    return hmac.compare_digest(candidate, expected)


def access_token(get_response: Callable[[HttpRequest], HttpResponse]):
    """With `GAMBIT_ACCESS_TOKEN` set (a non-loopback `gambit serve`), every page needs it:
    the link printed at start-up carries `?token=`, which becomes an HttpOnly cookie. /v1/*
    keeps its own API keys."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if not getattr(settings, "GAMBIT_ACCESS_TOKEN", "") or request.path.startswith("/v1/"):
            return get_response(request)
        given = request.GET.get("token")
        if given is not None:
            if not token_ok(given):
                return _refused(request)
            rest = {k: v for k, v in request.GET.items() if k != "token"}
            target = request.path + (f"?{urlencode(rest)}" if rest else "")
            response = HttpResponseRedirect(target)
            response.set_cookie(
                TOKEN_COOKIE, given, httponly=True, samesite="Strict", max_age=30 * 86400
            )
            return response
        if token_ok(request.COOKIES.get(TOKEN_COOKIE)):
            return get_response(request)
        return _refused(request)

    return middleware


def _refused(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        "This simulator needs its access token: open the link that `gambit serve` printed "
        "(it ends in ?token=...).\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )


def admin_needs_a_user(get_response: Callable[[HttpRequest], HttpResponse]):
    """/admin/ is a 404 until someone creates a user (`manage.py createsuperuser`)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/admin/"):
            from django.contrib.auth import get_user_model

            if not get_user_model().objects.exists():
                return HttpResponseNotFound("not found", content_type="text/plain")
        return get_response(request)

    return middleware
