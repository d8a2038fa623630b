"""`GET /grade/calibration/` (`.json`): how far each grader agrees with the human ratings."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.grading.calibration import workspace_calibrations
from decks_app.web.pages import page
from decks_app.workspaces.served import current_workspace

SCALE = list(range(-3, 4))


@require_GET
def calibration_page(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    calibrations = workspace_calibrations(workspace)
    data = {"graders": [c.to_json() for c in calibrations]}
    rows: list[dict[str, Any]] = []
    for c in calibrations:
        figures = c.to_json()
        matrix = [
            {"human": human, "cells": list(zip(SCALE, row, strict=True))}
            for human, row in zip(SCALE, figures["confusion"], strict=True)
        ]
        rows.append({"c": c, "f": figures, "matrix": matrix})
    ctx = {
        "tab": "grade",
        "workspace": workspace,
        "current": [r for r in rows if r["c"].current],
        "history": [r for r in rows if not r["c"].current],
        "scale": SCALE,
    }
    return page(request, "grading/calibration.html", ctx, data=data, fmt=fmt)
