"""The app shell: `/` goes to the Test tab; the top bar names the served folder on every page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return redirect("sessions:sessions")


def top_bar(request: HttpRequest) -> dict[str, Any]:
    """Template context for base.html's top bar: the served folder, on pages whose data names
    no workspace too (a session, an error page)."""
    root = getattr(settings, "GAMBIT_WORKSPACE", "")
    return {"served_root": str(Path(root).resolve()) if root else ""}
