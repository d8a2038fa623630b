"""`GET /grade/calibration` (`.json`): which grader to trust for what, how sure that is, and
what to rate next.

The twin is the report of `decks_app.grading.calibration` as it is: per grader version every
figure with its 95% interval, the evidence rule, the verdict and the pairs used (`pairsUsed`,
so anyone can recompute every figure), then drift, agreement between graders and between human
raters. The page lays the same report out: verdicts first, then each grader's figures (or "too
few ratings to judge" below the minimum evidence), its disagreements grouped by scenario and by
score region, its kappa over versions as a chart (Chart.js, with the table it is drawn from),
the agreement matrix, the raters' alpha and the bias probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.views.decorators.http import require_GET

from decks_app.grading.calibration import workspace_report_async
from decks_app.models import Workspace
from decks_app.web.pages import HtmxHttpRequest, PageData, render_page
from decks_app.workspaces.served import current_workspace

SCALE = list(range(-3, 4))
FIGURES = (
    ("exact", "Exact agreement", True),
    ("withinOne", "Within 1", True),
    ("kappa", "Quadratic-weighted kappa", False),
    ("spearman", "Spearman", False),
    ("bias", "Bias (grader − human)", False),
)
GROUP_TITLES = {"scenario": "By scenario", "scoreRegion": "By human score region"}


def figure_text(
    value: float | None, interval: dict[str, Any] | None, percent: bool, conversations: int = 2
) -> str:
    """The figure as shown, "0.62 [0.48, 0.74]" or "62% [48%, 74%]"; "undefined" when it
    cannot be computed; a figure without an interval says why."""
    if value is None:
        return "undefined"
    spec = ".0%" if percent else "+.2f"
    text = format(value, spec)
    if interval:
        text += f" [{interval['low']:{spec}}, {interval['high']:{spec}}]"
    elif conversations < 2:
        text += " (no interval: fewer than two conversations)"
    else:
        text += " (no interval: too few varied pairs)"
    return text


def _figures(entry: dict[str, Any]) -> list[dict[str, str]]:
    out = [
        {
            "key": key,
            "name": name,
            "text": figure_text(
                entry[key], entry["intervals"].get(key), percent, entry["conversations"]
            ),
        }
        for key, name, percent in FIGURES
    ]
    for key in ("sensitivity", "specificity"):
        estimate = entry[key]
        out.append(
            {
                "key": key,
                "name": f"{key.capitalize()} at the threshold {entry['threshold']:+g}",
                "text": figure_text(estimate["value"], estimate["interval"], True),
            }
        )
    return out


def _groups(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Disagreement groups with their disagreements (each linked to its conversation)."""
    out = []
    for key, groups in entry["disagreementGroups"].items():
        shown = []
        for group in groups:
            if not group["disagreements"]:
                continue
            members = [d for d in entry["disagreements"] if str(d.get(key)) == group["value"]]
            shown.append({**group, "members": members[:20]})
        if shown:
            out.append({"key": key, "title": GROUP_TITLES.get(key, f"By {key}"), "groups": shown})
    return out


def _drift_chart(grader: str, points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "grader": grader,
        "labels": [(p["time"] or "")[:16].replace("T", " ") or p["version"] for p in points],
        "versions": [p["version"] for p in points],
        "kappa": [p["kappa"]["value"] for p in points],
        "low": [(p["kappa"]["interval"] or {}).get("low") for p in points],
        "high": [(p["kappa"]["interval"] or {}).get("high") for p in points],
        "worse": [p["worse"] for p in points],
    }


@dataclass
class CalibrationPage(PageData):
    workspace: Workspace
    report: dict[str, Any]
    tab = "grade"
    scale = SCALE

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for entry in self.report["graders"]:
            matrix = [
                {"human": human, "cells": list(zip(SCALE, row, strict=True))}
                for human, row in zip(SCALE, entry["confusion"], strict=True)
            ]
            rows.append(
                {
                    "f": entry,
                    "matrix": matrix,
                    "figures": _figures(entry),
                    "groups": _groups(entry),
                    "drift": self.report["drift"].get(entry["grader"])
                    if entry["current"]
                    else None,
                }
            )
        return rows

    @property
    def current(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["f"]["current"]]

    @property
    def history(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r["f"]["current"]]

    @property
    def charts(self) -> list[dict[str, Any]]:
        return [_drift_chart(grader, points) for grader, points in self.report["drift"].items()]

    @property
    def agreement(self) -> list[dict[str, Any]]:
        data = self.report["graderAgreement"]
        return [
            {"label": label, "cells": list(zip(data["labels"], row, strict=True))}
            for label, row in zip(data["labels"], data["matrix"], strict=True)
        ]

    @property
    def alpha_text(self) -> str:
        alpha = self.report["raters"]["alpha"]
        return figure_text(alpha["value"], alpha["interval"], False)

    def to_json(self) -> dict[str, Any]:
        return self.report


@require_GET
async def calibration_page(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    """Async: the figures are awaited from the calibration thread (cached by their inputs'
    hash), so neither the event loop nor Django's thread for sync views waits on a bootstrap."""
    workspace = await sync_to_async(current_workspace)()
    data = CalibrationPage(workspace=workspace, report=await workspace_report_async(workspace))
    return await sync_to_async(render_page)(request, "grading/calibration.html", data, fmt)
