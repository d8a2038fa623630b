"""A batch's model calls in flight, bounded: `--concurrency` counts calls, not runs.

Verify used to hold a slot for a whole scenario run or grade: building the request, the call,
then parsing, validating and tracing its answer. With every call of the same latency, the
next call of a slot could start only after that slot's own bookkeeping, and after the
bookkeeping of every call that finished at the same moment, on the one event loop. A slot
here is held only while a provider answers (`responses` or `chat`); the work around a call
happens while other calls are in flight, a run waiting for a slot has its request ready
when one frees, and the call that freed it steps aside until that request is on the wire.
What the batch measured, in docs/benchmarks.md ("Verify's slots hold calls, not runs", and
"A freed slot's next request goes out first").

`CallSlots.provider` and `CallSlots.resolver` wrap what the engine calls, so every call of a
run goes through a slot: the run's provider, and the providers a model resolver hands out
(the router resolves each deck's model to a provider of its own). A wrapper passes any other
attribute through, and offers `chat` only when the wrapped provider does (the engine asks
`isinstance(provider, ChatProvider)`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Callable
from typing import Any

from ._provider import ChatProvider, ModelProvider, ModelResolver, ResolvedModel

# Called when a call of the current task (a run or a grade, and the children it spawns)
# gets its slot: that is when the record starts running, for progress.
on_first_slot: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "gambit_on_first_slot", default=None
)


# Scheduler rounds a finished call steps aside for when a call was waiting for its slot: one
# for the waiter to wake, three for the checkpoints httpx (through httpcore and anyio) passes
# before it writes a request on a pooled connection. Measured in docs/benchmarks.md ("A freed
# slot's next request goes out first"); more rounds only delayed this task's own work.
HANDOVER_ROUNDS = 4


class CallSlots:
    """At most `limit` model calls in flight, through the providers this hands out."""

    def __init__(self, limit: int) -> None:
        self.semaphore = asyncio.Semaphore(limit)
        self._wrapped: dict[int, Any] = {}  # by the wrapped provider's id

    def provider(self, inner: ModelProvider) -> ModelProvider:
        """`inner`, its calls bounded by these slots (one wrapper per provider)."""
        key = id(inner)
        if key not in self._wrapped:
            kind = _SlottedChatProvider if isinstance(inner, ChatProvider) else _SlottedProvider
            self._wrapped[key] = kind(inner, self)
        wrapped: ModelProvider = self._wrapped[key]
        return wrapped

    def resolver(self, inner: ModelResolver) -> ModelResolver:
        """`inner`, handing out bounded providers."""
        return _SlottedResolver(inner, self)

    async def call(self, answer: Callable[[], Any]) -> Any:
        """Await `answer()` holding a slot."""
        async with self.semaphore:
            started = on_first_slot.get()
            if started is not None:
                started()
            result = await answer()
            contended = self.semaphore.locked()  # every slot taken: a call may wait for this one
        if contended:
            # Let the call that was waiting for this slot put its request on the wire before
            # this task goes on with its own bookkeeping. The scheduler runs ready tasks in
            # order, and each checkpoint between httpx's `send` and the socket write puts that
            # request behind every task ready at that moment, such as the bookkeeping of the
            # other calls that answered together. One yield handed over only the first step.
            for _ in range(HANDOVER_ROUNDS):
                await asyncio.sleep(0)
        return result


class _SlottedProvider:
    def __init__(self, inner: ModelProvider, slots: CallSlots) -> None:
        self._inner = inner
        self._slots = slots
        self.name = getattr(inner, "name", "provider")
        self.offline = getattr(inner, "offline", False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def responses(self, request: Any, **options: Any) -> Any:
        return await self._slots.call(lambda: self._inner.responses(request, **options))


class _SlottedChatProvider(_SlottedProvider):
    async def chat(self, **options: Any) -> Any:
        inner: Any = self._inner
        return await self._slots.call(lambda: inner.chat(**options))


class _SlottedResolver:
    def __init__(self, inner: ModelResolver, slots: CallSlots) -> None:
        self._inner = inner
        self._slots = slots

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def resolve_model(
        self, model: str | list[str], *, params: dict[str, Any] | None, deck_path: str | None
    ) -> ResolvedModel:
        resolved = self._inner.resolve_model(model, params=params, deck_path=deck_path)
        if resolved.provider is None:  # the run's own provider, already bounded
            return resolved
        return dataclasses.replace(resolved, provider=self._slots.provider(resolved.provider))
