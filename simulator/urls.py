"""The project's routes: each feature package brings its own `urls.py` (with an `app_name`)."""

from django.contrib import admin
from django.urls import include, path, re_path

from decks_app.web import errors, shell
from decks_app.web.routes import without_trailing_slash

urlpatterns = [
    path("", shell.index, name="index"),
    path("", include("decks_app.sessions.urls")),
    path("", include("decks_app.grading.urls")),
    path("", include("decks_app.building.urls")),
    path("", include("endpoint.urls")),
    path("admin/", admin.site.urls),
    # The pages' old URLs ended in a slash (`/test/<id>/`): they redirect to the canonical
    # ones without it (docs/decisions.md, "Pages and URLs").
    re_path(r"^(?P<path>(?:test|grade|build)(?:/.*)?)/$", without_trailing_slash),
    # Last: any other path is our 404 page, never Django's list of routes (even with DEBUG).
    re_path(r"^", errors.unknown_url, name="unknown_url"),
]

handler400 = "decks_app.web.errors.bad_request"
handler403 = "decks_app.web.errors.permission_denied"
handler404 = "decks_app.web.errors.not_found"
handler500 = "decks_app.web.errors.server_error"
