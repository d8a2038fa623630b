"""What calibration is computed from, read from the database in one pass: every grade of every
grader version on the workspace's sessions, and every human rating, by rater.

A **target** is what a grade and a rating can share: an assistant message (`<session>#<ref>`,
per-turn graders against the -3..+3 message ratings) or a whole conversation
(`<session>#conversation`, conversation graders against the conversation score). Grades come
from the sessions' `meta.gradingRuns` (the Grade tab, Verify and the CLI alike); a grader
version is the hash of its deck's files (`graderHash`), "unknown" for grades recorded without
one. Message ratings are the `Feedback` rows, one per rater ("" for a rating left without a
name: the Test tab, older databases); a conversation score counts as a rating by its `rater`
when it has one, else "".

Plain data only (no figures): `decks_app.grading.calibration` computes and caches the figures
from it, keyed by a hash of these inputs, and the rating queue reads it to choose what to rate.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decks_app.models import Feedback, Session, Workspace
from decks_app.sessions.conversation import content_text
from decks_app.workspaces.served import project_root
from gambit.core import check_deck_tree, deck_files_hash

UNKNOWN_HASH = "unknown"
CONVERSATION = "conversation"


def target_key(session_id: str, ref: str | None) -> str:
    return f"{session_id}#{ref or CONVERSATION}"


@dataclass(frozen=True)
class Grade:
    """One score a grader version gave one target in one grade run."""

    score: float
    reason: str
    run_id: str
    at: str


@dataclass
class GraderVersion:
    """Everything one version of one grader scored; per target its grades, newest first."""

    grader: str  # workspace-relative path when inside the workspace
    label: str
    grader_hash: str
    mode: str  # "turns" or "conversation"
    first_at: str = ""
    last_at: str = ""
    current: bool = False
    grades: dict[str, list[Grade]] = field(default_factory=dict)

    def scores(self) -> dict[str, float]:
        """Each target's score: the mean of its repeats (one piece of evidence per target), as
        `gambit calibrate` pairs them."""
        return {
            target: statistics.fmean(g.score for g in grades)
            for target, grades in self.grades.items()
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "grader": self.grader,
            "label": self.label,
            "graderHash": self.grader_hash,
            "mode": self.mode,
            "firstAt": self.first_at,
            "lastAt": self.last_at,
            "current": self.current,
            "grades": {
                target: [[g.score, g.run_id, g.at] for g in grades]
                for target, grades in sorted(self.grades.items())
            },
        }


@dataclass(frozen=True)
class Rating:
    target: str
    rater: str
    score: float


@dataclass
class Inputs:
    """A workspace's grades and ratings, and what each target is (session, scenario, length)."""

    versions: list[GraderVersion]
    ratings: list[Rating]
    session_of: dict[str, str]  # target -> session id
    ref_of: dict[str, str | None]  # target -> message ref (None: the conversation)
    scenario_of: dict[str, str]  # session id -> scenario (its deck's folder name)
    lengths: dict[str, int]  # target -> characters of the graded reply (or conversation)
    message_targets: list[str] = field(default_factory=list)  # every assistant message
    _digest: str | None = field(default=None, repr=False, compare=False)

    def human(self) -> dict[str, float]:
        """Each rated target's human score: the mean over its raters."""
        by_target: dict[str, dict[str, float]] = {}
        for rating in self.ratings:
            by_target.setdefault(rating.target, {})[rating.rater] = rating.score
        return {t: statistics.fmean(scores.values()) for t, scores in by_target.items()}

    def scoring_versions(self) -> list[GraderVersion]:
        """Per grader the version whose scores count: the current one, else the one that
        graded last."""
        chosen: dict[str, GraderVersion] = {}
        for v in self.versions:
            held = chosen.get(v.grader)
            if held is None or (v.current, v.last_at) > (held.current, held.last_at):
                chosen[v.grader] = v
        return list(chosen.values())

    def rated_by(self, rater: str) -> set[str]:
        return {r.target for r in self.ratings if r.rater == rater}

    def digest(self) -> str:
        """A hash of everything the figures depend on: equal inputs, equal figures (computed
        once per `Inputs`)."""
        if self._digest is None:
            data = (
                [
                    (v.grader, v.grader_hash, v.mode, v.first_at, v.last_at, v.current, v.label)
                    + tuple(
                        (t, tuple((g.score, g.run_id) for g in grades))
                        for t, grades in sorted(v.grades.items())
                    )
                    for v in self.versions
                ],
                sorted((r.target, r.rater, r.score) for r in self.ratings),
                sorted(self.scenario_of.items()),
                sorted(self.lengths.items()),
            )
            self._digest = hashlib.sha256(repr(data).encode()).hexdigest()
        return self._digest


def relative(workspace: Workspace, path: str) -> str:
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


def scenario_name(path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    p = Path(path)
    return p.parent.name if p.name == "PROMPT.md" else p.stem


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_inputs(workspace: Workspace) -> Inputs:
    """Every grade and rating of the workspace's conversations (grade sessions excluded)."""
    sessions = list(
        Session.objects.filter(workspace=workspace)
        .exclude(origin="grade")
        .only("id", "meta", "conversation_score", "message_refs", "messages")
    )
    inputs = Inputs([], [], {}, {}, {}, {})
    for fb in Feedback.objects.filter(session__in=sessions).only(
        "session_id", "message_ref_id", "rater", "score"
    ):
        target = target_key(fb.session_id, fb.message_ref_id)
        inputs.ratings.append(Rating(target, fb.rater, float(fb.score)))
    versions: dict[tuple[str, str], GraderVersion] = {}
    for session in sessions:
        meta = session.meta or {}
        scenario = scenario_name(meta.get("scenarioPath"))
        if scenario:
            inputs.scenario_of[session.id] = scenario
        _read_messages(inputs, session)
        score = (session.conversation_score or {}).get("score")
        if _is_number(score):
            rater = str((session.conversation_score or {}).get("rater") or "")
            inputs.ratings.append(
                Rating(target_key(session.id, None), rater, float(score))  # type: ignore[arg-type]
            )
        for run in meta.get("gradingRuns") or []:  # newest first
            if isinstance(run, dict) and run.get("status") in (None, "completed"):
                _read_run(workspace, inputs, versions, session, run)
    current = {grader: _current_hash(workspace, grader) for grader, _ in versions}
    for (grader, grader_hash), version in versions.items():
        version.current = current.get(grader) == grader_hash
    inputs.versions = sorted(versions.values(), key=lambda v: (v.grader, v.first_at))
    return inputs


def _read_messages(inputs: Inputs, session: Session) -> None:
    messages = session.messages or []
    total = 0
    for i, ref in enumerate(session.message_refs or []):
        if i >= len(messages) or messages[i].get("role") != "assistant" or not ref.get("id"):
            continue
        length = len(content_text(messages[i].get("content")))
        if not length:  # a step that only calls tools: no reply a person could rate
            continue
        target = target_key(session.id, ref["id"])
        inputs.session_of[target], inputs.ref_of[target] = session.id, ref["id"]
        inputs.lengths[target] = length
        inputs.message_targets.append(target)
        total += length
    conversation = target_key(session.id, None)
    inputs.session_of[conversation], inputs.ref_of[conversation] = session.id, None
    inputs.lengths[conversation] = total


def _read_run(
    workspace: Workspace,
    inputs: Inputs,
    versions: dict[tuple[str, str], GraderVersion],
    session: Session,
    run: dict[str, Any],
) -> None:
    grader = relative(workspace, str(run.get("graderPath") or run.get("graderId") or "?"))
    grader_hash = str(run.get("graderHash") or UNKNOWN_HASH)
    mode = "turns" if run.get("mode") == "turns" else "conversation"
    version = versions.get((grader, grader_hash))
    if version is None:
        label = run.get("graderLabel") or Path(grader).parent.name
        version = versions[(grader, grader_hash)] = GraderVersion(grader, label, grader_hash, mode)
    at = str(run.get("runAt") or "")
    if at:
        version.first_at = min(version.first_at or at, at)
        version.last_at = max(version.last_at, at)
    run_id = str(run.get("runId") or run.get("id") or "")
    for result in run.get("results") or []:
        score = result.get("score") if isinstance(result, dict) else None
        if not isinstance(score, int | float) or isinstance(score, bool):
            continue
        if mode == "turns":
            ref = result.get("messageRefId")
            if not ref:
                continue
            target = target_key(session.id, ref)
        else:
            target = target_key(session.id, None)
        reason = str(result.get("reason") or "")
        version.grades.setdefault(target, []).append(Grade(float(score), reason, run_id, at))
