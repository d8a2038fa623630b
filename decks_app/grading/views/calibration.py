"""`GET /grade/calibration` (`.json`): how far each grader agrees with the human ratings."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from decks_app.grading.calibration import workspace_calibrations
from decks_app.models import Workspace
from decks_app.web.pages import PageData, render_page
from decks_app.workspaces.served import current_workspace

SCALE = list(range(-3, 4))


@dataclass
class CalibrationPage(PageData):
    """Each grader version's figures against the human ratings (the twin: `graders`), split
    into the current versions and the history, each with its confusion matrix laid out."""

    workspace: Workspace
    calibrations: list[Any]
    tab = "grade"
    scale = SCALE

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for c in self.calibrations:
            figures = c.to_json()
            matrix = [
                {"human": human, "cells": list(zip(SCALE, row, strict=True))}
                for human, row in zip(SCALE, figures["confusion"], strict=True)
            ]
            rows.append({"c": c, "f": figures, "matrix": matrix})
        return rows

    @property
    def current(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["c"].current]

    @property
    def history(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r["c"].current]

    def to_json(self) -> dict[str, Any]:
        return {"graders": [r["f"] for r in self.rows]}


@require_GET
def calibration_page(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    data = CalibrationPage(workspace=workspace, calibrations=workspace_calibrations(workspace))
    return render_page(request, "grading/calibration.html", data, fmt)
