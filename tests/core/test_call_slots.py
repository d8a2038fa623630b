"""`CallSlots`: at most `limit` calls in flight, and a freed slot's next call goes out first.

Each scheduler round is one `asyncio.sleep(0)`; an answer that "sends" after three of them
stands for httpx, which passes three checkpoints before it writes a request on a pooled
connection (docs/benchmarks.md, "A freed slot's next request goes out first").
"""

from __future__ import annotations

import asyncio

from gambit.core._call_slots import CallSlots

# Checkpoints an httpx request passes before its bytes are written (see the docstring).
SEND_CHECKPOINTS = 3


async def _rounds(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_never_more_calls_in_flight_than_slots():
    async def main() -> int:
        slots = CallSlots(3)
        in_flight = peak = 0

        async def answer() -> None:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.001)
            in_flight -= 1

        await asyncio.gather(*(slots.call(answer) for _ in range(20)))
        return peak

    assert asyncio.run(main()) == 3


def test_the_waiting_call_sends_before_the_freed_call_goes_on():
    events: list[str] = []

    async def main() -> None:
        slots = CallSlots(1)
        first_answered = asyncio.Event()

        async def first() -> None:
            async def answer() -> str:
                first_answered.set()
                return "first"

            await slots.call(answer)
            events.append("first call's bookkeeping")

        async def second() -> None:
            async def answer() -> str:
                await _rounds(SEND_CHECKPOINTS)
                events.append("second call's request sent")
                await asyncio.sleep(0.001)
                return "second"

            await first_answered.wait()
            await slots.call(answer)

        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert events == ["second call's request sent", "first call's bookkeeping"]


def test_an_uncontended_call_does_not_step_aside():
    """With a slot to spare, a call whose answer never suspends completes in one step."""

    async def answer() -> str:
        return "done"

    async def main() -> None:
        slots = CallSlots(2)
        call = slots.call(answer)
        try:
            call.send(None)
        except StopIteration as stop:
            assert stop.value == "done"
        else:
            call.close()
            raise AssertionError("the call suspended with no one waiting for its slot")

    asyncio.run(main())


def test_a_failed_call_frees_its_slot():
    async def main() -> str:
        slots = CallSlots(1)

        async def fails() -> None:
            raise RuntimeError("provider down")

        async def answers() -> str:
            return "ok"

        try:
            await slots.call(fails)
        except RuntimeError:
            pass
        return await asyncio.wait_for(slots.call(answers), 1)

    assert asyncio.run(main()) == "ok"
