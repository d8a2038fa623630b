"""Verify metrics: what N scenario runs x M repeats of a grader say, and how far to trust it.

Pure functions over plain records, shared by `gambit verify` and the simulator's Verify page,
so the CLI and the browser report the same figures for the same grades.

Vocabulary:
- a **sample** is one grade of one conversation by one grader (one repeat);
- a **conversation** is one scenario run; its repeats are the samples of the same grader for
  it, and their agreement is the grader's **self-consistency**;
- a sample **passes** when its score is >= the threshold (0 by default, the middle of the
  built-in -3..3 scale);
- a sample **fails** by **execution** (the scenario run failed, so there was nothing to grade),
  by a **grader error** (the grader ran but gave no score), or scores **below the threshold**.
  Execution failures count against nothing but coverage; grader errors and low scores are the
  "grading" failures, grouped by their reasons.

`GradeSample.verdict` is that definition, once ("pass", "fail", "error", "not_run"); the
table, outliers, histogram and matrix (`_verify_table`), the CLI report and JUnit all use it.
The pass rate counts each conversation (scenario run) once, with its graded repeats' share of
passes, and its Wilson interval counts conversations, not grades (`run_pass_shares`, the
definition Verify's compare uses): re-grading the same conversations does not narrow it. With
one repeat, or as many graded repeats in every run, the rate is passes over graded samples.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._statistics import RESAMPLES, SEED, Interval, interval_json
from ._verify_table import Bin, Tally, Verdict, histogram, tally

if TYPE_CHECKING:
    from ._calibration import Calibration, CalibrationPair
    from ._statistics import CorrectedPassRate

FailureKind = Literal["execution", "grader_error", "below_threshold"]
OUTLIER_LIMIT = 8


@dataclass(frozen=True)
class GradeSample:
    """One grade of one conversation by one grader.

    `score` is None when the scenario run failed (`execution_error`) or the grader gave no
    score (`grader_error`). `links` carries ids for pages (session, grade run, ...).
    """

    grader: str
    conversation: str
    scenario: str | None = None
    score: float | None = None
    reason: str | None = None
    execution_error: str | None = None
    grader_error: str | None = None
    links: dict[str, Any] = field(default_factory=dict)

    def verdict(self, threshold: float) -> Verdict:
        """The one definition of pass and fail (module docstring)."""
        if self.execution_error is not None:
            return "not_run"
        if self.grader_error is not None or self.score is None:
            return "error"
        return "fail" if self.score < threshold else "pass"

    def failure(self, threshold: float) -> FailureKind | None:
        return _FAILURES[self.verdict(threshold)]

    def explanation(self) -> str | None:
        """Why this sample is what it is: the run's or the grader's error, else its reason."""
        return self.execution_error or self.grader_error or self.reason


_FAILURES: dict[Verdict, FailureKind | None] = {
    "pass": None,
    "fail": "below_threshold",
    "error": "grader_error",
    "not_run": "execution",
}


@dataclass(frozen=True)
class Spread:
    """Location and spread of a list of scores."""

    count: int
    mean: float | None
    median: float | None
    minimum: float | None
    maximum: float | None
    stdev: float | None  # sample standard deviation; None below two values

    @classmethod
    def of(cls, scores: Sequence[float]) -> Spread:
        if not scores:
            return cls(0, None, None, None, None, None)
        return cls(
            count=len(scores),
            mean=statistics.fmean(scores),
            median=statistics.median(scores),
            minimum=min(scores),
            maximum=max(scores),
            stdev=statistics.stdev(scores) if len(scores) > 1 else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "mean": _round(self.mean),
            "median": _round(self.median),
            "min": _round(self.minimum),
            "max": _round(self.maximum),
            "stdev": _round(self.stdev),
        }


@dataclass(frozen=True)
class Consistency:
    """How often two repeats of the same grader on the same conversation agree.

    Counted over every unordered pair of scored repeats of each conversation; `None` rates
    when no conversation has two scored repeats. `conversations` counts those that have.
    """

    pairs: int
    exact: float | None
    within_one: float | None
    conversations: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "conversations": self.conversations,
            "exact": _round(self.exact, 4),
            "withinOne": _round(self.within_one, 4),
        }


@dataclass(frozen=True)
class Outlier:
    """A conversation worth a look: one that failed, else one of the lowest scored.

    `failures` counts its samples that did not pass (below the threshold, grader errors and
    runs that failed alike: `tally` has each kind); `reasons` say why."""

    conversation: str
    scenario: str | None
    mean: float | None
    minimum: float | None
    maximum: float | None
    samples: int
    failures: int
    links: list[dict[str, Any]]
    tally: Tally = field(default_factory=Tally)
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "scenario": self.scenario,
            "mean": _round(self.mean),
            "min": _round(self.minimum),
            "max": _round(self.maximum),
            "samples": self.samples,
            "failures": self.failures,
            "verdicts": self.tally.to_json(),
            "reasons": self.reasons,
            "links": self.links,
        }


@dataclass(frozen=True)
class GraderSummary:
    """One grader's results over a Verify run: spread, pass rate, consistency, outliers."""

    grader: str
    threshold: float
    samples: int
    scored: int
    passed: int
    scores: Spread
    per_scenario: dict[str, Spread]
    consistency: Consistency
    outliers: list[Outlier]
    failures: dict[str, list[tuple[str, int]]]  # "execution" | "grading" -> [(reason, count)]
    failure_counts: dict[FailureKind, int]
    tally: Tally = field(default_factory=Tally)
    histogram: list[Bin] = field(default_factory=list)
    # With human ratings of this grader's scores (summarize(ratings=...)): its calibration and
    # the pass rate corrected for its errors.
    calibration: Calibration | None = None
    corrected: CorrectedPassRate | None = None

    @property
    def pass_rate(self) -> float | None:
        """The mean over conversations of their repeats' share of passes (execution failures
        have nothing to grade): passing samples over scored samples whenever every
        conversation has as many scored repeats."""
        return self.tally.pass_rate

    @property
    def pass_rate_interval(self) -> Interval | None:
        """The 95% Wilson interval of the pass rate over `pass_rate_runs` conversations, each
        counting once (None with nothing scored)."""
        return self.tally.interval

    @property
    def pass_rate_runs(self) -> int:
        """The n of the pass rate's interval: conversations with at least one scored repeat."""
        return self.tally.runs

    def to_json(self) -> dict[str, Any]:
        return {
            "grader": self.grader,
            "threshold": self.threshold,
            "samples": self.samples,
            "scored": self.scored,
            "passed": self.passed,
            "passRate": _round(self.pass_rate, 4),
            "passRateInterval": interval_json(self.pass_rate_interval),
            "passRateRuns": self.pass_rate_runs,
            "correctedPassRate": self.corrected.to_json() if self.corrected is not None else None,
            "calibration": self.calibration.to_json(include_pairs=True)
            if self.calibration is not None
            else None,
            "scores": self.scores.to_json(),
            "perScenario": {name: s.to_json() for name, s in self.per_scenario.items()},
            "consistency": self.consistency.to_json(),
            "outliers": [o.to_json() for o in self.outliers],
            "failures": {
                kind: [{"reason": reason, "count": count} for reason, count in groups]
                for kind, groups in self.failures.items()
            },
            "failureCounts": dict(self.failure_counts),
            "verdicts": self.tally.to_json(),
            "histogram": [b.to_json() for b in self.histogram],
        }


def summarize(
    samples: Iterable[GradeSample],
    *,
    threshold: float = 0.0,
    outliers: int = OUTLIER_LIMIT,
    ratings: Mapping[str, Sequence[CalibrationPair]] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, GraderSummary]:
    """Per-grader metrics, keyed by grader, in the order graders first appear.

    `ratings` maps a grader to pairs of its scores with human ratings of the same items
    (other items than these samples, typically): with them, a grader's summary carries its
    calibration and its pass rate corrected for its errors (Rogan-Gladen, docs/calibration.md).
    """
    by_grader: dict[str, list[GradeSample]] = {}
    for sample in samples:
        by_grader.setdefault(sample.grader, []).append(sample)
    out = {
        grader: _summarize_grader(grader, group, threshold, outliers)
        for grader, group in by_grader.items()
    }
    for grader, pairs in (ratings or {}).items():
        if grader in out and pairs:
            out[grader] = _with_ratings(
                out[grader], by_grader[grader], pairs, threshold, resamples, seed
            )
    return out


def _with_ratings(
    summary: GraderSummary,
    samples: list[GradeSample],
    pairs: Sequence[CalibrationPair],
    threshold: float,
    resamples: int,
    seed: int,
) -> GraderSummary:
    from dataclasses import replace

    from ._calibration import _conversations, calibrate
    from ._statistics import corrected_pass_rate

    scored = [s for s in samples if s.score is not None and s.execution_error is None]
    calibration = calibrate(pairs, threshold=threshold, resamples=resamples, seed=seed)
    corrected = corrected_pass_rate(
        [s.score is not None and s.score >= threshold for s in scored],
        [s.conversation for s in scored],
        [p.human >= threshold for p in pairs],
        [p.grader >= threshold for p in pairs],
        _conversations(pairs),
        resamples=resamples,
        seed=seed,
    )
    return replace(summary, calibration=calibration, corrected=corrected)


def _summarize_grader(
    grader: str, samples: list[GradeSample], threshold: float, outlier_limit: int
) -> GraderSummary:
    scores = [s.score for s in samples if s.score is not None and s.execution_error is None]
    per_scenario: dict[str, list[float]] = defaultdict(list)
    by_conversation: dict[str, list[GradeSample]] = {}
    counts: Counter[FailureKind] = Counter()
    reasons: dict[str, Counter[str]] = {"execution": Counter(), "grading": Counter()}
    for sample in samples:
        by_conversation.setdefault(sample.conversation, []).append(sample)
        if sample.score is not None and sample.execution_error is None:
            per_scenario[sample.scenario or "(none)"].append(sample.score)
        kind = sample.failure(threshold)
        if kind is None:
            continue
        counts[kind] += 1
        if kind == "execution":
            reasons["execution"][_reason(sample.execution_error)] += 1
        elif kind == "grader_error":
            reasons["grading"][_reason(sample.grader_error, "the grader gave no score")] += 1
        else:
            reasons["grading"][_reason(sample.reason, "(no reason given)")] += 1
    return GraderSummary(
        grader=grader,
        threshold=threshold,
        samples=len(samples),
        scored=len(scores),
        passed=sum(1 for score in scores if score >= threshold),
        scores=Spread.of(scores),
        per_scenario={name: Spread.of(values) for name, values in per_scenario.items()},
        consistency=self_consistency(
            [[s.score for s in group if s.score is not None] for group in by_conversation.values()]
        ),
        outliers=_outliers(by_conversation, threshold, outlier_limit),
        tally=tally(samples, threshold),
        histogram=histogram(scores, threshold),
        failures={
            kind: sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
            for kind, counter in reasons.items()
            if counter
        },
        failure_counts=dict(counts),
    )


def self_consistency(repeats: Iterable[Sequence[float]]) -> Consistency:
    """Agreement over all unordered pairs of repeats within each conversation."""
    pairs = exact = near = conversations = 0
    for scores in repeats:
        conversations += len(scores) > 1
        for i in range(len(scores)):
            for j in range(i + 1, len(scores)):
                pairs += 1
                difference = abs(scores[i] - scores[j])
                exact += difference == 0
                near += difference <= 1
    if not pairs:
        return Consistency(0, None, None)
    return Consistency(pairs, exact / pairs, near / pairs, conversations)


def _outliers(
    by_conversation: dict[str, list[GradeSample]], threshold: float, limit: int
) -> list[Outlier]:
    rows = []
    for conversation, group in by_conversation.items():
        scores = [s.score for s in group if s.score is not None and s.execution_error is None]
        counts = tally(group, threshold)
        failing = [s for s in group if s.verdict(threshold) != "pass"]
        rows.append(
            Outlier(
                conversation=conversation,
                scenario=group[0].scenario,
                mean=statistics.fmean(scores) if scores else None,
                minimum=min(scores) if scores else None,
                maximum=max(scores) if scores else None,
                samples=len(group),
                failures=counts.not_passed,
                links=[s.links for s in group if s.links],
                tally=counts,
                reasons=list(
                    dict.fromkeys(_reason(s.explanation(), "(no reason given)") for s in failing)
                ),
            )
        )
    # A conversation that passed every grade with the best mean stands out from nothing: when
    # all passed alike, there is no outlier to list (every run was listed, "0 of 1 not passed").
    best = max((o.mean for o in rows if o.mean is not None), default=None)
    rows = [o for o in rows if o.failures or o.mean is None or (best is not None and o.mean < best)]
    # Failed first (most failures first), then the lowest mean; ties keep the input order.
    rows.sort(
        key=lambda o: (
            0 if o.failures else 1,
            -o.failures,
            math.inf if o.mean is None else o.mean,
        )
    )
    return rows[:limit]


def _reason(text: str | None, default: str = "(unknown error)") -> str:
    text = (text or "").strip()
    return text.splitlines()[0][:300] if text else default


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
