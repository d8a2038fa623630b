"""Replay: step through a finished session's trace, and re-run it offline.

`frame(session, step)` folds the first `step` stored events into the conversation and the
tree as they were at that point. `rerun_offline(session)` creates a new session (origin
`replay`, linked to its source) whose single run replays every recorded model result with
the offline `ReplayProvider`: the turns the trace recorded (its root deck's `run.start`
messages), no network, comparable side by side. `rerun_blocker(session)` says in one
sentence why a session cannot be replayed (the page then offers no "Re-run offline").
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from itertools import zip_longest
from typing import Any

from django.urls import reverse

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import recorded
from decks_app.sessions import actions as sessions
from decks_app.sessions import conversation, live_turn
from decks_app.sessions.trace_tree import build_tree
from decks_app.workspaces.served import PathOutsideWorkspace, find_deck, jailed_path
from gambit.core import (
    ModelResultEvent,
    trace_event_view,
)


class NotReplayable(ValueError):
    pass


def _root_deck(session: Session, payloads: list[dict[str, Any]]) -> str:
    """The path the trace names the session's deck by (a trace recorded elsewhere, an
    import, names it by another absolute path: `recorded.root_matcher` finds it)."""
    try:
        deck_file: str | None = str(jailed_path(session.workspace, session.deck_path))
    except PathOutsideWorkspace:
        deck_file = None
    starts = [p for p in payloads if p.get("type") in ("run.start", "deck.start")]
    is_root = recorded.root_matcher(starts, abs_path=deck_file, rel_path=session.deck_path)
    for payload in starts:
        event = trace_event_view(payload)
        if is_root(event) and getattr(event, "deck_path", None):
            return str(event.deck_path)
    return deck_file or ""


def _is_step(event: Mapping[str, Any]) -> bool:
    """A replay step: every stored event but the provider's stream events (`response.*`),
    which are the text and items of their model call, shown at its result."""
    return not str(event["type"]).startswith("response.")


def frame(session: Session, step: int | None) -> dict[str, Any]:
    """The session as its trace says it was after `step` steps (default: the first step),
    with where its turns start (each run of its deck), for stepping by turn."""
    events = list(
        TraceEvent.objects.filter(session=session)
        .order_by("id")
        .values("id", "type", "payload", "run_id", "seq")
    )
    payloads = [e["payload"] for e in events]
    root = _root_deck(session, payloads)
    steps = [i for i, e in enumerate(events) if _is_step(e)]  # their indices in `events`
    total = len(steps)
    step = min(1, total) if step is None else max(0, min(step, total))
    upto = steps[step - 1] + 1 if step else 0  # the events shown: up to this step's, inclusive
    current = events[steps[step - 1]] if step else None
    turns = [  # the steps (1-based) that start a turn: a run of the session's deck
        n
        for n, i in enumerate(steps, 1)
        if events[i]["type"] == "run.start"
        and os.path.normpath(str(events[i]["payload"].get("deckPath") or ""))
        == os.path.normpath(root)
    ]
    turn = sum(1 for t in turns if t <= step)
    bubbles = live_turn.pending_bubbles(payloads[:upto], root)
    return {
        "session": session,
        "step": step,
        "total": total,
        "prev": max(0, step - 1),
        "next": min(total, step + 1),
        "turn": turn,
        "turns": len(turns),
        # the start of this turn (or of the one before, at a turn's first step)
        "prev_turn": max([t for t in turns if t < step] or [0]),
        "next_turn": min([t for t in turns if t > step] or [total]),
        "current": current,
        "conversation": conversation.conversation_blocks(bubbles),
        "tree": build_tree(
            [
                (e["id"], e["payload"])
                for e in events[:upto]
                if not str(e["type"]).startswith("response.")
            ]
        ),
    }


# Sessions whose trace is a conversation with their deck (grading, Verify and Build
# assistant sessions are re-run from their own pages).
REPLAYABLE_ORIGINS = ("manual", "import", "replay", "scenario")


class StillRunning(NotReplayable):
    """The session has a queued or running run (a conflict that passes, not a refusal)."""


def rerun_blocker(session: Session) -> str | None:
    """Why "Re-run offline" cannot replay this session (one sentence), or None when it can:
    a finished conversation with its deck whose trace recorded model results."""
    if session.origin not in REPLAYABLE_ORIGINS:
        return f"A {session.origin} session cannot be re-run offline; only conversations can."
    if session.runs.filter(status__in=Run.ACTIVE).exists():
        return "The session is still running; re-run it offline once it has finished."
    last = session.runs.order_by("-created_at").only("status").first()
    if last is not None and last.status in ("canceled", "interrupted"):
        # Stopped in the middle, its model calls were not all recorded: the replay would
        # fail at the first one missing (before, it was offered and failed so). A turn that
        # failed is replayed: the comparison shows whether it fails the same way.
        return (
            f"The last turn was stopped ({last.status}), so not all of its model results "
            "were recorded and a replay could not answer it."
        )
    if not (
        TraceEvent.objects.filter(session=session, type="model.result")
        .filter(payload__parentActionCallId__isnull=True)
        .exists()
    ):
        return (
            "This session has no recorded model results, so there is nothing a replay "
            "could answer from."
        )
    return None


def rerun_info(session: Session) -> dict[str, Any]:
    """For the pages and their JSON twins: whether "Re-run offline" is offered, and why not."""
    reason = rerun_blocker(session)
    return {
        "available": reason is None,
        "url": reverse("sessions:replay_rerun", args=[session.id]),
        "reason": reason,
    }


def _plan(source: Session) -> tuple[list[Any], Any]:
    """(the user message of each recorded turn, the context the first turn ran with)."""
    payloads = list(
        TraceEvent.objects.filter(session=source, type__in=("run.start", "model.result"))
        .order_by("id")
        .values_list("payload", flat=True)
    )
    try:
        deck_file = str(jailed_path(source.workspace, source.deck_path))
    except PathOutsideWorkspace:
        deck_file = None
    is_root = recorded.root_matcher(payloads, abs_path=deck_file, rel_path=source.deck_path)
    starts = recorded.root_turns(payloads, is_root)
    if not starts:
        raise NotReplayable(
            "This session's trace records no run of its deck, so there are no turns to replay."
        )
    if not any(
        isinstance(event := trace_event_view(p), ModelResultEvent) and is_root(event)
        for p in payloads
    ):
        raise NotReplayable(
            "This session's trace records no model results for its deck, so there is "
            "nothing a replay could answer from."
        )
    first_input = trace_event_view(starts[0]).input
    context = first_input if first_input is not None else source.context
    return [recorded.turn_message(s) for s in starts], context


def rerun_offline(source: Session) -> Session:
    reason = rerun_blocker(source)
    if reason is not None:
        busy = source.runs.filter(status__in=Run.ACTIVE).exists()
        raise (StillRunning if busy else NotReplayable)(reason)
    if find_deck(source.workspace, source.deck_path) is None:
        raise NotReplayable(f"The deck {source.deck_path} is no longer in this workspace.")
    _, context = _plan(source)
    replay = Session.objects.create(
        workspace=source.workspace,
        deck_path=source.deck_path,
        deck_label=source.deck_label,
        model="",
        context=context,
        origin="replay",
        source=source,
        state_run_id=source.state_run_id,
        format="responses",
        meta={"deckPath": source.deck_path, "replayOf": source.id},
    )
    sessions.enqueue_run(replay, message=None, kind="replay")
    return replay


# ---------------------------------------------------------------- compare

STATUS_SENTENCES = {
    "queued": "The replay has not started yet.",
    "running": "The replay is still running.",
    "failed": "The replay failed",
    "canceled": "The replay was canceled",
    "interrupted": "The replay was interrupted",
    "idle": "The replay never ran.",
}


def _clip(text: str | None, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Ids the runtime makes afresh on every run: in action results and `gambit_complete`
# envelopes they differ between a replay and its original however faithful the replay.
RUN_IDS = ("runId", "actionCallId", "parentActionCallId")


def _without_run_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_run_ids(v) for k, v in value.items() if k not in RUN_IDS}
    if isinstance(value, list):
        return [_without_run_ids(v) for v in value]
    return value


def _comparable(bubble: Any) -> tuple[str, str | None, Any]:
    """What must match for two rows to be the same: kind, tool name and text, with the
    per-run ids of tool payloads left out."""
    text: Any = bubble.text
    if bubble.kind in ("tool_call", "tool_result", "context"):
        try:
            text = _without_run_ids(json.loads(bubble.text))
        except (ValueError, RecursionError):
            pass
    return bubble.kind, bubble.name, text


def _row_label(bubble: Any) -> str:
    kind = bubble.kind.replace("_", " ")
    return f"{kind} {bubble.name}" if bubble.name else kind


def compare(replay: Session) -> dict[str, Any]:
    """A replay beside the session it replayed: every conversation row side by side (tool
    rows compared without the ids each run makes afresh), the status of both, and what
    differs (a replay that did not complete, the first differing row, missing or extra
    turns). `verdict` is "identical" only for a completed replay
    whose rows all match; "pending" while it is queued or running; else "different"."""
    source = replay.source
    assert source is not None
    left = conversation.conversation(source)
    right = conversation.conversation(replay)
    rows = []
    first: int | None = None
    for index, (a, b) in enumerate(zip_longest(left, right)):
        same = bool(a and b and _comparable(a) == _comparable(b))
        if not same and first is None:
            first = index
        rows.append(
            {
                "index": index,
                "original": a.to_dict() if a else None,
                "replay": b.to_dict() if b else None,
                "same": same,
            }
        )
    source_run = source.runs.order_by("-created_at").first()
    replay_run = replay.runs.order_by("-created_at").first()
    status: dict[str, Any] = {
        "original": source_run.status if source_run else "idle",
        "replay": replay_run.status if replay_run else "idle",
        "replayError": (replay_run.error or None) if replay_run else None,
    }
    turns = {
        "original": sum(1 for b in left if b.kind == "user"),
        "replay": sum(1 for b in right if b.kind == "user"),
    }
    differences: list[dict[str, Any]] = []
    if status["replay"] != "completed":
        sentence = STATUS_SENTENCES.get(status["replay"], f"The replay ended {status['replay']}")
        if status["replayError"]:
            sentence = f"{sentence.rstrip('.')}: {_clip(status['replayError'], 300)}"
        elif not sentence.endswith("."):
            sentence += "."
        differences.append({"kind": "status", "message": sentence, **status})
    elif status["original"] not in ("completed", "idle"):
        differences.append(
            {
                "kind": "status",
                "message": f"The original's last run ended {status['original']}; "
                "the replay completed.",
                **status,
            }
        )
    if first is not None and first < min(len(left), len(right)):
        row, a, b = rows[first], left[first], right[first]
        differences.append(
            {
                "kind": "message",
                "index": first,
                "message": f"Row {first + 1} differs: the original has {_row_label(a)} "
                f"“{_clip(a.text)}”, the replay {_row_label(b)} “{_clip(b.text)}”.",
                "original": row["original"],
                "replay": row["replay"],
            }
        )
    if len(right) < len(left):
        missing = left[len(right) :]
        lost = sum(1 for b in missing if b.kind == "user")
        differences.append(
            {
                "kind": "missing",
                "index": len(right),
                "count": len(missing),
                "turns": lost,
                "message": f"The replay is missing {len(missing)} "
                f"row{'s' if len(missing) != 1 else ''} of the original from row "
                f"{len(right) + 1} on"
                + (
                    f" ({lost} of {turns['original']} turn{'s' if turns['original'] != 1 else ''})"
                    if lost
                    else ""
                )
                + ".",
            }
        )
    elif len(right) > len(left):
        extra = len(right) - len(left)
        differences.append(
            {
                "kind": "extra",
                "index": len(left),
                "count": extra,
                "message": f"The replay has {extra} row{'s' if extra != 1 else ''} more than "
                f"the original, from row {len(left) + 1} on.",
            }
        )
    pending = status["replay"] in Run.ACTIVE
    if pending:
        verdict = "pending"
    elif differences:
        verdict = "different"
    else:
        verdict = "identical"
    return {
        "session": replay.id,
        "source": source.id,
        "verdict": verdict,
        "identical": verdict == "identical",
        "status": status,
        "turns": turns,
        "firstDifference": first,
        "differences": differences,
        "rows": rows,
    }
