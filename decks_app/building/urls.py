"""The Build tab: the deck editor and its assistant.

Pages are `page_route`s: `/build/deck` and its twin `/build/deck.json` under one name."""

from django.urls import path

from decks_app.building import views as build
from decks_app.web.routes import page_route

app_name = "building"

urlpatterns = [
    page_route("build", build.build_tab, "build"),
    page_route("build/deck", build.build_deck, "build_deck"),
    page_route("build/file", build.build_file, "build_file"),
    path("build/save", build.build_save, name="build_save"),
    path("build/validate", build.build_validate, name="build_validate"),
    path("build/new", build.build_new, name="build_new"),
    path("build/scaffold", build.build_scaffold, name="build_scaffold"),
    page_route("build/assistant", build.assistant_state, "assistant"),
    path("build/assistant/send", build.assistant_send, name="assistant_send"),
    path("build/assistant/undo", build.assistant_undo, name="assistant_undo"),
    path("build/delete", build.build_delete, name="build_delete"),
]
