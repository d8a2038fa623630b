from django.urls import re_path

from .consumers import BuildConsumer, NotFoundConsumer, SessionConsumer

websocket_urlpatterns = [
    re_path(r"^ws/sessions/(?P<session_id>[^/]+)/$", SessionConsumer.as_asgi()),
    re_path(r"^ws/build/$", BuildConsumer.as_asgi()),
    re_path(r"", NotFoundConsumer.as_asgi()),  # unrouted paths: a clean refusal
]
