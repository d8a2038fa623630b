"""Grading a saved conversation with a grader deck (docs/decks.md, "Graders").

A grader whose context schema has a `messageToGrade` field runs once per assistant message
("turns" mode); otherwise once for the whole conversation ("conversation" mode). Each grade
keeps its score, reason and evidence, and the grading run is recorded at the front of
`state.meta["gradingRuns"]`.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._deck import Deck, DeckTree
from ._ids import new_id
from ._loader import as_tree
from ._provider import ModelProvider
from ._runtime import is_end_signal, run_deck
from ._state import SavedState, state_messages
from ._trace import GradeEndEvent, GradeStartEvent, now_ms

GradingMode = Literal["turns", "conversation"]


@dataclass
class Grade:
    """One grader verdict: the score with its reason and evidence (never a bare number)."""

    score: float | None
    reason: str | None
    evidence: list[str] = field(default_factory=list)
    payload: Any = None
    message_index: int | None = None
    message_ref_id: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        optional = {
            "messageIndex": self.message_index,
            "messageRefId": self.message_ref_id,
            "error": self.error,
        }
        return {
            "score": self.score,
            "reason": self.reason,
            "evidence": self.evidence,
            **{key: value for key, value in optional.items() if value is not None},
            "payload": self.payload,
        }


@dataclass
class GradingRun:
    """One grader's pass over a conversation: its grades, or the error that stopped it."""

    id: str
    grader_path: str
    grader_label: str | None
    mode: GradingMode
    grades: list[Grade]
    status: Literal["completed", "error"]
    run_at: str
    error: str | None = None

    @property
    def score(self) -> float | None:
        scores = [g.score for g in self.grades if g.score is not None]
        return statistics.fmean(scores) if scores else None

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "graderId": Path(self.grader_path).parent.name
            if Path(self.grader_path).name == "PROMPT.md"
            else Path(self.grader_path).stem,
            "graderPath": self.grader_path,
            "graderLabel": self.grader_label,
            "mode": self.mode,
            "status": self.status,
            "runAt": self.run_at,
            "score": self.score,
            "results": [g.to_json() for g in self.grades],
        }
        if self.error is not None:
            data["error"] = self.error
        return data


def grading_mode(grader: Deck) -> GradingMode:
    schema = grader.context_schema
    return "turns" if schema is not None and schema.has_field("messageToGrade") else "conversation"


def session_payload(state: SavedState) -> dict[str, Any]:
    """What graders see as `session`, minus earlier grading runs."""
    meta = {
        k: v for k, v in (state.meta or {}).items() if k not in ("gradingRuns", "calibrationRuns")
    }
    data = state.to_dict()
    session = {
        "runId": state.run_id,
        "messages": [m.to_api_dict() for m in state_messages(state)],
        "messageRefs": data.get("messageRefs") or [],
        "feedback": data.get("feedback") or [],
        "notes": data.get("notes"),
        "conversationScore": data.get("conversationScore"),
        "meta": meta,
    }
    # Absent, not null: the built-in schemas declare these fields optional, not nullable.
    return {key: value for key, value in session.items() if value is not None}


def _grade_from_output(output: Any) -> Grade:
    payload = output
    if isinstance(output, dict) and not is_end_signal(output) and "payload" in output:
        payload = output["payload"]
    if isinstance(payload, dict):
        score = payload.get("score")
        evidence = payload.get("evidence")
        return Grade(
            score=score if isinstance(score, int | float) and not isinstance(score, bool) else None,
            reason=payload.get("reason") if isinstance(payload.get("reason"), str) else None,
            evidence=[e for e in evidence if isinstance(e, str)]
            if isinstance(evidence, list)
            else [],
            payload=payload,
        )
    return Grade(score=None, reason=None, payload=payload, error="the grader returned no score")


async def grade_state(
    grader: str | Path | Deck | DeckTree,
    state: SavedState,
    *,
    provider: ModelProvider,
    on_grade: Callable[[Grade], None] | None = None,
    strict: bool = False,
    turn_concurrency: int = 4,
    threshold: float = 0.0,
    **run_options: Any,
) -> tuple[GradingRun, SavedState]:
    """Grade `state` with `grader`; returns the run and the state with it recorded in meta.

    `run_options` are passed to `run_deck` (model_resolver, default_model, on_trace, mode...);
    their `project_root` also bounds a grader given by path.
    A grader that fails is recorded with status "error", not raised; in "turns" mode the
    turns are graded concurrently (at most `turn_concurrency` at once) and the turns that did
    grade are kept beside the error of one that failed.

    Each grade is traced (through `run_options`' `on_trace`) as `grade.start`, the grader's
    run, and `grade.end` with the score and whether it passes (`score >= threshold`).
    """
    tree = as_tree(
        grader, strict=strict, role="grader", project_root=run_options.get("project_root")
    )
    deck = tree.root
    target: Deck | DeckTree = grader if isinstance(grader, Deck) else tree
    mode = grading_mode(deck)
    session = session_payload(state)
    grades: list[Grade] = []
    error: str | None = None
    refs = session.get("messageRefs", [])
    traced = _GradeTrace(run_options, deck, mode, state.run_id, threshold)
    try:
        if mode == "turns":
            # Each assistant turn is graded on its own, concurrently.
            slots = asyncio.Semaphore(max(1, turn_concurrency))

            async def grade_turn(index: int, message: dict[str, Any]) -> Grade:
                ref_id = refs[index].get("id") if index < len(refs) else None
                to_grade = dict(message)
                if ref_id:
                    to_grade["messageRefId"] = ref_id
                async with slots:
                    run_id = traced.start(index, ref_id)
                    try:
                        result = await run_deck(
                            target,
                            provider=provider,
                            context={"session": session, "messageToGrade": to_grade},
                            strict=strict,
                            **{**run_options, "run_id": run_id},
                        )
                    except BaseException as exc:
                        traced.end(run_id, None, exc, index)
                        raise
                grade = _grade_from_output(result.output)
                grade.message_index, grade.message_ref_id = index, ref_id
                traced.end(run_id, grade)
                if on_grade is not None:
                    on_grade(grade)
                return grade

            outcomes = await asyncio.gather(
                *(
                    grade_turn(index, message)
                    for index, message in enumerate(session["messages"])
                    if message.get("role") == "assistant" and message.get("content")
                ),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, Grade):
                    grades.append(outcome)
                elif isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                elif error is None and isinstance(outcome, BaseException):
                    error = f"{type(outcome).__name__}: {outcome}"
        else:
            run_id = traced.start(None, None)
            try:
                result = await run_deck(
                    target,
                    provider=provider,
                    context={"session": session},
                    strict=strict,
                    **{**run_options, "run_id": run_id},
                )
            except BaseException as exc:
                traced.end(run_id, None, exc)
                raise
            grades.append(_grade_from_output(result.output))
            traced.end(run_id, grades[-1])
            if on_grade is not None:
                on_grade(grades[-1])
    except Exception as exc:  # recorded, so one bad grader does not lose the others' results
        error = f"{type(exc).__name__}: {exc}"
    run = GradingRun(
        id=new_id("grade"),
        grader_path=deck.path,
        grader_label=deck.label,
        mode=mode,
        grades=grades,
        status="error" if error else "completed",
        run_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        error=error,
    )
    # States are values (the runtime publishes a new one on every pass, never edits one), so
    # the graded state shares the conversation with `state` and only its `meta` is new: a
    # deep copy cost 13% of a Verify batch's engine time for nothing.
    meta = dict(state.meta or {})
    meta["gradingRuns"] = [run.to_json(), *(meta.get("gradingRuns") or [])]
    return run, state.model_copy(update={"meta": meta})


class _GradeTrace:
    """Traces each grade: `grade.start` before the grader's run, `grade.end` after it."""

    def __init__(
        self,
        run_options: dict[str, Any],
        grader: Deck,
        mode: GradingMode,
        graded_run_id: str | None,
        threshold: float,
    ):
        self.on_trace = run_options.get("on_trace")
        # A caller's run id (the simulator's grade run) names every grader run; else each
        # gets its own, as run_deck would give it.
        self.run_id = run_options.get("run_id")
        self.grader = grader
        self.mode = mode
        self.graded_run_id = graded_run_id
        self.threshold = threshold

    def start(self, index: int | None, ref_id: str | None) -> str:
        run_id = self.run_id or new_id("run")
        if self.on_trace is not None:
            self.on_trace(
                GradeStartEvent.wire(
                    now_ms(),
                    run_id,
                    {
                        "grader_path": self.grader.path,
                        "grader_label": self.grader.label,
                        "grading_mode": self.mode,
                        "graded_run_id": self.graded_run_id,
                        "message_index": index,
                        "message_ref_id": ref_id,
                    },
                )
            )
        return run_id

    def end(
        self,
        run_id: str,
        grade: Grade | None,
        exc: BaseException | None = None,
        index: int | None = None,
    ) -> None:
        if self.on_trace is None:
            return
        if exc is not None:
            error: str | None = f"{type(exc).__name__}: {exc}"
        else:
            error = grade.error if grade is not None else None
        score = grade.score if grade is not None else None
        self.on_trace(
            GradeEndEvent.wire(
                now_ms(),
                run_id,
                {
                    "grader_path": self.grader.path,
                    "grader_label": self.grader.label,
                    "graded_run_id": self.graded_run_id,
                    "message_index": grade.message_index if grade is not None else index,
                    "score": score,
                    "passed": None if score is None else score >= self.threshold,
                    "threshold": self.threshold,
                    "reason": grade.reason if grade is not None else None,
                    "error": error,
                },
            )
        )
