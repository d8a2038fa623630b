"""Two Verify batches compared, grader by grader (the Verify compare page, docs/simulator.md).

Each grader's mean score and pass rate before and after, whether the change is beyond the
noise, and the direction ("better", "worse", "no clear change"): the rule is `compare`'s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._statistics import Interval, interval_json, run_proportion, two_proportion_test
from ._verify_table import run_pass_shares

if TYPE_CHECKING:
    from ._verify import GradeSample

NOISE_Z = 1.96  # a difference beyond ~95% of what repeat noise alone would give


@dataclass(frozen=True)
class Difference:
    """`after - before` of a figure, with the noise the repeats measured around it.

    For a pass rate, `p_value` is the two-proportion test's and the intervals are the Wilson
    intervals of each side (over conversations, see `compare`)."""

    before: float | None
    after: float | None
    delta: float | None
    standard_error: float | None
    exceeds_noise: bool | None  # None when the noise cannot be estimated
    p_value: float | None = None
    before_interval: Interval | None = None
    after_interval: Interval | None = None
    # A pass rate's sample sizes: runs (conversations), each counting once, not grades.
    before_runs: int | None = None
    after_runs: int | None = None

    @property
    def direction(self) -> str:
        """ "better", "worse", "no clear change" (within the noise) or "unknown"."""
        if self.exceeds_noise is None or self.delta is None:
            return "unknown"
        if not self.exceeds_noise:
            return "no clear change"
        return "better" if self.delta > 0 else "worse"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "before": _round(self.before, 4),
            "after": _round(self.after, 4),
            "delta": _round(self.delta, 4),
            "standardError": _round(self.standard_error, 4),
            "exceedsNoise": self.exceeds_noise,
            "direction": self.direction,
        }
        if self.before_interval is not None or self.after_interval is not None:
            out["pValue"] = _round(self.p_value, 4)
            out["beforeInterval"] = interval_json(self.before_interval)
            out["afterInterval"] = interval_json(self.after_interval)
            out["beforeRuns"], out["afterRuns"] = self.before_runs, self.after_runs
        return out


@dataclass(frozen=True)
class GraderComparison:
    """One grader's change between two Verify runs."""

    grader: str
    mean: Difference
    pass_rate: Difference

    def to_json(self) -> dict[str, Any]:
        return {
            "grader": self.grader,
            "mean": self.mean.to_json(),
            "passRate": self.pass_rate.to_json(),
        }


def compare(
    before: Iterable[GradeSample], after: Iterable[GradeSample], *, threshold: float = 0.0
) -> dict[str, GraderComparison]:
    """Compare two batches grader by grader (before and after a prompt change).

    The unit of noise is the conversation: repeats of one conversation are averaged first, so
    a grader that is inconsistent across repeats and a scenario that varies across runs both
    widen the error. The difference of means uses Welch's standard error and "exceeds the
    noise" beyond 1.96 standard errors (about 95%). The pass rates are compared by the pooled
    two-proportion z-test at 5% (two-sided), each conversation counting once with its
    repeats' pass fraction (with one grade per run, exactly the test on the grades), each
    side shown with its Wilson interval over the same counts.
    """
    first = _per_conversation(before, threshold)
    second = _per_conversation(after, threshold)
    out: dict[str, GraderComparison] = {}
    for grader in [*first, *(g for g in second if g not in first)]:
        a_means, a_passes = first.get(grader, ([], []))
        b_means, b_passes = second.get(grader, ([], []))
        out[grader] = GraderComparison(
            grader=grader,
            mean=_difference(a_means, b_means),
            pass_rate=_rate_difference(a_passes, b_passes),
        )
    return out


def _per_conversation(
    samples: Iterable[GradeSample], threshold: float
) -> dict[str, tuple[list[float], list[float]]]:
    grouped: dict[str, dict[str, list[GradeSample]]] = {}
    for sample in samples:
        if sample.verdict(threshold) not in ("pass", "fail"):
            continue
        grouped.setdefault(sample.grader, {}).setdefault(sample.conversation, []).append(sample)
    return {
        grader: (
            [statistics.fmean(s.score for s in group if s.score is not None) for group in convs],
            run_pass_shares((s for group in convs for s in group), threshold),
        )
        for grader, by_conversation in grouped.items()
        for convs in [list(by_conversation.values())]
    }


def _difference(before: list[float], after: list[float]) -> Difference:
    mean_a = statistics.fmean(before) if before else None
    mean_b = statistics.fmean(after) if after else None
    if mean_a is None or mean_b is None:
        return Difference(mean_a, mean_b, None, None, None)
    delta = mean_b - mean_a
    if len(before) < 2 or len(after) < 2:
        return Difference(mean_a, mean_b, delta, None, None)
    error = math.sqrt(
        statistics.variance(before) / len(before) + statistics.variance(after) / len(after)
    )
    if error == 0:
        return Difference(mean_a, mean_b, delta, 0.0, delta != 0)
    return Difference(mean_a, mean_b, delta, error, abs(delta) > NOISE_Z * error)


def _rate_difference(before: list[float], after: list[float]) -> Difference:
    """Pass fractions per conversation, compared by the two-proportion test."""
    first, second = run_proportion(before), run_proportion(after)
    rate_a, rate_b = first.value, second.value
    intervals = (first.interval, second.interval, len(before), len(after))
    test = two_proportion_test(sum(before), len(before), sum(after), len(after))
    if test is None or rate_a is None or rate_b is None:
        return Difference(rate_a, rate_b, None, None, None, None, *intervals)
    if test.z is None:  # all passes (or all failures) on both sides: the same rate
        return Difference(rate_a, rate_b, test.difference, 0.0, False, None, *intervals)
    return Difference(
        rate_a,
        rate_b,
        test.difference,
        test.standard_error,
        test.significant(),
        test.p_value,
        *intervals,
    )


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
