"""ASGI entry point: HTTP through Django, websockets through Channels (origin checked)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")

from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application


class StaticFiles(ASGIStaticFilesHandler):
    """Static files; a path that tries to leave the static folders is a 404, not a 500."""

    async def get_response_async(self, request):  # type: ignore[no-untyped-def]
        from django.core.exceptions import SuspiciousOperation
        from django.http import HttpResponseNotFound

        try:
            return await super().get_response_async(request)
        except SuspiciousOperation:
            return HttpResponseNotFound("not found", content_type="text/plain")


# Daphne serves no static files itself; the simulator's few (htmx, CSS) come from here.
django_asgi_app = StaticFiles(get_asgi_application())

from decks_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(URLRouter(websocket_urlpatterns)),
    }
)
