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

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from decks_app.grading import verify as verify_service
from decks_app.models import Run
from decks_app.sessions.actions import stop_session
from decks_app.web.pages import error_response, is_htmx, json_response, page, wants_json
from decks_app.workspaces.served import current_workspace, list_decks


def _root_decks(workspace):
    decks = [d for d in list_decks(workspace) if not d.error]
    return [d for d in decks if verify_service.deck_refs(workspace, d.path)["scenarios"]]


@require_GET
def verify_tab(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    workspace = current_workspace()
    decks = _root_decks(workspace)
    wanted = request.GET.get("deck") or (decks[0].path if decks else "")
    if wanted and wanted not in {d.path for d in decks}:
        raise Http404("no deck with scenarios at that path")
    refs = (
        verify_service.deck_refs(workspace, wanted) if wanted else {"scenarios": [], "graders": []}
    )
    history = [verify_service.batch_dict(r) for r in verify_service.batches(workspace)]
    data = {"deck": wanted or None, **refs, "batches": history}
    ctx = {
        "tab": "grade",
        "workspace": workspace,
        "decks": decks,
        "deck": wanted,
        "refs": refs,
        "batches": history,
        "defaults": verify_service.VerifyParams(scenarios=[], graders=[]),
    }
    return page(request, "grading/verify.html", ctx, data=data, fmt=fmt)


@require_POST
def verify_start(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace()
    deck = request.POST.get("deck", "")
    try:
        settings = verify_service.parse_settings(workspace, deck, request.POST)
        run = verify_service.start_verify(workspace, deck, settings)
    except verify_service.VerifyError as exc:
        return error_response(request, str(exc), 400)
    if wants_json(request):
        return json_response(verify_service.batch_dict(run), status=202)
    target = f"/grade/verify/{run.id}/"
    if is_htmx(request):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = target
        return response
    return redirect(target)


def _batch_or_404(run_id: str) -> Run:
    run = verify_service.verify_run_or_none(run_id)
    if run is None:
        raise Http404("no such Verify batch")
    return run


@require_GET
def verify_batch(request: HttpRequest, run_id: str, fmt: str | None = None) -> HttpResponse:
    run = _batch_or_404(run_id)
    data = verify_service.batch_dict(run)
    others = [
        b
        for b in verify_service.batches(run.session.workspace)
        if b.id != run.id and b.status == "completed"
    ]
    ctx = {
        "tab": "grade",
        "workspace": run.session.workspace,
        "run": run,
        "batch": data,
        "others": others,
        "chart_data": _chart_data(data),
    }
    return page(request, "grading/verify_batch.html", ctx, data=data, fmt=fmt, fragment="batch")


def _chart_data(batch: dict) -> dict:
    """What the charts draw: scores per grader, per-scenario spread, and per-run cost."""
    labels = {g["grader"]: g.get("graderLabel") or g["grader"] for g in batch["grades"]}
    scores: dict[str, list[float]] = {}
    for grade in batch["grades"]:
        if isinstance(grade.get("score"), int | float):
            scores.setdefault(labels[grade["grader"]], []).append(grade["score"])
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
    return {"scores": scores, "spread": spread, "runs": runs}


@require_POST
def verify_stop(request: HttpRequest, run_id: str) -> HttpResponse:
    run = _batch_or_404(run_id)
    stopped = stop_session(run.session)
    if wants_json(request):
        return json_response({"stopped": stopped})
    return redirect(f"/grade/verify/{run.id}/")


@require_GET
def verify_compare(request: HttpRequest, fmt: str | None = None) -> HttpResponse:
    before = _batch_or_404(request.GET.get("before", ""))
    after = _batch_or_404(request.GET.get("after", ""))
    if before.status != "completed" or after.status != "completed":
        return error_response(
            request, "both batches must have completed to be compared", 400, fmt=fmt
        )
    comparison = verify_service.compare_batches(before, after)
    data = {"before": before.id, "after": after.id, "graders": comparison}
    ctx = {
        "tab": "grade",
        "workspace": after.session.workspace,
        "before": verify_service.batch_dict(before),
        "after": verify_service.batch_dict(after),
        "graders": comparison,
    }
    return page(request, "grading/verify_compare.html", ctx, data=data, fmt=fmt)
