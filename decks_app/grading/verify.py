"""Verify in the simulator: N scenario runs x M grader repeats as one background job.

A Verify batch is a `Run` of kind "verify" in a session of its own (origin "verify", the
root deck as its deck and its context input as the session's `context`); the run's params
(`VerifyParams`) are the batch's settings. The "verify" kind runs
`gambit.core`'s `run_verify` (the same code as `gambit verify`) inside that run, so the
batch is queued, cancellable and interrupted like any run. While it works:

- live progress (queued / running / completed / failed, for scenario runs and grades) is
  written to the run's result (`VerifyResult.progress`) about twice a second; each write and
  each saved run notifies the batch's session, whose socket re-renders the page's live part
  (decks_app.web.live): the progress bar, and the table of runs as they finish
  (`batch_table.runs_and_grades` reads the runs saved so far);
- every finished scenario run becomes a session of its own (origin "scenario", `source` =
  the batch's session) with its conversation, its trace and its usage, so outliers link to
  a real session page; its grades are recorded in that session's `meta.gradingRuns`, like
  `gambit grade` does, so the Grade tab and calibration see them.

At the end the result's `report` holds the runs, grades and per-grader metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from decks_app.grading import batch_table
from decks_app.grading import verify_records as records
from decks_app.models import Run, Session, Workspace
from decks_app.runs import deck_trees, providers, telemetry
from decks_app.runs import events as event_log
from decks_app.runs.registry import JSONObject, Payload
from decks_app.sessions import keyset
from decks_app.workspaces.served import PathOutsideWorkspace, find_deck, jailed_path, project_root
from gambit.core import check_deck_tree, deck_files_hash, is_valid_id
from gambit.core.verify import (
    GradeRecord,
    GradeSample,
    ScenarioRunRecord,
    VerifyProgress,
    matrix,
    run_verify,
    summarize,
)

PROGRESS_SECONDS = 0.5
LIMITS = {"runs": (1, 100), "repeats": (1, 20), "concurrency": (1, 32), "maxTurns": (1, 200)}


class VerifyError(ValueError):
    pass


class VerifyParams(Payload):
    """A Verify batch's settings: scenarios and graders (workspace-relative paths), runs per
    scenario, grades per run, concurrency, persona turns, the pass threshold, the root deck's
    context (missing fields filled in by the persona) and each scenario deck's own input
    (`scenarioInput`, when one was given)."""

    scenarios: list[str]
    graders: list[str]
    runs: int = 3
    repeats: int = 2
    concurrency: int = 4
    max_turns: int = 6
    threshold: float = 0.0
    context: Any = None
    scenario_input: Any = None

    @property
    def has_scenario_input(self) -> bool:
        return "scenario_input" in self.model_fields_set

    def to_json(self) -> JSONObject:
        """Every setting (the batch page shows them), the optional inputs when given."""
        out = self.model_dump(mode="json", by_alias=True, exclude={"context", "scenario_input"})
        if self.context is not None:
            out["context"] = self.context
        if self.has_scenario_input:
            out["scenarioInput"] = self.scenario_input
        return out


class VerifyResult(Payload):
    """A batch's progress while it runs, and its report (`VerifyReport.to_json()` with each
    run's and grade's session) once it ends."""

    progress: JSONObject | None = None
    report: JSONObject | None = None


def deck_refs(workspace: Workspace, deck_path: str) -> dict[str, list[dict[str, Any]]]:
    """The root deck's `[[scenarios]]` and `[[graders]]` that live in the workspace."""
    try:
        tree, _ = check_deck_tree(
            jailed_path(workspace, deck_path), project_root=project_root(workspace)
        )
    except PathOutsideWorkspace:
        return {"scenarios": [], "graders": []}
    out: dict[str, list[dict[str, Any]]] = {"scenarios": [], "graders": []}
    if tree is None:
        return out
    for role in ("scenarios", "graders"):
        for ref in getattr(tree.root, role):
            rel = records.relative_path(workspace, ref.path)
            if rel is not None:
                label = ref.label or Path(rel).parent.name
                out[role].append({"path": rel, "label": label, "description": ref.description})
    return out


def _int(raw: Any, name: str) -> int:
    low, high = LIMITS[name]
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        raise VerifyError(f"{name} must be a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise VerifyError(f"{name} must be from {low} to {high}, not {value}")
    return value


def parse_settings(workspace: Workspace, deck_path: str, form: Any) -> VerifyParams:
    """Validate the Verify form against the deck's declared scenarios and graders."""
    refs = deck_refs(workspace, deck_path)
    known_scenarios = {r["path"] for r in refs["scenarios"]}
    known_graders = {r["path"] for r in refs["graders"]}
    scenarios = [s for s in form.getlist("scenario") if s]
    graders = [g for g in form.getlist("grader") if g]
    if not scenarios:
        raise VerifyError("pick at least one scenario")
    if not graders:
        raise VerifyError("pick at least one grader")
    unknown = [s for s in scenarios if s not in known_scenarios] + [
        g for g in graders if g not in known_graders
    ]
    if unknown:
        raise VerifyError(f"not declared by {deck_path}: {', '.join(unknown)}")
    try:
        threshold = float(form.get("threshold") or 0)
    except ValueError:
        raise VerifyError("threshold must be a number from -3 to 3") from None
    if not -3 <= threshold <= 3:
        raise VerifyError("threshold must be a number from -3 to 3")
    return VerifyParams(
        scenarios=scenarios,
        graders=graders,
        runs=_int(form.get("runs", 3), "runs"),
        repeats=_int(form.get("repeats", 2), "repeats"),
        concurrency=_int(form.get("concurrency", 4), "concurrency"),
        max_turns=_int(form.get("maxTurns", 6), "maxTurns"),
        threshold=threshold,
    )


def start_verify(workspace: Workspace, deck_path: str, settings: VerifyParams) -> Run:
    deck = find_deck(workspace, deck_path)
    if deck is None or deck.error:
        raise VerifyError(f"{deck_path} does not load; run gambit check on it")
    router = providers.make_router(workspace.root)
    _, label, offline = providers.effective_model("", deck.models, router)
    with transaction.atomic():
        session = Session.objects.create(
            workspace=workspace,
            deck_path=deck.path,
            deck_label=deck.label,
            origin="verify",
            context=settings.context,
            format="responses",
            # the deck's files as they were (the compare page says whether they changed)
            meta={"deckPath": deck.path, "deckHash": _deck_hash(workspace, deck.path)},
        )
        run = Run.objects.create(
            session=session,
            kind="verify",
            params=settings,
            model=label,
            offline=offline,
        )
    return run


def _deck_hash(workspace: Workspace, deck_path: str) -> str | None:
    tree, _ = check_deck_tree(
        jailed_path(workspace, deck_path), project_root=project_root(workspace)
    )
    return deck_files_hash(tree) if tree is not None else None


def verify_run_or_none(run_id: str) -> Run | None:
    if not is_valid_id(run_id, "run"):
        return None
    return (
        Run.objects.select_related("session__workspace")
        .filter(pk=run_id, kind="verify", session__origin="verify")
        .first()
    )


BATCHES_PER_PAGE = 50


def _batches(workspace: Workspace):
    return Run.objects.filter(
        kind="verify", session__workspace=workspace, session__origin="verify"
    ).select_related("session")


def batch_page(workspace: Workspace, *, before: str = "", after: str = "") -> keyset.Page:
    """A page of the workspace's batches, newest first, in keyset pages like the sessions
    list (a batch started meanwhile shifts nothing; a broken cursor is `keyset.BadCursor`)."""
    qs = _batches(workspace)
    return keyset.paginate(qs, size=BATCHES_PER_PAGE, before=before, after=after)


def comparable_batches(workspace: Workspace, run: Run) -> tuple[list[Run], int]:
    """The newest completed batches of `run`'s deck it can be compared with, and how many
    there are in all (the picker also takes any batch id typed into it)."""
    # Batches of the same deck: a batch of another deck compares two different agents (it
    # can still be typed in, and the compare page then says so first).
    qs = (
        _batches(workspace)
        .filter(status="completed", session__deck_path=run.session.deck_path)
        .exclude(pk=run.pk)
    )
    return list(qs.order_by("-created_at", "-id")[:BATCHES_PER_PAGE]), qs.count()


# ---------------------------------------------------------------- execution


async def execute_verify(
    *,
    run: Run,
    session: Session,
    settings: VerifyParams,
    run_options: dict[str, Any],
    db: Callable[..., Awaitable[Any]],
) -> VerifyResult:
    """Run the batch (the "verify" kind's work, inside the executor's cancellation and
    heartbeat loop)."""
    root = Path(session.workspace.root)
    queue: asyncio.Queue[tuple[str, Any, list[dict[str, Any]]] | None] = asyncio.Queue()
    traces: dict[str, list[dict[str, Any]]] = {}
    sessions_by_run: dict[str, str] = {}
    latest: dict[str, Any] = {"progress": None, "written": None}

    def trace_for(record: ScenarioRunRecord | GradeRecord):
        events = traces.setdefault(record.id, [])
        # Spans (when an export is configured): a scenario run's persona and deck turns,
        # and its grades, share the scenario run's id as their conversation.
        spans = telemetry.sink(record.run_id if isinstance(record, GradeRecord) else record.id)

        def on_trace(event: dict[str, Any]) -> None:
            deck_trees.report_warning(event)
            events.append(event)
            if spans is not None:
                spans(event)

        return on_trace

    def on_run(record: ScenarioRunRecord) -> None:
        queue.put_nowait(("run", record, traces.pop(record.id, [])))

    def on_grade(record: GradeRecord) -> None:
        traces.pop(record.id, None)  # a grade's trace stays in the batch's report, not stored
        queue.put_nowait(("grade", record, []))

    def on_progress(progress: VerifyProgress) -> None:
        latest["progress"] = progress.to_json()

    async def persist() -> None:
        while (item := await queue.get()) is not None:
            kind, record, events = item
            if kind == "run":
                sessions_by_run[record.id] = await db(
                    records.save_scenario_run, session, run.id, record, events
                )
            else:
                await db(records.save_grade, sessions_by_run.get(record.run_id), record, run.id)
            await event_log.notify(session.id)  # the batch page's table fills in at once

    async def report_progress() -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            if latest["progress"] != latest["written"]:
                latest["written"] = latest["progress"]
                await db(_write_progress, run.id, latest["progress"])
                await event_log.notify(session.id)

    persister = asyncio.create_task(persist())
    ticker = asyncio.create_task(report_progress())
    try:
        report = await run_verify(
            root / session.deck_path,
            scenarios=[root / s for s in settings.scenarios],
            graders=[root / g for g in settings.graders],
            runs=settings.runs,
            repeats=settings.repeats,
            concurrency=settings.concurrency,
            max_turns=settings.max_turns,
            threshold=settings.threshold,
            **({"context": settings.context} if settings.context is not None else {}),
            **({"scenario_input": settings.scenario_input} if settings.has_scenario_input else {}),
            on_progress=on_progress,
            on_run=on_run,
            on_grade=on_grade,
            trace_for=trace_for,
            strict=deck_trees.strict_mode(),
            project_root=project_root(root),
            **run_options,
        )
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        queue.put_nowait(None)
        await asyncio.shield(persister)
    data = report.to_json()
    for entry in data["runs"]:
        entry["session"] = sessions_by_run.get(entry["id"])
    for grade in data["grades"]:
        grade["session"] = sessions_by_run.get(grade["runId"])
        grade.pop("grading", None)  # kept in the scenario sessions' meta.gradingRuns
    data["progress"] = latest["progress"]
    data["settings"] = settings.to_json()
    return VerifyResult(progress=latest["progress"], report=data)


def _write_progress(run_id: str, progress: JSONObject | None) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        result = run.read_result(VerifyResult) or VerifyResult()
        result.progress = progress
        run.result = result
        run.heartbeat_at = timezone.now()
        run.save(update_fields=["result", "heartbeat_at"])


# ---------------------------------------------------------------- reading


def _report(run: Run) -> JSONObject:
    result = run.read_result(VerifyResult)
    return (result.report if result else None) or {}


def batch_dict(run: Run) -> dict[str, Any]:
    """The batch's record (the page's JSON twin): settings, progress, and its runs and grades
    (those saved so far while it runs); once it ended, the report's metrics per grader."""
    result = run.read_result(VerifyResult)
    report = (result.report if result else None) or {}
    settings = run.read_params(VerifyParams)
    runs, grades = _workspace_paths(run, *batch_table.runs_and_grades(run, report))
    labels = {g["grader"]: g.get("graderLabel") or g["grader"] for g in grades}
    for path in settings.graders:
        labels.setdefault(path, Path(path).parent.name)
    summaries = {
        (records.relative_path(run.session.workspace, name) or name): {
            **summary,
            "grader": records.relative_path(run.session.workspace, name) or name,
        }
        for name, summary in (report.get("summaries") or {}).items()
    }
    samples = batch_table.samples(runs, grades)
    if summaries:
        # The pass rate as the core computes it now, from the batch's grades: a report saved
        # before its interval counted runs rather than grades (docs/calibration.md) would
        # otherwise show a narrower interval than the same grades give everywhere else.
        for name, fresh in summarize(samples, threshold=settings.threshold).items():
            if name in summaries:
                figures = fresh.to_json()
                summaries[name] = {
                    **summaries[name],
                    **{key: figures[key] for key in _PASS_RATE_FIGURES},
                }
    if summaries and run.status == "completed":
        corrections = batch_table.corrected_pass_rates(run, grades, samples, settings.threshold)
        for name, entry in corrections.items():
            if name in summaries:
                summaries[name] = {**summaries[name], **entry}
    return {
        "id": run.id,
        "deck": run.session.deck_path,
        "graderLabels": labels,
        "status": run.status,
        "error": run.error or None,
        "settings": settings.to_json(),
        "recordedProgress": result.progress if result else None,  # as the run wrote it
        "progress": batch_table.progress(
            run, settings.to_json(), result.progress if result else None, (len(runs), len(grades))
        ),
        "model": run.model or None,
        "deckHash": (run.session.meta or {}).get("deckHash"),
        "createdAt": run.created_at.isoformat() if run.created_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationMs": run.duration_ms,
        "summaries": summaries,
        "runs": runs,
        "grades": grades,
        "matrix": matrix(samples, settings.threshold).to_json(),
    }


_PASS_RATE_FIGURES = ("passRate", "passRateInterval", "passRateRuns", "verdicts")


def samples_of(run: Run) -> list[GradeSample]:
    """The grade samples of a batch (for comparing batches)."""
    runs, grades = _workspace_paths(run, *batch_table.runs_and_grades(run, _report(run)))
    return batch_table.samples(runs, grades)


def _workspace_paths(
    run: Run, runs: list[dict[str, Any]], grades: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Scenarios and graders by workspace-relative path (the report has absolute ones), so a
    batch names them the same way while it runs and once it ended."""
    workspace = run.session.workspace
    return (
        [
            {
                **r,
                "scenario": records.relative_path(workspace, r.get("scenario") or "")
                or r.get("scenario"),
            }
            for r in runs
        ],
        [
            {
                **g,
                "grader": records.relative_path(workspace, g.get("grader") or "")
                or g.get("grader"),
            }
            for g in grades
        ],
    )
