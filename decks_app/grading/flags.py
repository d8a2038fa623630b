"""Grading flags: a person marks a grade as doubtful, with a reason (the Grade tab's **Flag**).

Flags are kept in the graded session's saved state, `meta.gradingFlags`, one
`{id, refId, runId, turnIndex, reason, createdAt}` each (docs/simulator.md, "Grade, Verify
and calibration"), so exporting and importing a session keeps them. Only the simulator flags
grades; the engine records grades (`meta.gradingRuns`) but never reads a flag.

A flag belongs to one grade run: the `refId` of a per-turn result is the graded message's
ref, which every grade run of that message shares, so a flag is found by its `refId` *and*
its `runId` (a flag set on one run of a grader never shows on another run of the same
message). A flag without a `runId` (written by another tool) matches every run.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from gambit.core import new_id


def flag_ref_id(run_id: str, turn_index: int | None, message_ref_id: str | None = None) -> str:
    """The id a flag is kept under: the graded message's ref, else the run (and turn)."""
    if message_ref_id:
        return message_ref_id
    return f"gradingRun:{run_id}" + (f"#turn:{turn_index}" if turn_index is not None else "")


def grading_flags(meta: dict[str, Any] | None) -> list[dict[str, Any]]:
    flags = (meta or {}).get("gradingFlags")
    return [f for f in flags if isinstance(f, dict)] if isinstance(flags, list) else []


def _is(flag: dict[str, Any], ref_id: str, run_id: str | None) -> bool:
    return flag.get("refId") == ref_id and (
        run_id is None or not flag.get("runId") or flag.get("runId") == run_id
    )


def find_flag(flags: list[dict[str, Any]], ref_id: str, run_id: str | None) -> dict | None:
    """The flag of `ref_id` in the grade run `run_id`, or None."""
    return next((f for f in flags if _is(f, ref_id, run_id)), None)


def toggle_grading_flag(
    meta: dict[str, Any] | None,
    *,
    ref_id: str,
    run_id: str,
    turn_index: int | None = None,
    reason: str = "",
    now: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Flag `ref_id`, or unflag it when it is flagged; returns (new meta, the flag or None)."""
    flags = grading_flags(meta)
    kept = [f for f in flags if not _is(f, ref_id, run_id)]
    flag = None
    if len(kept) == len(flags):
        flag = {
            "id": new_id("gflag"),
            "refId": ref_id,
            "runId": run_id,
            "turnIndex": turn_index,
            "reason": reason,
            "createdAt": now or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        kept.append(flag)
    return {**(meta or {}), "gradingFlags": kept}, flag


def set_grading_flag_reason(
    meta: dict[str, Any] | None, *, ref_id: str, reason: str, run_id: str | None = None
) -> dict[str, Any]:
    """Change the reason of an existing flag (of the grade run `run_id`, when given). Giving
    a reason never flags: a `refId` that is not flagged is a KeyError (the page reports it)
    rather than a new flag."""
    flags = grading_flags(meta)
    if find_flag(flags, ref_id, run_id) is None:
        raise KeyError(f"Flag not found for refId: {ref_id}")
    updated = [{**f, "reason": reason} if _is(f, ref_id, run_id) else f for f in flags]
    return {**(meta or {}), "gradingFlags": updated}
