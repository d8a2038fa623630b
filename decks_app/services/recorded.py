"""What a recorded trace says about its run: the model that answered, the tokens and cost
it used, and the turns it ran.

Plain functions over trace event payloads (the dicts stored in `TraceEvent.payload`, or the
lines of a `gambit run --trace` file). The run executor uses them on the events of a live
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

Payload = dict[str, Any]
IsRoot = Callable[[Payload], bool]

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
    payloads = [p for p in payloads if isinstance(p, dict)]
    starts = [_norm(p.get("deckPath")) for p in payloads if p.get("type") == "run.start"]
    seen = [s for s in starts if s] or [
        d
        for d in (_norm(p.get("deckPath")) for p in payloads if p.get("type") == "model.result")
        if d
    ]
    exact, rel = _norm(abs_path), _norm(rel_path)
    wanted: set[str] | None = None
    if exact and exact in seen:
        wanted = {exact}
    elif rel and any(d.endswith(os.sep + rel) for d in seen):
        wanted = {d for d in seen if d.endswith(os.sep + rel)}
    elif starts and seen:
        wanted = {seen[0]}

    def is_root(payload: Payload) -> bool:
        if payload.get("parentActionCallId"):
            return False
        return wanted is None or _norm(payload.get("deckPath")) in wanted

    return is_root


def _model_label(payload: Payload) -> str | None:
    if payload.get("provider") == REPLAY_PROVIDER:
        return REPLAY_PROVIDER  # the replay answered, whatever model the deck names
    model = payload.get("model")
    return model if isinstance(model, str) and model else None


def answered_model(payloads: Iterable[Payload], is_root: IsRoot) -> tuple[str, bool] | None:
    """(the model or models that answered the root deck, whether offline), from its
    `model.result` events; None when no model answered."""
    labels: list[str] = []
    offline = False
    for p in payloads:
        if p.get("type") != "model.result" or not is_root(p):
            continue
        label = _model_label(p)
        if label and label not in labels:
            labels.append(label)
        offline = offline or bool(p.get("offline"))
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
        kind = p.get("type")
        run = p.get("runId")
        if kind == "run.end" and isinstance(p.get("usage"), dict):
            ended[run] = add_usage(ended.get(run) or {}, p["usage"])
        elif kind == "model.result":
            calls[run] = add_usage(calls.get(run), p.get("usage"))
    total: dict[str, Any] | None = None
    for usage in ended.values():
        total = add_usage(total, usage)
    for run, usage in calls.items():
        if run not in ended:
            total = add_usage(total, usage)
    return total


def usage_totals(usage: dict[str, Any] | None) -> tuple[int, float | None]:
    """(total tokens, cost in USD or None) of a usage record."""
    usage = usage or {}
    cost = next((usage[k] for k in COST_KEYS if isinstance(usage.get(k), int | float)), None)
    return int(usage.get("totalTokens") or 0), float(cost) if cost is not None else None


def root_turns(payloads: Iterable[Payload], is_root: IsRoot) -> list[Payload]:
    """The root deck's recorded `run.start` events, in order: one per turn."""
    return [p for p in payloads if p.get("type") == "run.start" and is_root(p)]


def turn_message(start: Payload) -> Any:
    """The user message a recorded turn started with (None: the deck spoke first)."""
    return start.get("initialUserMessage")
