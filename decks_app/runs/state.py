"""A session's conversation as runs read and write it: its SavedState, the message refs that
go with its messages, and where a run's turn starts (`Run.turn_base`).

A save never overwrites a newer conversation (`save_turn_state`): a run writes only over the
conversation it saved last.
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, TypedDict, cast

from decks_app.models import Run, Session
from decks_app.runs.registry import JSONObject
from gambit.core import new_id, state_to_dict

log = logging.getLogger(__name__)


class TurnBase(TypedDict):
    """`Run.turn_base`: where a run's turn starts in its session's conversation (the state
    version and message, item and ref counts: Retry cuts back to them) and how far its saves
    got (`savedMessages`, `savedItems`: a save writes only over its own last one;
    `checkpointSeq`: the last trace event the saved conversation covers)."""

    stateVersion: int
    messages: int
    items: int
    refs: int
    savedMessages: int
    savedItems: int
    checkpointSeq: NotRequired[int | None]


def session_state_dict(session: Session) -> JSONObject | None:
    """The session's SavedState as a dict (None while it has no conversation)."""
    if not session.messages and not session.items:
        return None
    state: JSONObject = dict(session.extra or {})
    state.update(
        {
            "format": session.format or None,
            "runId": session.state_run_id or session.id,
            "messages": session.messages,
            "items": session.items,
            "messageRefs": session.message_refs,
            "meta": session.meta,
            "notes": session.notes,
            "conversationScore": session.conversation_score,
        }
    )
    return {k: v for k, v in state.items() if v is not None}


def with_message_refs(
    messages: list[JSONObject], refs: list[JSONObject] | None
) -> list[JSONObject]:
    """Refs aligned with messages: kept by index when the role matches, new ones otherwise."""
    refs = list(refs or [])
    out = []
    for i, message in enumerate(messages):
        role = message.get("role", "")
        if i < len(refs) and refs[i].get("role") == role and refs[i].get("id"):
            out.append(refs[i])
        else:
            out.append({"id": new_id("msg"), "role": role, "source": "manual"})
    return out


def turn_base(session: Session, last_seq: int) -> TurnBase:
    """Where a run's turn starts in the session's conversation (see `TurnBase`)."""
    messages = len(session.messages or [])
    items = len(session.items or [])
    return {
        "stateVersion": session.state_version,
        "messages": messages,
        "items": items,
        "refs": len(session.message_refs or []),
        "savedMessages": messages,
        "savedItems": items,
        "checkpointSeq": last_seq,
    }


def save_turn_state(run: Run, session: Session, state: Any, *, last_seq: int | None) -> bool:
    """Write a run's state into its session (the caller saves both rows, holding their locks).

    A save never overwrites a newer conversation: it is written only over the one this run
    saved last (same message and item counts); a change of meta alone, such as a grade,
    does not block it. Returns False, changing nothing, when the conversation moved on.
    """
    base = cast(TurnBase, dict(run.turn_base or turn_base(session, 0)))
    if len(session.messages or []) != base.get("savedMessages") or len(
        session.items or []
    ) != base.get("savedItems"):
        log.warning("run %s: the session's conversation changed meanwhile; not saved", run.id)
        return False
    data = state_to_dict(state)
    session.format = data.get("format") or session.format
    session.state_run_id = data.get("runId") or session.state_run_id
    session.messages = data.get("messages")
    session.items = data.get("items")
    if data.get("meta"):
        session.meta = {**(session.meta or {}), **data["meta"]}
    session.message_refs = with_message_refs(session.messages or [], session.message_refs)
    session.state_version += 1
    base["savedMessages"] = len(session.messages or [])
    base["savedItems"] = len(session.items or [])
    if last_seq is not None:
        base["checkpointSeq"] = last_seq
    run.turn_base = base
    return True
