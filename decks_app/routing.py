from django.urls import re_path

from .consumers import BuildConsumer, NotFoundConsumer, SessionConsumer

# The ignores: django-stubs types re_path for HTTP views only; channels routes consumers with it.
websocket_urlpatterns = [
    re_path(r"^ws/sessions/(?P<session_id>[^/]+)/$", SessionConsumer.as_asgi()),  # type: ignore[arg-type]
    re_path(r"^ws/build/$", BuildConsumer.as_asgi()),  # type: ignore[arg-type]
    re_path(r"", NotFoundConsumer.as_asgi()),  # type: ignore[arg-type]  # unrouted paths: a clean refusal
]
