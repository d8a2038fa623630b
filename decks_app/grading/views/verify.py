"""Verify: N scenario runs x M grader repeats, with live progress, metrics and charts.

- `GET /grade/verify/` (`.json`): the form for a root deck (its scenarios and graders) and
  the history of batches;
- `POST /grade/verify/run`: start a batch; redirects to its page;
- `GET /grade/verify/<run>/` (`.json`): progress while it runs, then metrics per grader,
  outliers, failures and charts;
- `POST /grade/verify/<run>/stop`: stop the batch;
- `GET /grade/verify/compare?before=<run>&after=<run>` (`.json`): two batches side by side,
  with the change in pass rate and mean and whether it exceeds the repeat noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from decks_app.grading import batch_compare
from decks_app.grading import verify as verify_service
from decks_app.models import Run
from decks_app.sessions import keyset
from decks_app.sessions.actions import stop_session
from decks_app.web.live import live_view
from decks_app.web.pages import (
    HtmxHttpRequest,
    PageData,
    error_response,
    json_response,
    live_part,
    render_page,
    wants_json,
)
from decks_app.web.routes import query_url
from decks_app.workspaces.served import current_workspace, list_decks


def _root_decks(workspace):
    decks = [d for d in list_decks(workspace) if not d.error]
    return [d for d in decks if verify_service.deck_refs(workspace, d.path)["scenarios"]]


@require_GET
def verify_tab(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    try:
        page = verify_service.batch_page(
            workspace, before=request.GET.get("before", ""), after=request.GET.get("after", "")
        )
    except keyset.BadCursor as exc:
        return error_response(request, str(exc), 400, fmt, back=reverse("grading:verify"))
    decks = _root_decks(workspace)
    wanted = request.GET.get("deck") or (decks[0].path if decks else "")
    if wanted and wanted not in {d.path for d in decks}:
        raise Http404("no deck with scenarios at that path")
    return render_page(
        request, "grading/verify.html", _verify_page(workspace, decks, wanted, page), fmt
    )


def _verify_page(workspace, decks, deck: str, page, **form: Any) -> VerifyPage:
    refs = verify_service.deck_refs(workspace, deck) if deck else {"scenarios": [], "graders": []}
    return VerifyPage(workspace=workspace, decks=decks, deck=deck, refs=refs, page=page, **form)


@dataclass
class VerifyPage(keyset.PageLinks, PageData):
    """The Verify form for a root deck (its scenarios and graders) and the batches so far."""

    workspace: Any
    decks: list[Any]
    deck: str
    refs: dict[str, list[dict[str, Any]]]
    page: keyset.Page  # of the batches, newest first
    # A form sent back with an error: what was wrong, and what the user had typed and ticked
    # (shown again as sent, so nothing is lost); None for a fresh form.
    form_error: str = ""
    sent: Any = None
    tab = "grade"
    defaults = verify_service.VerifyParams(scenarios=[], graders=[])

    def _sent_or(self, name: str, default: Any) -> Any:
        return default if self.sent is None else self.sent.get(name, "")

    @property
    def values(self) -> dict[str, Any]:
        """The form's fields: the defaults, or what was sent."""
        d = self.defaults
        return {
            "runs": self._sent_or("runs", d.runs),
            "repeats": self._sent_or("repeats", d.repeats),
            "concurrency": self._sent_or("concurrency", d.concurrency),
            "maxTurns": self._sent_or("maxTurns", d.max_turns),
            "threshold": self._sent_or("threshold", 0),
        }

    def _ticked(self, role: str, field: str) -> list[dict[str, Any]]:
        chosen = None if self.sent is None else set(self.sent.getlist(field))
        return [
            {**ref, "ticked": chosen is None or ref["path"] in chosen} for ref in self.refs[role]
        ]

    @property
    def scenario_choices(self) -> list[dict[str, Any]]:
        return self._ticked("scenarios", "scenario")

    @property
    def grader_choices(self) -> list[dict[str, Any]]:
        return self._ticked("graders", "grader")

    @cached_property
    def batches(self) -> list[dict[str, Any]]:
        return [verify_service.batch_dict(r) for r in self.page.rows]

    @property
    def keyset_page(self) -> keyset.Page:
        return self.page

    def page_url(self, fmt: str | None = None, **cursor: str | None) -> str:
        return query_url("grading:verify", ["json"] if fmt else [], deck=self.deck, **cursor)

    def to_json(self) -> dict[str, Any]:
        return {
            "deck": self.deck or None,
            **self.refs,
            "batches": self.batches,
            "page": self.page_json(),
        }


@require_POST
def verify_start(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = request.POST.get("deck", "")
    try:
        settings = verify_service.parse_settings(workspace, deck, request.POST)
        run = verify_service.start_verify(workspace, deck, settings)
    except verify_service.VerifyError as exc:
        decks = _root_decks(workspace)
        if wants_json(request) or request.htmx or deck not in {d.path for d in decks}:
            return error_response(request, str(exc), 400)
        # The form again, with the error above it and everything as the user sent it.
        page = _verify_page(
            workspace, decks, deck, verify_service.batch_page(workspace),
            form_error=str(exc), sent=request.POST,
        )  # fmt: skip
        response = render_page(request, "grading/verify.html", page)
        response.status_code = 400
        return response
    if wants_json(request):
        return json_response(verify_service.batch_dict(run), status=202)
    if request.htmx:
        return HttpResponseClientRedirect(reverse("grading:verify_batch", args=[run.id]))
    return redirect("grading:verify_batch", run_id=run.id)


def _batch_or_404(run_id: str) -> Run:
    run = verify_service.verify_run_or_none(run_id)
    if run is None:
        raise Http404("no such Verify batch")
    return run


BATCH_TEMPLATE = "grading/verify_batch.html"


@dataclass
class VerifyBatchPage(PageData):
    """One Verify batch: its record (`batch`, the twin), what its charts draw, and each
    grader's figures with its label and the sessions of its outliers (joined here, not in
    the template)."""

    live_partial = "batch"  # the part its live view sends

    run: Run
    batch: dict[str, Any]
    tab = "grade"

    @classmethod
    def of(cls, run: Run) -> VerifyBatchPage:
        return cls(run=run, batch=verify_service.batch_dict(run))

    @property
    def workspace(self) -> Any:
        return self.run.session.workspace

    @property
    def active(self) -> bool:
        return self.batch["status"] in ("queued", "running")

    @property
    def chart_data(self) -> dict[str, Any]:
        return _chart_data(self.batch)

    @property
    def graders(self) -> list[dict[str, Any]]:
        """Each grader's figures (once the batch ended), its label and its outliers' sessions."""
        labels = self.batch.get("graderLabels") or {}
        sessions = {r["id"]: r.get("session") for r in self.batch["runs"]}
        out = []
        for name, summary in self.batch["summaries"].items():
            outliers = [
                {
                    **o,
                    "session": next(
                        (sessions.get(link.get("run")) for link in o.get("links") or []), None
                    ),
                }
                for o in summary.get("outliers") or []
            ]
            out.append(
                {
                    "name": name,
                    "label": labels.get(name, name),
                    "summary": summary,
                    "outliers": outliers,
                    "failures": [(k, v) for k, v in (summary.get("failures") or {}).items() if v],
                }
            )
        return out

    @property
    def corrected(self) -> bool:
        """Whether any grader's pass rate was corrected for its errors (a column of its own)."""
        return any(s.get("correctedPassRate") for s in self.batch["summaries"].values())

    @property
    def matrix_graders(self) -> list[dict[str, str]]:
        labels = self.batch.get("graderLabels") or {}
        names = list(self.batch["matrix"]["graders"])
        names += [g for g in labels if g not in names]
        return [{"name": g, "label": labels.get(g, g)} for g in names]

    @property
    def matrix_rows(self) -> list[dict[str, Any]]:
        """Scenarios x graders: per scenario its tally per grader and its runs, each run with
        its cell per grader (None while its grades are still to come)."""
        graders = [g["name"] for g in self.matrix_graders]
        scenarios = {s["scenario"]: s for s in self.batch["matrix"]["scenarios"]}
        cells = {
            row["conversation"]: row for s in self.batch["matrix"]["scenarios"] for row in s["rows"]
        }
        grouped: dict[str, list[dict[str, Any]]] = {}
        for run in self.batch["runs"]:
            grouped.setdefault(
                run.get("scenarioLabel") or run.get("scenario") or "(none)", []
            ).append(run)
        out = []
        for scenario, runs in grouped.items():
            entry = scenarios.get(scenario) or {"verdict": "pending", "graders": {}}
            rows = []
            for run in runs:
                row = cells.get(run["id"]) or {"cells": {}, "verdict": None}
                verdict = row["verdict"] or _ungraded_verdict(run, graded=bool(graders))
                rows.append(
                    {
                        **run,
                        "verdict": verdict,
                        "cells": [row["cells"].get(g) for g in graders],
                    }
                )
            out.append(
                {
                    "scenario": scenario,
                    "verdict": entry["verdict"],
                    "tallies": [entry["graders"].get(g) for g in graders],
                    "rows": rows,
                }
            )
        return out

    @cached_property
    def comparable(self) -> tuple[list[Run], int]:
        """The newest completed batches it can be compared with, and how many there are."""
        return verify_service.comparable_batches(self.run.session.workspace, self.run)

    @property
    def others(self) -> list[Run]:
        return self.comparable[0]

    @property
    def others_total(self) -> int:
        return self.comparable[1]

    def to_json(self) -> dict[str, Any]:
        return self.batch


@require_GET
def verify_batch(request: HtmxHttpRequest, run_id: str, fmt: str | None = None) -> HttpResponse:
    data = VerifyBatchPage.of(_batch_or_404(run_id))
    return render_page(request, BATCH_TEMPLATE, data, fmt, fragment="batch")


@live_view("verify_batch")
def live_batch(session_id: str, run_id: str) -> str:
    """The batch's progress and results, for its session's socket (decks_app.web.live)."""
    run = verify_service.verify_run_or_none(run_id)
    if run is None or run.session_id != session_id:
        return ""
    return live_part(BATCH_TEMPLATE + "#batch", VerifyBatchPage.of(run))


def _ungraded_verdict(run: dict[str, Any], *, graded: bool) -> str:
    """A run without grades (yet): failed ("not_run" for its graders), still to be graded
    ("pending"), or, in a batch without graders, simply run ("done")."""
    if run.get("status") == "failed":
        return "not_run"
    return "pending" if graded else "done"


def _chart_data(batch: dict) -> dict:
    """What the charts draw: each grader's histogram (the core's bins, the threshold an
    edge), per-scenario spread, and per-run cost."""
    labels = batch.get("graderLabels") or {}
    bins: list[dict[str, Any]] = []
    histogram: dict[str, list[int]] = {}
    for name, summary in batch["summaries"].items():
        found = summary.get("histogram") or []
        if len(found) > len(bins):
            bins = [{k: b[k] for k in ("low", "high", "label", "passes")} for b in found]
        histogram[labels.get(name, name)] = [b["count"] for b in found]
    spread = {
        labels.get(name, name): {
            scenario: {"mean": s.get("mean"), "min": s.get("min"), "max": s.get("max")}
            for scenario, s in (summary.get("perScenario") or {}).items()
        }
        for name, summary in batch["summaries"].items()
    }
    runs = [
        {
            "label": f"{r.get('scenarioLabel') or 'run'} #{r.get('index')}",
            "durationMs": r.get("durationMs"),
            "tokens": r.get("tokens"),
            "cost": r.get("cost"),
            "status": r.get("status"),
        }
        for r in batch["runs"]
    ]
    return {"bins": bins, "histogram": histogram, "spread": spread, "runs": runs}


@require_POST
def verify_stop(request: HtmxHttpRequest, run_id: str) -> HttpResponse:
    run = _batch_or_404(run_id)
    stopped = stop_session(run.session)
    if wants_json(request):
        return json_response({"stopped": stopped})
    return redirect("grading:verify_batch", run_id=run.id)


@require_GET
def verify_compare(request: HtmxHttpRequest, fmt: str | None = None) -> HttpResponse:
    back = reverse("grading:verify")
    wanted = {side: request.GET.get(side, "").strip() for side in ("before", "after")}
    missing = [side for side, run_id in wanted.items() if not run_id]
    if missing:
        return error_response(
            request,
            f"choose two batches to compare ({' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing): open a "
            "batch and pick the other from its Compare form",
            400,
            fmt=fmt,
            back=back,
        )
    if wanted["before"] == wanted["after"]:
        return error_response(
            request, "that is the same batch twice: choose two different batches", 400, fmt=fmt,
            back=back,
        )  # fmt: skip
    before = _batch_or_404(wanted["before"])
    after = _batch_or_404(wanted["after"])
    if before.status != "completed" or after.status != "completed":
        return error_response(
            request, "both batches must have completed to be compared", 400, fmt=fmt
        )
    data = VerifyComparePage(
        before=before, after=after, comparison=batch_compare.comparison(before, after)
    )
    return render_page(request, "grading/verify_compare.html", data, fmt)


@dataclass
class VerifyComparePage(PageData):
    """Two completed batches side by side: each grader's change and whether it is beyond
    the noise the repeats measure."""

    before: Run
    after: Run
    comparison: dict[str, Any]
    tab = "grade"

    @property
    def workspace(self) -> Any:
        return self.after.session.workspace

    @property
    def graders(self) -> dict[str, Any]:
        return self.comparison["graders"]

    @property
    def scenario_rows(self) -> list[dict[str, Any]]:
        """Per scenario, the before and after tallies in the graders' column order."""
        order = list(self.graders)
        return [
            {
                "scenario": s["scenario"],
                "cells": [s["graders"].get(g) for g in order],
            }
            for s in self.comparison["scenarios"]
        ]

    def to_json(self) -> dict[str, Any]:
        return self.comparison
