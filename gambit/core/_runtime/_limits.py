"""Guardrails: how deep decks may nest, how many model passes a deck may take, and the run's
deadline.

`run_deck` starts from the caller's `Guardrails` over the defaults (`_root_limits`); every deck
execution then lays its own `[guardrails]` over what it inherited (`_deck_limits`). A deck's
timeout starts a deadline when the deck starts, capped by the inherited one: a child can
tighten the deadline, never extend it. Awaits that may take long (provider calls, deck code,
tool handlers) go through `_with_deadline`, which cancels them when the deadline passes.

The limits also carry the run's `Clock`: where deadlines, and the onIdle/onBusy handler
timers (`_handlers`), read the time and wait. It is the system's monotonic clock and
`asyncio.sleep` unless the caller passes another to `run_deck` (tests pass one that moves
only when told, so what a handler reports as elapsed does not depend on the machine).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._deck import Deck, Guardrails
from ._common import RunError

DEFAULT_MAX_DEPTH = 3
DEFAULT_MAX_PASSES = 10
DEFAULT_TIMEOUT_MS = 120_000


class _DeadlineExceeded(RunError):
    """The run's own deadline passed (guardrails.timeoutMs); never confused with a
    `TimeoutError` raised by deck code or a tool handler. The message names the deck that was
    running and the limit that ran out."""

    def __init__(self, deck_path: str, timeout_ms: int | None = None):
        limit = f"{timeout_ms} ms" if timeout_ms else "the run's time limit"
        super().__init__(
            f"Timeout exceeded: {deck_path} was still running after {limit} "
            "(guardrails.timeoutMs; fix: raise it, or make the deck finish sooner)",
            code="timeout",
            deck_path=deck_path,
        )


@dataclass(frozen=True)
class Clock:
    """Where the runtime reads the time (`monotonic`, in seconds) and waits (`sleep`)."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep


SYSTEM_CLOCK = Clock()


@dataclass
class _Limits:
    """A run's guardrails and its deadline, read from `clock`."""

    guardrails: Guardrails
    deadline: float | None  # clock.monotonic() seconds
    clock: Clock = SYSTEM_CLOCK
    deadline_ms: int | None = None  # the timeoutMs that set `deadline` (for the message)

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock.monotonic()

    def check(self, deck_path: str) -> None:
        if self.deadline is not None and self.clock.monotonic() >= self.deadline:
            raise _DeadlineExceeded(deck_path, self.deadline_ms)


def _root_limits(caller: Guardrails, clock: Clock = SYSTEM_CLOCK) -> _Limits:
    """The caller's guardrails over the defaults; the deadline starts with the root deck."""
    merged = Guardrails(
        max_depth=_first(caller.max_depth, DEFAULT_MAX_DEPTH),
        max_passes=_first(caller.max_passes, DEFAULT_MAX_PASSES),
        timeout_ms=_first(caller.timeout_ms, DEFAULT_TIMEOUT_MS),
    )
    return _Limits(merged, None, clock)


def _deck_limits(deck: Deck, inherited: _Limits) -> _Limits:
    """A deck's own `[guardrails]` override the caller's and propagate to its children."""
    own = deck.guardrails
    merged = Guardrails(
        max_depth=_first(own.max_depth, inherited.guardrails.max_depth),
        max_passes=_first(own.max_passes, inherited.guardrails.max_passes),
        timeout_ms=_first(own.timeout_ms, inherited.guardrails.timeout_ms),
    )
    # The effective timeout starts a deadline now, capped by the inherited one (a child can
    # tighten it, never extend it); 0 means no local limit.
    clock = inherited.clock
    timeout_ms = merged.timeout_ms
    if not timeout_ms:  # 0 (or unset) means no local limit; an inherited deadline still applies
        return _Limits(merged, inherited.deadline, clock, inherited.deadline_ms)
    local = clock.monotonic() + timeout_ms / 1000
    if inherited.deadline is not None and inherited.deadline <= local:
        return _Limits(merged, inherited.deadline, clock, inherited.deadline_ms)
    return _Limits(merged, local, clock, timeout_ms)


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


async def _with_deadline(awaitable: Awaitable[Any], limits: _Limits, deck_path: str) -> Any:
    """Await `awaitable`, cancelling it when the run's deadline passes."""
    remaining = limits.remaining()
    if remaining is None:
        return await awaitable
    if remaining <= 0:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise _DeadlineExceeded(deck_path, limits.deadline_ms)
    scope = asyncio.timeout(remaining)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise _DeadlineExceeded(deck_path, limits.deadline_ms) from None
        raise  # a TimeoutError of the deck's own code
