"""The time budget of one fuzz case: under `./dev fuzz` (which sets GAMBIT_FUZZ_EXAMPLES) it
must finish in CASE_BUDGET_S. The regular suite runs these targets too, with a few examples,
and asserts outcomes only: no timing threshold there, on a machine that may be busy. Either
way, a case still running after HANG_S is stopped and reported as a hang rather than
stalling the run."""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from types import FrameType

CASE_BUDGET_S = 2.0  # every case: load (or check) the deck in under this
HANG_S = 30.0  # past this a case is a hang: stopped with `Hang`
BUDGET_ENFORCED = "GAMBIT_FUZZ_EXAMPLES" in os.environ  # set by ./dev fuzz


class Hang(KeyboardInterrupt):
    """Raised into a case that ran past HANG_S. A KeyboardInterrupt, so that neither the
    loader (which reports what a module's import raises) nor Hypothesis (which would shrink
    it, running it again) takes it for an ordinary failure: the run stops and says so."""


def within_budget[T](call: Callable[[], T], what: str) -> T:
    """`call()`, failing the case if it takes CASE_BUDGET_S or more under `./dev fuzz`, and
    stopping it at HANG_S."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        # Where it was, for the report: Hypothesis shows no example for an interrupt.
        where = "".join(traceback.format_stack(frame, limit=12)) if frame else ""
        raise Hang(f"hang: {what} still running after {HANG_S:g} s, at\n{where}")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    started = time.perf_counter()
    try:
        result = call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - started
    if BUDGET_ENFORCED:
        assert elapsed < CASE_BUDGET_S, f"{what} took {elapsed:.2f} s (budget {CASE_BUDGET_S:g} s)"
    return result
