"""The time budget of one fuzz case: under `./dev fuzz` (which sets GAMBIT_FUZZ_EXAMPLES) it
must use less than CASE_BUDGET_S of CPU time. CPU time, not the clock: on a machine other
jobs share, the clock measures them too, and a case that passes on its own would fail (and
Hypothesis would call it flaky). The regular suite runs these targets too, with a few
examples, and asserts outcomes only. Either way, a case still running after HANG_S by the
clock is stopped and reported as a hang rather than stalling the run."""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

CASE_BUDGET_S = 2.0  # every case: load (or check) the deck in less CPU time than this
HANG_S = 30.0  # past this a case is a hang: stopped with `Hang`
BUDGET_ENFORCED = "GAMBIT_FUZZ_EXAMPLES" in os.environ  # set by ./dev fuzz


@dataclass
class Measured:
    """What the run measured, for its summary (tests/fuzz/conftest.py): the cases timed,
    and the most CPU time and clock time one of them took, with what it was."""

    cases: int = 0
    cpu: float = 0.0
    cpu_case: str = ""
    clock: float = 0.0
    clock_case: str = ""


measured = Measured()


class Hang(KeyboardInterrupt):
    """Raised into a case that ran past HANG_S. A KeyboardInterrupt, so that neither the
    loader (which reports what a module's import raises) nor Hypothesis (which would shrink
    it, running it again) takes it for an ordinary failure: the run stops and says so."""


def within_budget[T](call: Callable[[], T], what: str) -> T:
    """`call()`, failing the case if it uses CASE_BUDGET_S of CPU or more under `./dev fuzz`,
    and stopping it at HANG_S."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        # Where it was, for the report: Hypothesis shows no example for an interrupt.
        where = "".join(traceback.format_stack(frame, limit=12)) if frame else ""
        raise Hang(f"hang: {what} still running after {HANG_S:g} s, at\n{where}")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    started = time.process_time()  # this process's CPU time, all its threads
    clock = time.perf_counter()
    try:
        result = call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    used = time.process_time() - started
    clock = time.perf_counter() - clock
    measured.cases += 1
    if used > measured.cpu:
        measured.cpu, measured.cpu_case = used, what[:200]
    if clock > measured.clock:
        measured.clock, measured.clock_case = clock, what[:200]
    if BUDGET_ENFORCED:
        assert used < CASE_BUDGET_S, f"{what} took {used:.2f} s of CPU (budget {CASE_BUDGET_S:g} s)"
    return result
