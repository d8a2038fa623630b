"""What a recorded trace says about its run: the model that answered, the tokens and cost
it used, and the turns it ran.

Plain functions over trace event payloads (the dicts stored in `TraceEvent.payload`, or the
lines of a `gambit run --trace` file), read as their `gambit.core` event models
(`trace_event_view`). The run executor uses them on the events of a live
run, imports on the trace of a CLI run, and offline replays on the trace they replay, so
the three agree on what a recording holds.

"Root" events are those of the session's own deck: not inside an action (no
`parentActionCallId`) and not from another top-level deck that shares the trace (the
persona of a scenario run).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from gambit.core import ModelResultEvent, RunEndEvent, RunStartEvent, json_dict, trace_event_view

Payload = dict[str, Any]
IsRoot = Callable[[Any], bool]  # takes an event model

REPLAY_PROVIDER = "offline-replay"
USAGE_KEYS = ("promptTokens", "completionTokens", "totalTokens", "reasoningTokens", "cachedTokens")
COST_KEYS = ("costUsd", "cost")


def _norm(path: Any) -> str | None:
    return os.path.normpath(path) if isinstance(path, str) and path else None


def root_matcher(
    payloads: Iterable[Payload], *, abs_path: str | None, rel_path: str | None = None
) -> IsRoot:
    """A predicate for the root deck's top-level events.

    The root deck is the one at `abs_path` (the session's deck in this workspace); for a
    trace recorded elsewhere (an import), the deck whose recorded path ends with
    `rel_path`; failing both, the deck of the trace's first `run.start`.
    """
    events = [trace_event_view(p) for p in payloads if isinstance(p, dict)]
    starts = [_norm(e.deck_path) for e in events if isinstance(e, RunStartEvent)]
    seen = [s for s in starts if s] or [
        d for d in (_norm(e.deck_path) for e in events if isinstance(e, ModelResultEvent)) if d
    ]
    exact, rel = _norm(abs_path), _norm(rel_path)
    wanted: set[str] | None = None
    if exact and exact in seen:
        wanted = {exact}
    elif rel and any(d.endswith(os.sep + rel) for d in seen):
        wanted = {d for d in seen if d.endswith(os.sep + rel)}
    elif starts and seen:
        wanted = {seen[0]}

    def is_root(event: Any) -> bool:
        if getattr(event, "parent_action_call_id", None):
            return False
        return wanted is None or _norm(getattr(event, "deck_path", None)) in wanted

    return is_root


def _model_label(event: ModelResultEvent) -> str | None:
    if event.provider == REPLAY_PROVIDER:
        return REPLAY_PROVIDER  # the replay answered, whatever model the deck names
    model = event.model
    return model if isinstance(model, str) and model else None


def answer_of(event: Payload) -> Payload:
    """What `answered_model` reads of a `run.start` or `model.result` event (kept while a run
    goes on, for its end)."""
    return {k: event.get(k) for k in ("type", "deckPath", "model", "provider", "offline", "runId")}


def answered_model(payloads: Iterable[Payload], is_root: IsRoot) -> tuple[str, bool] | None:
    """(the model or models that answered the root deck, whether offline), from its
    `model.result` events; None when no model answered."""
    labels: list[str] = []
    offline = False
    for p in payloads:
        event = trace_event_view(p)
        if not isinstance(event, ModelResultEvent) or not is_root(event):
            continue
        label = _model_label(event)
        if label and label not in labels:
            labels.append(label)
        offline = offline or bool(event.offline)
    if not labels:
        return None
    return ", ".join(labels)[:200], offline


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """`total` plus one usage record (`run.end` or `model.result` usage, camelCase)."""
    if not isinstance(usage, dict):
        return total
    out = dict(total or {})
    for key in USAGE_KEYS:
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = out.get(key, 0) + int(value)
    cost = next((usage[k] for k in COST_KEYS if isinstance(usage.get(k), int | float)), None)
    if cost is not None and not isinstance(cost, bool):
        out["costUsd"] = round(out.get("costUsd", 0.0) + float(cost), 8)
    return out


def trace_usage(payloads: Iterable[Payload]) -> dict[str, Any] | None:
    """All the usage a trace records: every `run.end` (one per `run_deck` call, with the
    whole call's usage); for a run whose `run.end` is missing (cut off) or carries no
    usage, its `model.result`s."""
    ended: dict[Any, dict[str, Any] | None] = {}
    calls: dict[Any, dict[str, Any] | None] = {}
    for p in payloads:
        match trace_event_view(p):
            case RunEndEvent(run_id=run, usage=usage) if json_dict(usage):
                ended[run] = add_usage(ended.get(run) or {}, json_dict(usage))
            case ModelResultEvent(run_id=run, usage=usage):
                calls[run] = add_usage(calls.get(run), json_dict(usage) or None)
    total: dict[str, Any] | None = None
    for spent in ended.values():
        total = add_usage(total, spent)
    for run, spent in calls.items():
        if run not in ended:
            total = add_usage(total, spent)
    return total


def usage_totals(usage: dict[str, Any] | None) -> tuple[int, float | None]:
    """(total tokens, cost in USD or None) of a usage record."""
    usage = usage or {}
    cost = next((usage[k] for k in COST_KEYS if isinstance(usage.get(k), int | float)), None)
    return int(usage.get("totalTokens") or 0), float(cost) if cost is not None else None


def root_turns(payloads: Iterable[Payload], is_root: IsRoot) -> list[Payload]:
    """The root deck's recorded `run.start` events, in order: one per turn."""
    return [
        p
        for p in payloads
        if isinstance(event := trace_event_view(p), RunStartEvent) and is_root(event)
    ]


def turn_message(start: Payload) -> Any:
    """The user message a recorded turn started with (None: the deck spoke first)."""
    return trace_event_view(start).initial_user_message
