"""Import and export: SavedState JSON and trace JSONL, the files the CLI reads and writes.

- `export_state(session)`: the SavedState (docs/decks.md, "Saved state"), with `feedback`,
  `notes` and `conversationScore`; `gambit run --state FILE` continues it.
- `export_trace(session)`: one JSON event per line, every run in order.
- `import_session(...)`: a session from a state file and/or a trace file, with one
  completed run of kind `manual` holding the imported trace events, the usage of every run
  the trace recorded and the model its `model.result` events name. `meta` is kept whole
  (`gradingRuns`, `gradingFlags`: the Grade tab shows them as imported grades).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from django.db import transaction
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent, Workspace
from decks_app.runs import recorded
from decks_app.runs.state import session_state_dict, with_message_refs
from decks_app.sessions.actions import MAX_MESSAGE_CHARS, InvalidInput
from decks_app.sessions.conversation import feedback_dict
from decks_app.workspaces.served import find_deck, jailed_path
from gambit.core import StateError, new_id, state_from_dict, state_to_dict

KNOWN_KEYS = {
    "format",
    "runId",
    "messages",
    "items",
    "messageRefs",
    "meta",
    "notes",
    "conversationScore",
    "feedback",
    "traces",
}


def export_state(session: Session) -> dict[str, Any]:
    state = session_state_dict(session) or {
        "format": session.format or "responses",
        "runId": session.state_run_id or session.id,
        "items": [],
    }
    feedback = [feedback_dict(fb) for fb in session.feedback.all()]
    if feedback:
        state["feedback"] = feedback
    # Normalise through the engine's model so the file is exactly what the CLI expects.
    return state_to_dict(state_from_dict(state))


def export_trace(session: Session) -> Iterator[str]:
    for payload in (
        TraceEvent.objects.filter(session=session).order_by("id").values_list("payload", flat=True)
    ):
        yield json.dumps(payload, ensure_ascii=False) + "\n"


def parse_trace(text: str) -> list[dict[str, Any]]:
    events = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"trace line {n} is not JSON: {exc}") from exc
        except RecursionError:
            raise InvalidInput(f"trace line {n} is nested too deeply") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise InvalidInput(f"trace line {n} is not a trace event (an object with a type)")
        events.append(event)
    return events


def parse_state(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"the state file is not JSON: {exc}") from exc
    except RecursionError:
        raise InvalidInput("the state file is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidInput("the state file must hold a JSON object")
    try:
        state = state_to_dict(state_from_dict(data))
    except StateError as exc:
        raise InvalidInput(f"not a SavedState: {exc}") from exc
    except RecursionError:
        raise InvalidInput("the state file is nested too deeply") from None
    for n, message in enumerate(state.get("messages") or [], 1):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and len(content) > MAX_MESSAGE_CHARS:
            raise InvalidInput(
                f"message {n} of the state is longer than {MAX_MESSAGE_CHARS:,} characters"
            )
    return state


def _recorded_deck(state: dict[str, Any], trace: list[dict[str, Any]]) -> str:
    """The deck the state (its meta.deckPath) or the trace (its first run.start) was
    recorded with, or "" when neither says."""
    meta = state.get("meta") if isinstance(state.get("meta"), dict) else {}
    path = meta.get("deckPath") if isinstance(meta, dict) else None
    if not path:
        start = next((e for e in trace if e.get("type") == "run.start"), {})
        path = start.get("deckPath")
    return str(path) if isinstance(path, str) else ""


def _same_deck(recorded: str, deck_path: str) -> bool:
    """Whether `recorded` (absolute from a CLI run, relative from the simulator) names the
    workspace's `deck_path`: the same relative path, or the same folder and file name (a
    project moved or checked out elsewhere)."""
    shown = PurePosixPath(recorded.replace("\\", "/"))
    wanted = PurePosixPath(deck_path)
    if str(shown) == str(wanted) or str(shown).endswith("/" + str(wanted)):
        return True
    return (shown.parent.name, shown.name) == (wanted.parent.name, wanted.name)


def import_session(
    workspace: Workspace,
    deck_path: str,
    *,
    state: dict[str, Any] | None,
    trace: list[dict[str, Any]] | None,
) -> Session:
    if state is None and not trace:
        raise InvalidInput("give a state file, a trace file, or both")
    deck = find_deck(workspace, deck_path)
    if deck is None:
        raise InvalidInput(f"no deck at {deck_path!r} in this workspace")
    state = state or {}
    trace = list(trace or [])
    if not trace and state.get("traces"):
        trace = [t for t in state["traces"] if isinstance(t, dict)]
    recorded_with = _recorded_deck(state, trace)
    if recorded_with and not _same_deck(recorded_with, deck.path):
        # A conversation of one deck filed under another misleads every page after it (the
        # header, the trace, grades and replays name the wrong agent).
        raise InvalidInput(
            f"these files were recorded with the deck {recorded_with}, not {deck.path}; choose "
            "that deck in the form"
        )
    messages = state.get("messages")
    with transaction.atomic():
        session = Session.objects.create(
            workspace=workspace,
            deck_path=deck.path,
            deck_label=deck.label,
            origin="import",
            state_run_id=state.get("runId") or new_id("run"),
            format=state.get("format") or "",
            messages=messages,
            items=state.get("items"),
            message_refs=with_message_refs(messages or [], state.get("messageRefs"))
            if messages
            else None,
            meta=state.get("meta"),
            notes=state.get("notes"),
            conversation_score=state.get("conversationScore"),
            extra={k: v for k, v in state.items() if k not in KNOWN_KEYS},
            state_version=1,
        )
        end: dict[str, Any] = next((e for e in reversed(trace) if e.get("type") == "run.end"), {})
        # Tokens and cost: every run the trace recorded (a CLI trace file gathers each
        # `gambit run` appended to it), not only the last; the model: the one whose
        # model.result events answered the deck.
        usage = recorded.trace_usage(trace) or {}
        tokens, cost = recorded.usage_totals(usage)
        answered = recorded.answered_model(
            trace,
            recorded.root_matcher(
                trace, abs_path=str(jailed_path(workspace, deck.path)), rel_path=deck.path
            ),
        )
        model, offline = answered or ("", False)
        run = Run.objects.create(
            session=session,
            kind="manual",
            status={"completed": "completed", "failed": "failed", "canceled": "canceled"}.get(
                end.get("status") or "", "completed"
            ),
            error=end.get("error") or "",
            finished_at=timezone.now(),
            started_at=timezone.now(),
            usage=usage or None,
            total_tokens=tokens,
            cost=cost,
            model=model,
            offline=offline,
        )
        TraceEvent.objects.bulk_create(
            TraceEvent(
                run=run,
                session=session,
                seq=i + 1,
                type=str(e["type"])[:80],
                payload=e,
                ts=int(e.get("ts") or 0) if isinstance(e.get("ts"), int | float) else 0,
            )
            for i, e in enumerate(trace)
        )
        for fb in state.get("feedback") or []:
            ref = fb.get("messageRefId")
            score = fb.get("score")
            if ref and isinstance(score, int | float):
                session.feedback.update_or_create(
                    message_ref_id=ref,
                    rater=str(fb.get("rater") or "")[:80],
                    defaults={
                        "score": max(-3, min(3, round(score))),
                        "reason": fb.get("reason") or "",
                    },
                )
    return session
