"""Grading flags: a person marks a grade as doubtful, with a reason (the Grade tab's **Flag**).

Flags are kept in the graded session's saved state, `meta.gradingFlags`, one
`{id, refId, runId, turnIndex, reason, createdAt}` each (docs/simulator.md, "Grade, Verify
and calibration"), so exporting and importing a session keeps them. Only the simulator flags
grades; the engine records grades (`meta.gradingRuns`) but never reads a flag.
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
    kept = [f for f in flags if f.get("refId") != ref_id]
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
    meta: dict[str, Any] | None, *, ref_id: str, reason: str
) -> dict[str, Any]:
    """Change the reason of an existing flag. Giving a reason never flags: a `refId` that is
    not flagged is a KeyError (the page reports it) rather than a new flag."""
    flags = grading_flags(meta)
    if not any(f.get("refId") == ref_id for f in flags):
        raise KeyError(f"Flag not found for refId: {ref_id}")
    updated = [{**f, "reason": reason} if f.get("refId") == ref_id else f for f in flags]
    return {**(meta or {}), "gradingFlags": updated}
