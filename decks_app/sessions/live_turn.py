"""The live part of a session page: what an active run has said that its saved conversation
does not hold yet, as the same bubbles and activity blocks the finished conversation shows.

A run publishes its conversation after every pass and the trace writer saves it with the
events it covers (`Run.turn_base["checkpointSeq"]`, docs/simulator.md, "Live updates"). The
page is that saved conversation, rendered from the session's messages, plus this module's
fold of the run's events after the checkpoint: the root deck's user message, its finished
passes (text and tool calls) and the reply streaming now. Nothing is shown twice (an event
the checkpoint covers is in the messages, never folded here), and a scenario's persona is
never the root deck: its instructions stay hidden, its reply is shown as the user's message
it is about to become (streaming while the persona writes it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import events as event_log
from decks_app.sessions.conversation import Bubble, content_text
from decks_app.workspaces.served import PathOutsideWorkspace, jailed_path
from gambit.core import (
    MessageUserEvent,
    ModelCallEvent,
    ModelResultEvent,
    ResponseTraceEvent,
    ToolResultEvent,
    json_dict,
    trace_event_view,
)

STREAMING = "streaming"  # Bubble.status of text still arriving
_HIDDEN_CALLS = ("gambit_context", "gambit_init")  # as `conversation()` leaves them out


def _norm(path: Any) -> str | None:
    return os.path.normpath(path) if isinstance(path, str) and path else None


class _Fold:
    """Bubbles from a run's events, in order (see the module docstring). `deck` is the
    session's deck as the events name it; an event without a deck path is placed by its
    action call id (the deck.start that opened it)."""

    def __init__(self, deck_file: str) -> None:
        self.deck = _norm(deck_file)
        self.bubbles: list[Bubble] = []
        self.streaming: dict[bool, list[str]] = {}  # root? -> the text of its open model call
        self.persona_said: str | None = None  # the persona's reply, before the root takes it
        self.decks: dict[str, str] = {}  # action call id -> deck path
        self.root_calls: set[str] = set()  # action call ids of the root deck's executions

    def _where(self, event: Any) -> tuple[bool, str | None]:
        """(top level: not inside an action deck, the deck's path) of a trace event."""
        if isinstance(event, ResponseTraceEvent):
            meta = json_dict(event.gambit)
            top, deck, call = (
                not meta.get("parent_action_call_id"),
                _norm(meta.get("deck_path")),
                meta.get("action_call_id"),
            )
        else:
            top = not getattr(event, "parent_action_call_id", None)
            deck, call = (
                _norm(getattr(event, "deck_path", None)),
                getattr(event, "action_call_id", None),
            )
        if isinstance(call, str) and call:
            if deck is not None:
                self.decks.setdefault(call, deck)
            deck = deck or self.decks.get(call)
            if top and deck is not None and deck == self.deck:
                self.root_calls.add(call)
        return top, deck

    def add(self, payload: dict[str, Any]) -> None:
        event = trace_event_view(payload)
        if isinstance(event, ToolResultEvent):
            # a tool the root deck called: its result, paired with the call by its id
            if event.parent_action_call_id in self.root_calls and event.name not in _HIDDEN_CALLS:
                self.bubbles.append(
                    Bubble(
                        "tool_result",
                        _json(event.result),
                        name=event.name,
                        call_id=event.action_call_id,
                    )
                )
            return
        top, deck = self._where(event)
        if not top or deck is None and not isinstance(event, ResponseTraceEvent):
            return
        root = deck == self.deck if deck is not None else self._open_is_root()
        if root:
            self.persona_said = None  # the root deck speaks: the persona's turn is over
        match event:
            case MessageUserEvent() if root:
                content = json_dict(event.message).get("content")
                self.bubbles.append(Bubble("user", content_text(content)))
            case ModelCallEvent():
                self.streaming = {root: []}
            case ResponseTraceEvent(type=event_log.TEXT_DELTA) if root in self.streaming:
                delta = (event.model_extra or {}).get("delta")
                if isinstance(delta, str):
                    self.streaming[root].append(delta)
            case ModelResultEvent():
                self.streaming = {}
                text = content_text(json_dict(event.message).get("content"))
                if not root:
                    self.persona_said = text.strip() or None
                    return
                if text:
                    self.bubbles.append(Bubble("assistant", text))
                for raw in event.tool_calls or []:
                    call = json_dict(raw)  # `{id, name, args}`
                    name = str(call.get("name") or "tool")
                    if name not in _HIDDEN_CALLS:
                        args = call.get("args")
                        shown = args if isinstance(args, str) else _json(args)
                        self.bubbles.append(
                            Bubble("tool_call", shown, name=name, call_id=call.get("id"))
                        )

    def _open_is_root(self) -> bool:
        return next(iter(self.streaming), True)

    def result(self) -> list[Bubble]:
        out = list(self.bubbles)
        if self.persona_said:
            out.append(Bubble("user", self.persona_said))
        for root, parts in self.streaming.items():
            if parts:
                kind = "assistant" if root else "user"
                out.append(Bubble(kind, "".join(parts), status=STREAMING))
        return out


def _json(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def pending_bubbles(payloads: Iterable[dict[str, Any]], deck_file: str) -> list[Bubble]:
    """What the events (of one run, after its checkpoint) add to the saved conversation; or,
    given a whole trace, the conversation it records (the replay page)."""
    fold = _Fold(deck_file)
    for payload in payloads:
        fold.add(payload)
    return fold.result()


def checkpoint_seq(run: Run) -> int:
    """The last event of `run` its session's saved conversation covers."""
    seq = (run.turn_base or {}).get("checkpointSeq")
    return seq if isinstance(seq, int) else 0


def run_pending(run: Run, session: Session, cursor: int) -> list[Bubble]:
    """The live bubbles of an active run, read at `cursor` (the page's last event id)."""
    try:  # the path its runs load the deck from, as their events name it
        deck_file = str(jailed_path(session.workspace, session.deck_path))
    except PathOutsideWorkspace:
        deck_file = ""  # a deck no run can load: nothing is its own
    payloads = (
        TraceEvent.objects.filter(run=run, seq__gt=checkpoint_seq(run), id__lte=cursor)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    return pending_bubbles(payloads, deck_file)
