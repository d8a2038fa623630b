"""The websocket routes: each feature's consumers, and a clean refusal for any other path."""

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

from decks_app.building.consumers import BuildConsumer
from decks_app.sessions.consumers import SessionConsumer


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: refused at the handshake (403), no traceback."""

    async def connect(self) -> None:
        await self.close(code=4404)


# The ignores: django-stubs types re_path for HTTP views only; channels routes consumers with it.
# Named, so pages reverse them (`{% socket_url 'session_socket' session_id=... %}`, which
# reverses against this module as its urlconf).
websocket_urlpatterns = [
    re_path(
        r"^ws/sessions/(?P<session_id>[^/]+)/$",
        SessionConsumer.as_asgi(),  # type: ignore[arg-type]
        name="session_socket",
    ),
    re_path(r"^ws/build/$", BuildConsumer.as_asgi(), name="build_socket"),  # type: ignore[arg-type]
    re_path(r"", NotFoundConsumer.as_asgi()),  # type: ignore[arg-type]  # unrouted paths: a clean refusal
]
urlpatterns = websocket_urlpatterns
