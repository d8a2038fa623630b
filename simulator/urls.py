"""The project's routes: each feature package brings its own `urls.py` (with an `app_name`)."""

from django.contrib import admin
from django.urls import include, path

from decks_app.web import shell

urlpatterns = [
    path("", shell.index, name="index"),
    path("", include("decks_app.sessions.urls")),
    path("", include("decks_app.grading.urls")),
    path("", include("decks_app.building.urls")),
    path("", include("endpoint.urls")),
    path("admin/", admin.site.urls),
]

handler400 = "decks_app.web.pages.bad_request"
handler404 = "decks_app.web.pages.not_found"
handler500 = "decks_app.web.pages.server_error"
