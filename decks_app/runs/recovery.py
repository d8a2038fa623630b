"""What an interrupted run leaves in its conversation: the user's message it had not saved
yet and the reply that was streaming (for the kinds that have them, see `RunKind.user_turn`
and `RunKind.partial_reply`), and a `run.end` that closes its trace."""

from __future__ import annotations

import time
from typing import Literal

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import events as event_log
from decks_app.runs import registry
from decks_app.runs.registry import JSONObject, TurnParams
from decks_app.runs.state import with_message_refs
from gambit.core import (
    ModelCallEvent,
    ModelResultEvent,
    ResponseTraceEvent,
    item_to_dict,
    json_dict,
    message_item,
    trace_event_view,
)

INTERRUPTED = "interrupted: the server or worker stopped while this run was in flight"


def _kind(run: Run) -> registry.RunKind | None:
    try:
        return registry.get(run.kind)
    except registry.UnknownRunKind:
        return None  # a kind whose app is gone: its trace is closed, nothing else is known


def _user_message(run: Run, kind: registry.RunKind | None) -> str | None:
    if kind is None or not kind.user_turn:
        return None
    try:
        return run.read_params(TurnParams).message
    except (TypeError, ValueError):
        return None


def recover_interrupted_turn(run: Run, session: Session) -> None:
    """Put what an interrupted run had into its conversation (the caller saves the session).

    The user's message is kept when no checkpoint of this run holds it yet, and the reply
    that was streaming when the run stopped (its text deltas are in the trace) is kept as an
    assistant message whose ref says `"status": "interrupted"`, so the page can mark it and
    offer Retry. A `run.end` event with status `interrupted` closes the run's trace.
    """
    kind = _kind(run)
    base = run.turn_base or {}
    events = list(TraceEvent.objects.filter(run=run).order_by("seq").values_list("seq", "payload"))
    last_seq = events[-1][0] if events else 0
    saved_nothing = (
        len(session.messages or []) == base.get("savedMessages", -1) == base.get("messages")
    )
    added: list[tuple[Literal["user", "assistant"], str]] = []
    message = _user_message(run, kind)
    if saved_nothing and message:
        added.append(("user", message))
    # The pass that was streaming never reached the saved state (a state only takes a reply
    # once its model call returns), whatever was checkpointed after it. A scenario's persona
    # also streams as a root deck, so only chat-like runs get their partial reply back.
    partial = partial_reply([p for _, p in events]) if kind and kind.partial_reply else ""
    if partial:
        added.append(("assistant", partial))
    if added:
        chat_only = session.format == "chat" and not session.items
        messages = list(session.messages or [])
        items = list(session.items or [])
        for role, text in added:
            messages.append({"role": role, "content": text})
            if not chat_only:
                items.append(item_to_dict(message_item(role, text)))
        session.messages = messages
        session.items = None if chat_only else items
        session.format = session.format or ("chat" if chat_only else "responses")
        refs = with_message_refs(messages, session.message_refs)
        if partial:
            refs[-1] = {**refs[-1], "status": "interrupted", "runId": run.id}
        session.message_refs = refs
        session.state_version += 1
    if not any(p.get("type") == "run.end" for _, p in events[-3:]):
        end = {
            "type": "run.end",
            "runId": session.state_run_id or run.id,
            "status": "interrupted",
            "error": run.error or INTERRUPTED,
            "ts": int(time.time() * 1000),
        }
        event_log.append_events(run.id, session.id, last_seq + 1, [end])


def partial_reply(payloads: list[JSONObject]) -> str:
    """The root deck's text streamed after its last model call, if that call never ended."""
    text: list[str] = []
    for p in payloads:
        match trace_event_view(p):
            case ModelCallEvent() | ModelResultEvent() as call if not call.parent_action_call_id:
                text = []  # a new call starts, or a finished one is in the saved state
            case ResponseTraceEvent(type=event_log.TEXT_DELTA) as delta:
                piece = (delta.model_extra or {}).get("delta")
                root = not json_dict(delta.gambit).get("parent_action_call_id")
                if root and isinstance(piece, str):
                    text.append(piece)
    return "".join(text).strip()
