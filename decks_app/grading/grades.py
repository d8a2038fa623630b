"""Grading a session in the simulator: grade runs, their results, flags (the Grade tab).

A grade run is a `Run` of kind "grader" in a grading session of its own (origin "grade",
`source` = the graded session): it goes through the same jobs as any run (queued, running,
cancellable, heartbeats, interrupted), its trace is its own (the conversation's page and
replay are not mixed with the grader's calls), and its trace page is the grading session's.
The run's params (`GraderParams`) name the grader by its path relative to the workspace; its
result (`GradingResult`) is the grading run (`GradingRun.to_json()` plus the grader's hash).
On completion the grading run is also put at the front of the session's `meta.gradingRuns`,
the same record `gambit grade` writes, so CLI and browser see each other's grades; flags live
in `meta.gradingFlags`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from pydantic import ConfigDict

from decks_app.grading.flags import (
    find_flag,
    flag_ref_id,
    grading_flags,
    set_grading_flag_reason,
    toggle_grading_flag,
)
from decks_app.models import Run, Session, Workspace
from decks_app.runs import deck_trees, providers
from decks_app.runs.registry import JSONObject, Payload, RunFailed
from decks_app.sessions.conversation import content_text
from decks_app.web.scores import score_class
from decks_app.workspaces.served import PathOutsideWorkspace, find_deck, jailed_path, project_root
from gambit.core import (
    check_deck_tree,
    deck_files_hash,
    grade_state,
    grading_mode,
    is_valid_id,
    state_from_dict,
)

CONVERSATION_KINDS = ("manual", "replay", "scenario")


class GradingError(ValueError):
    """A grade cannot start (no such grader, a run in progress, nothing to grade)."""


class GraderParams(Payload):
    """A grade run: the grader deck, relative to the workspace root."""

    grader: str


class GradingResult(Payload):
    """A grade run's result: the grading run `gambit grade` records (`GradingRun.to_json()`,
    gambit.core's shape: keys it adds later are kept), plus the grader's files hash."""

    model_config = ConfigDict(extra="allow")

    id: str | None = None
    grader_id: str | None = None
    grader_path: str | None = None
    grader_label: str | None = None
    grader_hash: str | None = None
    mode: str | None = None
    status: str | None = None
    run_at: str | None = None
    score: int | float | None = None
    results: list[JSONObject] = []
    error: str | None = None


@dataclass
class GraderInfo:
    path: str  # relative to the workspace root
    label: str
    description: str | None
    mode: str  # "turns" | "conversation" | "?"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "label": self.label,
            "description": self.description,
            "mode": self.mode,
            "error": self.error,
        }


def graders_for(workspace: Workspace, deck_path: str) -> list[GraderInfo]:
    """The `[[graders]]` of a root deck, each with its mode (per turn or conversation)."""
    try:
        deck_file = jailed_path(workspace, deck_path)
    except PathOutsideWorkspace:
        return []
    tree, _ = check_deck_tree(deck_file, project_root=project_root(workspace))
    if tree is None:
        return []
    root = Path(workspace.root).resolve()
    graders = []
    for ref in tree.root.graders:
        path = Path(ref.path).resolve()
        try:
            rel = str(path.relative_to(root))
        except ValueError:
            continue  # a grader outside the workspace cannot be addressed from the browser
        grader = tree.decks.get(ref.path) or tree.decks.get(str(path))
        label = ref.label or (grader.label if grader else None) or path.parent.name
        mode = grading_mode(grader) if grader is not None else "?"
        graders.append(
            GraderInfo(rel, label, ref.description, mode, None if grader else "does not load")
        )
    return graders


def start_grading(session: Session, grader_path: str) -> Run:
    """Queue a grade run of `session` by the root deck's grader at `grader_path`."""
    graders = {g.path: g for g in graders_for(session.workspace, session.deck_path)}
    grader = graders.get(grader_path)
    if grader is None:
        raise GradingError(
            f"{grader_path!r} is not a grader of {session.deck_path}; add it to [[graders]]"
        )
    if grader.error:
        raise GradingError(f"the grader {grader_path} {grader.error}; run gambit check on it")
    if not session.messages:
        raise GradingError("this session has no conversation to grade yet")
    # The grader answers with its own model (the offline demo model when its provider has no key).
    deck = find_deck(session.workspace, grader.path)
    router = providers.make_router(session.workspace.root)
    _, label, offline = providers.effective_model("", deck.models if deck else [], router)
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).first()
        if session.runs.filter(status__in=Run.ACTIVE).exists():
            raise GradingError("a run of this session is still in progress; grade it when done")
        grading_session = Session.objects.create(
            workspace=session.workspace,
            deck_path=grader.path,
            deck_label=grader.label[:200],
            origin="grade",
            source=session,
            format="responses",
            meta={"deckPath": grader.path, "gradedSessionId": session.id},
        )
        run = Run.objects.create(
            session=grading_session,
            kind="grader",
            params=GraderParams(grader=grader.path),
            model=label,
            offline=offline,
        )
    return run


def grade_run_or_none(run_id: str) -> Run | None:
    if not is_valid_id(run_id, "run"):
        return None
    return (
        Run.objects.select_related("session__workspace", "session__source")
        .filter(pk=run_id, kind="grader", session__origin="grade")
        .first()
    )


def graded_session(run: Run) -> Session | None:
    return run.session.source


async def grade_session(
    *,
    workspace_root: str,
    grader_path: str,
    state: JSONObject | None,
    run_options: dict[str, Any],
) -> GradingResult:
    """Run the grader over the session's state (the "grader" kind's work); a grading that
    ends in error fails the run with the turns it graded (`RunFailed`)."""
    if state is None:
        raise GradingError("this session has no conversation to grade")
    grader_file = Path(workspace_root) / grader_path
    # As a grader: the compatibility rule holds here as under [[graders]].
    tree, diag = check_deck_tree(
        grader_file,
        role="grader",
        strict=deck_trees.strict_mode(),
        project_root=project_root(workspace_root),
    )
    if tree is None or diag.errors:
        raise GradingError("; ".join(p.message for p in diag.errors) or "the grader does not load")
    grading, _ = await grade_state(tree, state_from_dict(state), **run_options)
    data = grading.to_json()
    data["graderHash"] = deck_files_hash(tree)
    data["graderPath"] = grader_path  # workspace-relative, like the session's deck path
    result = GradingResult.model_validate(data)
    if grading.status == "error":
        raise RunFailed(grading.error or "the grader failed", result)
    return result


def grading_record(run: Run) -> JSONObject:
    """A grade run's grading as `meta.gradingRuns` holds it (its result and its run id)."""
    result = run.read_result(GradingResult)
    return {**(result.to_json() if result else {}), "runId": run.id}


def record_grading(run: Run, grading_session: Session) -> None:
    """Put a finished grade run's result at the front of the graded session's
    `meta.gradingRuns` (the "grader" kind's finish hook, inside the executor's transaction)."""
    if run.result is None or not grading_session.source_id:
        return
    graded = Session.objects.select_for_update().get(pk=grading_session.source_id)
    meta = dict(graded.meta or {})
    meta["gradingRuns"] = [grading_record(run), *(meta.get("gradingRuns") or [])]
    graded.meta = meta
    graded.state_version += 1
    graded.save(update_fields=["meta", "state_version", "updated_at"])


# ---------------------------------------------------------------- reading


def grade_runs(session: Session) -> list[Run]:
    """The simulator's grade runs of `session`, newest first."""
    return list(
        Run.objects.filter(kind="grader", session__source=session, session__origin="grade")
        .select_related("session")
        .order_by("-created_at")
    )


def imported_gradings(session: Session) -> list[dict[str, Any]]:
    """Grading runs in the session's meta that no simulator run made (CLI, imports)."""
    ours = {r.id for r in grade_runs(session)}
    return [
        g
        for g in (session.meta or {}).get("gradingRuns") or []
        if isinstance(g, dict) and g.get("runId") not in ours
    ]


def _message_text(session: Session, index: int | None) -> tuple[str | None, str | None]:
    """(the user message before, the graded assistant message) for "show input"."""
    messages = session.messages or []
    if index is None or not 0 <= index < len(messages):
        return None, None
    graded = content_text(messages[index].get("content"))
    prior = next(
        (
            content_text(m.get("content"))
            for m in reversed(messages[:index])
            if m.get("role") == "user"
        ),
        None,
    )
    return prior, graded


def result_rows(session: Session, grading: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per graded turn (or one for the conversation), with its flag."""
    flags = grading_flags(session.meta)
    run_id = grading.get("runId") or grading.get("id") or ""
    rows = []
    results = grading.get("results") or []
    for position, result in enumerate(results):
        index = result.get("messageIndex")
        turn = index if grading.get("mode") == "turns" else None
        ref = (
            flag_ref_id(run_id, turn, result.get("messageRefId"))
            if turn is not None
            else (f"gradingRun:{run_id}")
        )
        prior, graded = _message_text(session, index)
        flag = find_flag(flags, ref, run_id)
        rows.append(
            {
                "position": position,
                "turn": turn,
                "title": f"Assistant turn {position + 1}" if turn is not None else "Result",
                "score": result.get("score"),
                "scoreClass": score_class(result.get("score")),
                "reason": result.get("reason"),
                "evidence": result.get("evidence") or [],
                "error": result.get("error"),
                "refId": ref,
                "messageRefId": result.get("messageRefId"),
                "flag": flag,
                "input": {"user": prior, "assistant": graded} if turn is not None else None,
            }
        )
    return rows


def grade_run_dict(run: Run) -> dict[str, Any]:
    result = run.read_result(GradingResult)
    return {
        "id": run.id,
        "session": run.session.source_id,
        "gradingSession": run.session_id,
        "grader": run.read_params(GraderParams).grader,
        "graderLabel": result.grader_label if result else None,
        "graderHash": result.grader_hash if result else None,
        "mode": result.mode if result else None,
        "status": run.status,
        "score": result.score if result else None,
        "error": run.error or (result.error if result else None) or None,
        "createdAt": run.created_at.isoformat() if run.created_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationMs": run.duration_ms,
        "totalTokens": run.total_tokens,
        "cost": run.cost,
        # the model that answered the grader (offline: the demo model grades without reading
        # the rubric, docs/offline-provider.md)
        "model": run.model or None,
        "offline": run.offline,
        "results": result_rows(run.session.source, grading_record(run))
        if result and run.session.source is not None
        else [],
    }


# ---------------------------------------------------------------- flags


def toggle_flag(session: Session, run: Run, position: int, reason: str = "") -> dict | None:
    """Flag (or unflag) one result of a grade run; returns the flag or None."""
    rows = result_rows(session, grading_record(run))
    if not 0 <= position < len(rows):
        raise GradingError("no such result in this grade run")
    row = rows[position]
    if len(reason) > 2000:
        raise GradingError("the reason is longer than 2000 characters")
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        meta, flag = toggle_grading_flag(
            locked.meta, ref_id=row["refId"], run_id=run.id, turn_index=row["turn"], reason=reason
        )
        locked.meta = meta
        locked.state_version += 1
        locked.save(update_fields=["meta", "state_version", "updated_at"])
    session.meta = meta
    return flag


def set_flag_reason(session: Session, run: Run, position: int, reason: str) -> None:
    rows = result_rows(session, grading_record(run))
    if not 0 <= position < len(rows):
        raise GradingError("no such result in this grade run")
    if len(reason) > 2000:
        raise GradingError("the reason is longer than 2000 characters")
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        try:
            meta = set_grading_flag_reason(
                locked.meta, ref_id=rows[position]["refId"], reason=reason, run_id=run.id
            )
        except KeyError as exc:
            raise GradingError(str(exc.args[0])) from None
        locked.meta = meta
        locked.state_version += 1
        locked.save(update_fields=["meta", "state_version", "updated_at"])
    session.meta = meta


# ---------------------------------------------------------------- exports

EXPORT_FIELDS = (
    "session",
    "scenario",
    "grader",
    "graderHash",
    "gradeRun",
    "turn",
    "messageRefId",
    "score",
    "reason",
    "flag",
    "flagReason",
    "humanRating",
)


def human_ratings(feedback: Any) -> dict[tuple[str, str], float | int]:
    """Each rated message's human rating: the mean over its raters (a whole number when it is
    one), as the calibration page pairs it (docs/calibration.md, "Raters")."""
    by_message: dict[tuple[str, str], list[int]] = {}
    for fb in feedback:
        by_message.setdefault((fb.session_id, fb.message_ref_id), []).append(fb.score)
    out: dict[tuple[str, str], float | int] = {}
    for key, scores in by_message.items():
        mean = sum(scores) / len(scores)
        out[key] = int(mean) if mean.is_integer() else mean
    return out


def export_rows(workspace: Workspace, *, batch_run_id: str | None = None) -> list[dict[str, Any]]:
    """One row per graded turn (or conversation grade) across the workspace's sessions, or
    the scenario sessions of one Verify batch: the same columns as `gambit verify`'s export,
    plus the flag and the human rating of the graded message."""
    from decks_app.models import Feedback

    chosen = Session.objects.filter(workspace=workspace).exclude(origin__in=("grade", "verify"))
    if batch_run_id:
        chosen = chosen.filter(meta__verifyBatchRunId=batch_run_id)
    sessions = list(chosen.order_by("created_at"))
    ratings = human_ratings(Feedback.objects.filter(session__in=sessions))
    rows = []
    for session in sessions:
        meta = session.meta or {}
        flags = grading_flags(meta)
        scenario = meta.get("scenarioPath")
        for grading in reversed(meta.get("gradingRuns") or []):  # oldest first
            if not isinstance(grading, dict):
                continue
            run_id = grading.get("runId") or grading.get("id") or ""
            for result in grading.get("results") or []:
                turns = grading.get("mode") == "turns"
                ref = result.get("messageRefId")
                flag_id = (
                    flag_ref_id(run_id, result.get("messageIndex"), ref)
                    if turns
                    else f"gradingRun:{run_id}"
                )
                flag = find_flag(flags, flag_id, run_id)
                human = (
                    ratings.get((session.id, ref))
                    if turns and ref
                    else (session.conversation_score or {}).get("score")
                )
                rows.append(
                    {
                        "session": session.id,
                        "scenario": scenario,
                        "grader": grading.get("graderLabel") or grading.get("graderPath"),
                        "graderHash": grading.get("graderHash"),
                        "gradeRun": run_id,
                        "turn": result.get("messageIndex") if turns else None,
                        "messageRefId": ref,
                        "score": result.get("score"),
                        "reason": result.get("reason") or result.get("error"),
                        "flag": bool(flag),
                        "flagReason": (flag or {}).get("reason"),
                        "humanRating": human,
                    }
                )
    return rows
