"""Calibration in the simulator: each grader's scores against the human ratings of the same
messages (or the conversation score, for conversation graders), per version of its rubric.

Computed from what is stored, on every request, so it is always up to date with the ratings:
the grades are the `meta.gradingRuns` of the workspace's sessions (grade runs of the Grade tab,
Verify and the CLI alike), the ratings are the Test tab's message ratings (-3..+3) and
conversation scores. A grader version is the hash of its deck's files (`graderHash`); grades
recorded without one (older CLI files) are grouped under "unknown". When a session was graded
several times by the same version, its newest grade of each message counts (repeats would
otherwise weigh a conversation several times).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decks_app.models import Feedback, Session, Workspace
from decks_app.workspaces.served import project_root
from gambit.core import check_deck_tree, deck_files_hash
from gambit.core.verify import Calibration, CalibrationPair, calibrate

UNKNOWN_HASH = "unknown"


@dataclass
class GraderCalibration:
    grader: str  # workspace-relative path when inside the workspace
    label: str
    grader_hash: str
    current: bool  # the hash of the grader's files as they are now
    mode: str
    calibration: Calibration
    last_graded_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "grader": self.grader,
            "label": self.label,
            "graderHash": self.grader_hash,
            "current": self.current,
            "mode": self.mode,
            "lastGradedAt": self.last_graded_at,
            **self.calibration.to_json(),
        }


def _relative(workspace: Workspace, path: str) -> str:
    root = Path(workspace.root).resolve()
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return str(candidate.resolve().relative_to(root))
        except ValueError:
            return path
    return path


def _current_hash(workspace: Workspace, grader: str) -> str | None:
    path = Path(workspace.root) / grader
    if not path.is_file():
        return None
    tree, _ = check_deck_tree(path, project_root=project_root(workspace))
    return deck_files_hash(tree) if tree is not None else None


def workspace_calibrations(workspace: Workspace) -> list[GraderCalibration]:
    """Every (grader, version) that graded something, current versions first."""
    sessions = list(
        Session.objects.filter(workspace=workspace)
        .exclude(origin="grade")
        .only("id", "meta", "conversation_score", "message_refs")
    )
    ratings: dict[tuple[str, str], int] = {
        (fb.session_id, fb.message_ref_id): fb.score
        for fb in Feedback.objects.filter(session__in=sessions)
    }
    # (grader, hash) -> {(session, target): (human or None, grader score, links)}
    grades: dict[tuple[str, str], dict[tuple[str, str], tuple[Any, float, dict]]] = defaultdict(
        dict
    )
    labels: dict[str, str] = {}
    modes: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], str] = {}
    for session in sessions:
        conversation = (session.conversation_score or {}).get("score")
        for run in (session.meta or {}).get("gradingRuns") or []:  # newest first
            if not isinstance(run, dict) or run.get("status") not in (None, "completed"):
                continue
            grader = _relative(workspace, str(run.get("graderPath") or run.get("graderId") or "?"))
            key = (grader, str(run.get("graderHash") or UNKNOWN_HASH))
            labels.setdefault(grader, run.get("graderLabel") or Path(grader).parent.name)
            modes.setdefault(key, run.get("mode") or "conversation")
            if run.get("runAt"):
                last[key] = max(last.get(key, ""), str(run["runAt"]))
            run_id = run.get("runId") or run.get("id")
            for result in run.get("results") or []:
                score = result.get("score")
                if not isinstance(score, int | float) or isinstance(score, bool):
                    continue
                if run.get("mode") == "turns":
                    ref = result.get("messageRefId")
                    if not ref:
                        continue
                    target = (session.id, ref)
                    human = ratings.get(target)
                else:
                    target = (session.id, "conversation")
                    human = conversation
                    ref = None
                links = {"session": session.id, "messageRefId": ref, "gradeRun": run_id}
                grades[key].setdefault(target, (human, float(score), links))  # newest wins
    current = {grader: _current_hash(workspace, grader) for grader, _ in grades}
    out = []
    for (grader, grader_hash), targets in grades.items():
        pairs = [
            CalibrationPair(human=float(human), grader=score, links=links)
            for human, score, links in targets.values()
            if isinstance(human, int | float) and not isinstance(human, bool)
        ]
        mode = modes.get((grader, grader_hash), "conversation")
        if mode == "turns":
            graded_sessions = {session for session, _ in targets}
            rated = sum(1 for (session, _ref) in ratings if session in graded_sessions)
        else:
            rated = sum(
                1
                for s in sessions
                if isinstance((s.conversation_score or {}).get("score"), int | float)
            )
        out.append(
            GraderCalibration(
                grader=grader,
                label=labels.get(grader, grader),
                grader_hash=grader_hash,
                current=current.get(grader) == grader_hash,
                mode=mode,
                calibration=calibrate(pairs, graded=len(targets), rated=rated),
                last_graded_at=last.get((grader, grader_hash)),
            )
        )
    out.sort(key=lambda c: c.last_graded_at or "", reverse=True)  # newest versions first...
    out.sort(key=lambda c: (c.grader, not c.current))  # ...within each grader, current on top
    return out
