"""A Verify batch as its page shows it, while it runs and once it ends.

- `runs_and_grades`: the batch's scenario runs and grades in the report's shape: from the
  report once the batch ended, else from the scenario sessions saved so far (each run is
  saved as it finishes, its grades with it), so the page's table fills in as runs finish;
- `progress`: done and total work (runs and grades, the totals known from the settings, never
  "?"), the share done and an estimate of the time left;
- `samples`: the grades as `GradeSample`s, for the core's one definition of pass and fail
  (the matrix, the metrics, the compare page).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from decks_app.models import Run, Session
from decks_app.sessions.kinds import ScenarioParams, ScenarioResult
from gambit.core.verify import GradeSample


def runs_and_grades(run: Run, report: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """The batch's runs and grades: the report's, else those saved so far."""
    if report.get("runs"):
        return list(report["runs"]), list(report.get("grades") or [])
    runs: list[dict[str, Any]] = []
    grades: list[dict[str, Any]] = []
    saved = (
        Session.objects.filter(source_id=run.session_id, origin="scenario")
        .prefetch_related("runs")
        .order_by("created_at")
    )
    for session in saved:
        meta = session.meta or {}
        scenario_run = next((r for r in session.runs.all() if r.kind == "scenario"), None)
        if scenario_run is None:
            continue
        params = scenario_run.read_params(ScenarioParams)
        result = scenario_run.read_result(ScenarioResult)
        run_id = str(meta.get("verifyRunId") or session.id)
        label = meta.get("scenarioLabel") or (params.label or "").rsplit(" #", 1)[0] or None
        runs.append(
            {
                "id": run_id,
                "scenario": meta.get("scenarioPath") or params.scenario,
                "scenarioLabel": label,
                "index": meta.get("verifyRunIndex") or len(runs) + 1,
                "status": scenario_run.status,
                "turns": result.turns if result else 0,
                "error": scenario_run.error or None,
                "durationMs": scenario_run.duration_ms,
                "tokens": scenario_run.total_tokens,
                "cost": scenario_run.cost,
                "session": session.id,
            }
        )
        for grading in reversed(meta.get("gradingRuns") or []):  # oldest first
            if not isinstance(grading, dict) or grading.get("verifyBatchRunId") != run.id:
                continue
            grades.append(
                {
                    "id": grading.get("runId"),
                    "runId": run_id,
                    "grader": grading.get("graderPath"),
                    "graderLabel": grading.get("graderLabel"),
                    "graderHash": grading.get("graderHash"),
                    "repeat": grading.get("repeat"),
                    "status": "completed" if grading.get("status") == "completed" else "failed",
                    "score": grading.get("score"),
                    "reason": grading.get("reason") or grading.get("error"),
                    "error": grading.get("error"),
                    "session": session.id,
                }
            )
    return runs, grades


def samples(runs: list[dict[str, Any]], grades: list[dict[str, Any]]) -> list[GradeSample]:
    """One sample per grade; a failed scenario run's grades are execution failures."""
    by_id = {r["id"]: r for r in runs}
    out = []
    for grade in grades:
        scenario_run = by_id.get(grade.get("runId"), {})
        scenario = scenario_run.get("scenarioLabel") or scenario_run.get("scenario")
        links = {"run": grade.get("runId"), "session": grade.get("session")}
        if scenario_run.get("status") == "failed":
            out.append(
                GradeSample(
                    grade["grader"],
                    grade["runId"],
                    scenario,
                    execution_error=scenario_run.get("error") or "the scenario run failed",
                    links=links,
                )
            )
            continue
        score = grade.get("score")
        out.append(
            GradeSample(
                grade["grader"],
                grade["runId"],
                scenario,
                score=score,
                reason=grade.get("reason"),
                grader_error=grade.get("error")
                or (None if score is not None else "the grader gave no score"),
                links=links,
            )
        )
    return out


def progress(
    run: Run,
    settings: dict[str, Any],
    live: dict[str, Any] | None,
    saved: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """What is done of the batch, out of what the settings ask, and the time left.

    `saved` counts the runs and grades already saved: the live counts are written twice a
    second, a run is saved (and shown) as it finishes, so the bar never lags the table."""
    runs_total = int(settings.get("runs") or 0) * len(settings.get("scenarios") or [])
    grades_total = (
        runs_total * int(settings.get("repeats") or 0) * len(settings.get("graders") or [])
    )
    phases = {}
    for phase, total, stored in (
        ("run", runs_total, saved[0]),
        ("grade", grades_total, saved[1]),
    ):
        counts = (live or {}).get(phase) or {}
        completed = int(counts.get("completed") or 0)
        failed = int(counts.get("failed") or 0)
        running = int(counts.get("running") or 0)
        queued = int(counts.get("queued") or 0)
        # Saved ahead of the live counts (written twice a second): those finished, so they
        # leave the running and then the queued count, and the parts still add up.
        ahead = max(0, stored - completed - failed)
        completed += ahead
        taken = min(ahead, running)
        running, queued = running - taken, max(0, queued - (ahead - taken))
        phases[phase] = {
            "total": int(counts.get("total") or total),
            "done": completed + failed,
            "completed": completed,
            "failed": failed,
            "running": running,
            "queued": queued,
        }
    work = phases["run"]["total"] + phases["grade"]["total"]
    done = phases["run"]["done"] + phases["grade"]["done"]
    seconds_left = None
    active = run.status in ("queued", "running")
    # No guess until a tenth of the work (and two items) are done: the first runs take
    # longest (start-up), so an early guess overstates the time left several times over.
    if active and run.started_at and max(2, work / 10) <= done < work:
        elapsed = (timezone.now() - run.started_at).total_seconds()
        seconds_left = round(elapsed * (work - done) / done)
    return {
        **phases,
        "graded": bool(grades_total),
        "work": work,
        "done": done,
        "percent": round(100 * done / work) if work else 100,
        "secondsLeft": seconds_left,
    }


def corrected_pass_rates(
    run: Run, grades: list[dict[str, Any]], samples: list[GradeSample], threshold: float
) -> dict[str, dict[str, Any]]:
    """Per grader of the batch, its pass rate corrected for its errors (Rogan-Gladen, with
    its interval), from the human ratings of its grades anywhere in the workspace: the rows of
    the workspace's grades export that carry a rating, joined by the core as `gambit verify
    --ratings` joins an exported file (the grader's version preferred). A grader without
    rated grades gets a note instead."""
    key = (run.id, threshold, *_ratings_state(run))
    if key in _CORRECTIONS:
        return _CORRECTIONS[key]
    found = _corrected(run, grades, samples, threshold)
    if len(_CORRECTIONS) >= 64:  # the batch pages open at once, not every batch ever
        _CORRECTIONS.pop(next(iter(_CORRECTIONS)))
    _CORRECTIONS[key] = found
    return found


# Corrections by (batch, threshold, state of the workspace's ratings and grades): the batch
# page's live part is rendered again on every poll of its socket, and the correction reads
# every graded session of the workspace and bootstraps; it changes only with them.
_CORRECTIONS: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}


def _ratings_state(run: Run) -> tuple[Any, ...]:
    from django.db.models import Count, Max

    from decks_app.models import Feedback

    workspace = run.session.workspace_id
    ratings = Feedback.objects.filter(session__workspace_id=workspace).aggregate(
        n=Count("id"), last=Max("updated_at")
    )
    sessions = Session.objects.filter(workspace_id=workspace).aggregate(
        n=Count("id"), last=Max("updated_at")
    )
    return (ratings["n"], ratings["last"], sessions["n"], sessions["last"])


def _corrected(
    run: Run, grades: list[dict[str, Any]], samples: list[GradeSample], threshold: float
) -> dict[str, dict[str, Any]]:
    from decks_app.grading.grades import export_rows
    from gambit.core.verify import RowError, read_rows, summarize

    rated = [
        (f"row {i}", row)
        for i, row in enumerate(export_rows(run.session.workspace), start=1)
        if row.get("humanRating") is not None and row.get("score") is not None
    ]
    if not rated:
        return {}
    try:
        rows = read_rows(rated)
    except RowError:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for grader, grade in {g["grader"]: g for g in grades}.items():
        folder = grader.rsplit("/", 2)[-2] if grader.endswith("/PROMPT.md") else grader
        pairs, note = rows.pairs_for(
            [grade.get("graderLabel"), folder, grader], grade.get("graderHash")
        )
        entry: dict[str, Any] = {"note": note}
        if pairs:
            summary = summarize(samples, threshold=threshold, ratings={grader: pairs})[grader]
            if summary.corrected is not None:
                entry["correctedPassRate"] = summary.corrected.to_json()
            if summary.calibration is not None:
                entry["evidence"] = summary.calibration.evidence.to_json()
        out[grader] = entry
    return out
