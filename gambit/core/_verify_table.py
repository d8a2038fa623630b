"""Verify results as a table: verdict counts, the scenarios x graders matrix, the histogram.

Everything here counts with the one definition of pass and fail (`GradeSample.verdict`,
docs/simulator.md "Verify"): a grade **passes** when its score is at least the threshold,
**fails** when it is below, is an **error** when the grader gave no score, and is **not run**
when the scenario run failed (nothing to grade). A group of grades (one conversation's
repeats, one scenario's runs, one grader's batch) is a `Tally` of those four counts; its
verdict is "fail" as soon as one grade failed, else "error" when one could not be graded,
else "pass". The pass rate counts each scenario run once, with its graded repeats' share of
passes (`run_pass_shares`, the definition Verify's compare uses too), and its Wilson interval
counts runs, not grades: a grader graded three times does not triple the evidence. With one
graded repeat per run (or as many in every run) the rate is passes over graded.
The Verify page's table, its outliers, its histogram, the matrix, `gambit verify`'s report,
its JUnit file and its JSON all count this way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._statistics import Interval, cluster_shares, interval_json, run_proportion

if TYPE_CHECKING:
    from ._verify import GradeSample

Verdict = Literal["pass", "fail", "error", "not_run"]
GroupVerdict = Literal["pass", "fail", "error", "not_run", "empty"]
SCALE = (-3.0, 3.0)  # the built-in score scale; the histogram covers it at least


@dataclass(frozen=True)
class Tally:
    """Verdict counts of a group of grades, and each graded run's share of passes (the pass
    rate and its interval count runs: `run_pass_shares`)."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    not_run: int = 0
    run_shares: tuple[float, ...] = ()

    @property
    def runs(self) -> int:
        """Scenario runs with at least one graded repeat: the n of the pass rate's interval."""
        return len(self.run_shares)

    @property
    def graded(self) -> int:
        return self.passed + self.failed

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.not_run

    @property
    def not_passed(self) -> int:
        return self.total - self.passed

    @property
    def verdict(self) -> GroupVerdict:
        if self.failed:
            return "fail"
        if self.errors:
            return "error"
        if self.not_run:
            return "not_run"
        return "pass" if self.passed else "empty"

    @property
    def pass_rate(self) -> float | None:
        """The mean of the runs' shares of passes (passes over graded when every run has as
        many graded repeats, as with one repeat)."""
        return run_proportion(self.run_shares).value

    @property
    def interval(self) -> Interval | None:
        """The 95% Wilson interval over runs (None with nothing graded)."""
        return run_proportion(self.run_shares).interval

    def to_json(self) -> dict[str, Any]:
        rate = self.pass_rate
        return {
            "verdict": self.verdict,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "notRun": self.not_run,
            "graded": self.graded,
            "runs": self.runs,
            "passRate": None if rate is None else round(rate, 4),
            "passRateInterval": interval_json(self.interval),
        }


def tally(samples: Iterable[GradeSample], threshold: float) -> Tally:
    counts = {"pass": 0, "fail": 0, "error": 0, "not_run": 0}
    group = list(samples)
    for sample in group:
        counts[sample.verdict(threshold)] += 1
    return Tally(
        counts["pass"],
        counts["fail"],
        counts["error"],
        counts["not_run"],
        tuple(run_pass_shares(group, threshold)),
    )


def run_pass_shares(samples: Iterable[GradeSample], threshold: float) -> list[float]:
    """Each scenario run's share of passes among its graded repeats (runs with none graded
    left out), in the order runs first appear: the unit of every pass rate's interval and of
    Verify's compare (`cluster_shares`, docs/calibration.md)."""
    graded = [s for s in samples if s.verdict(threshold) in ("pass", "fail")]
    return cluster_shares(
        [s.verdict(threshold) == "pass" for s in graded], [s.conversation for s in graded]
    )


# ---- the histogram ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bin:
    """Scores `low <= s < high` (the last bin also holds `high`); `passes` when every score
    in it passes the threshold. Bins are one point wide and the threshold is an edge, so no
    bin mixes passing and failing scores."""

    low: float
    high: float
    passes: bool
    count: int

    @property
    def label(self) -> str:
        return f"{_num(self.low)} ≤ s < {_num(self.high)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "label": self.label,
            "passes": self.passes,
            "count": self.count,
        }


def histogram(scores: Sequence[float], threshold: float) -> list[Bin]:
    """Counts of `scores` in one-point bins whose edges are `threshold + k` (integer k),
    covering the -3..3 scale and every score."""
    low = min([SCALE[0], *scores])
    high = max([SCALE[1], *scores])
    first = math.floor(low - threshold)
    last = math.floor(high - threshold)
    edges = [threshold + k for k in range(first, last + 2)]
    counts = [0] * (len(edges) - 1)
    for score in scores:
        index = min(math.floor(score - threshold) - first, len(counts) - 1)
        counts[index] += 1
    return [
        Bin(edges[i], edges[i + 1], edges[i] >= threshold, counts[i]) for i in range(len(counts))
    ]


def _num(value: float) -> str:
    text = f"{value:+g}" if value else "0"
    return text.replace("-", "−")


# ---- the matrix -------------------------------------------------------------------------------


@dataclass
class Cell:
    """One conversation graded by one grader: its repeats' verdicts, scores and reasons."""

    tally: Tally
    scores: list[float | None]
    reasons: list[str]
    links: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.tally.to_json(),
            "scores": self.scores,
            "reasons": self.reasons,
            "links": self.links,
        }


@dataclass
class Row:
    """One conversation (a scenario run) across the graders."""

    conversation: str
    scenario: str | None
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def verdict(self) -> GroupVerdict:
        merged = _merge(c.tally for c in self.cells.values())
        return merged.verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "scenario": self.scenario,
            "verdict": self.verdict,
            "cells": {grader: cell.to_json() for grader, cell in self.cells.items()},
        }


@dataclass
class Matrix:
    """Scenarios x graders: each scenario's tally per grader, and its conversations' rows."""

    graders: list[str]
    scenarios: dict[str, dict[str, Tally]]  # scenario -> grader -> tally
    rows: list[Row]

    def to_json(self) -> dict[str, Any]:
        return {
            "graders": self.graders,
            "scenarios": [
                {
                    "scenario": scenario,
                    "verdict": _merge(per.values()).verdict,
                    "graders": {g: t.to_json() for g, t in per.items()},
                    "rows": [r.to_json() for r in self.rows if r.scenario == scenario],
                }
                for scenario, per in self.scenarios.items()
            ],
        }


def matrix(samples: Iterable[GradeSample], threshold: float) -> Matrix:
    """The samples as scenarios x graders, in the order they first appear."""
    graders: dict[str, None] = {}
    by_row: dict[str, Row] = {}
    grouped: dict[tuple[str, str], list[GradeSample]] = {}
    for sample in samples:
        graders.setdefault(sample.grader, None)
        by_row.setdefault(sample.conversation, Row(sample.conversation, _scenario(sample)))
        grouped.setdefault((sample.conversation, sample.grader), []).append(sample)
    scenarios: dict[str, dict[str, list[Tally]]] = {}
    for (conversation, grader), group in grouped.items():
        row = by_row[conversation]
        cell = Cell(
            tally=tally(group, threshold),
            scores=[s.score for s in group],
            reasons=list(dict.fromkeys(r for s in group if (r := s.explanation()))),
            links=[s.links for s in group if s.links],
        )
        row.cells[grader] = cell
        scenarios.setdefault(row.scenario or "(none)", {}).setdefault(grader, []).append(cell.tally)
    return Matrix(
        graders=list(graders),
        scenarios={
            scenario: {g: _merge(per[g]) for g in graders if g in per}
            for scenario, per in scenarios.items()
        },
        rows=list(by_row.values()),
    )


def _scenario(sample: GradeSample) -> str:
    return sample.scenario or "(none)"


def _merge(tallies: Iterable[Tally]) -> Tally:
    out = Tally()
    for t in tallies:
        out = Tally(
            out.passed + t.passed,
            out.failed + t.failed,
            out.errors + t.errors,
            out.not_run + t.not_run,
            out.run_shares + t.run_shares,
        )
    return out
