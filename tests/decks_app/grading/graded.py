"""Graded and rated sessions written straight to the database, for the calibration page and
the rating queue: each assistant message can carry grades (repeats too) and ratings by named
raters."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from decks_app.models import Feedback, Session
from gambit.core import load_deck_tree
from gambit.core._verify_run import deck_files_hash

TONE = "support/graders/tone/PROMPT.md"
OTHER = "support/graders/other/PROMPT.md"  # no such file: never the current version


def tone_hash(workspace) -> str:
    return deck_files_hash(load_deck_tree(Path(workspace.root) / TONE))


@dataclass
class Turn:
    """One assistant message: its grades per (grader path, hash) and its ratings per rater."""

    grades: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    ratings: dict[str, int] = field(default_factory=dict)
    reply: str = ""
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)


def ref(session_index: int, turn: int) -> str:
    return f"msg-{session_index:012d}{turn:012d}"


def graded_session(
    workspace,
    turns: list[Turn],
    *,
    index: int = 0,
    scenario: str | None = None,
    run_at: str = "2026-11-24T10:00:00+00:00",
    run_times: dict[str, str] | None = None,
) -> Session:
    """A session of `turns` (a user message before each), graded and rated as they say. Each
    repeat of a grader is a grade run of its own (newest first, as the simulator stores them)."""
    session = Session.objects.create(workspace=workspace, deck_path="support/PROMPT.md")
    messages, refs = [], []
    runs: dict[tuple[str, str, int], list[dict]] = {}
    for i, turn in enumerate(turns):
        msg = ref(index, i)
        messages += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": turn.reply or f"answer {i}"},
        ]
        refs += [
            {"id": f"msg-u{index:011d}{i:012d}", "role": "user"},
            {"id": msg, "role": "assistant"},
        ]
        for key, scores in turn.grades.items():
            for repeat, score in enumerate(scores):
                runs.setdefault((*key, repeat), []).append(
                    {
                        "score": score,
                        "reason": turn.reasons.get(key, f"grader reason {i}"),
                        "messageIndex": 2 * i + 1,
                        "messageRefId": msg,
                    }
                )
        for rater, score in turn.ratings.items():
            Feedback.objects.create(session=session, message_ref_id=msg, score=score, rater=rater)
    session.messages, session.message_refs = messages, refs
    grading_runs = []
    for (path, grader_hash, repeat), results in runs.items():
        at = (run_times or {}).get(grader_hash, run_at)
        grading_runs.append(
            {
                "id": f"grade-{index}-{grader_hash[:6]}-{repeat}",
                "graderPath": path,
                "graderLabel": Path(path).parent.name.capitalize(),
                "graderHash": grader_hash,
                "mode": "turns",
                "status": "completed",
                "runAt": at,
                "results": results,
            }
        )
    grading_runs.reverse()  # newest first
    session.meta = {"gradingRuns": grading_runs}
    if scenario:
        session.meta["scenarioPath"] = f"support/scenarios/{scenario}/PROMPT.md"
    session.save()
    return session
