"""The app shell: `/` goes to the Test tab; Build says what is coming next."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from decks_app.services import providers
from decks_app.services.workspaces import current_workspace, list_decks
from decks_app.views.base import page

COMING = {
    "build": "Build: browse and edit the workspace's decks with an assistant. Coming next.",
}


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return redirect("sessions")


@require_GET
def tab(request: HttpRequest, tab: str, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    decks = list_decks(workspace)
    data = {
        "tab": tab,
        "status": "coming next",
        "message": COMING[tab],
        "workspace": {"id": workspace.id, "root": workspace.root},
        "decks": [d.to_dict() for d in decks],
        "providers": providers.configured_providers(),
    }
    ctx = {"tab": tab, "message": COMING[tab], "decks": decks, "workspace": workspace}
    return page(request, "decks_app/coming.html", ctx, data=data, fmt=fmt)
