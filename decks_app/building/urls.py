"""The Build tab: the deck editor and its assistant."""

from django.urls import path, re_path

from decks_app.building import views as build

app_name = "building"

urlpatterns = [
    path("build/", build.build_tab, name="build"),
    re_path(r"^build\.(?P<fmt>json)$", build.build_tab),
    path("build/deck", build.build_deck, name="build_deck"),
    re_path(r"^build/deck\.(?P<fmt>json)$", build.build_deck),
    path("build/file", build.build_file, name="build_file"),
    re_path(r"^build/file\.(?P<fmt>json)$", build.build_file),
    path("build/save", build.build_save, name="build_save"),
    path("build/validate", build.build_validate, name="build_validate"),
    path("build/new", build.build_new, name="build_new"),
    path("build/scaffold", build.build_scaffold, name="build_scaffold"),
    path("build/assistant.json", build.assistant_state, name="assistant_state"),
    path("build/assistant/send", build.assistant_send, name="assistant_send"),
    path("build/assistant/undo", build.assistant_undo, name="assistant_undo"),
    path("build/delete", build.build_delete, name="build_delete"),
]
