"""Calibration: how far a grader agrees with the humans who rated the same messages.

A **pair** is one grader score and one human rating of the same thing: an assistant message
(per-turn graders against the -3..+3 message ratings) or a whole conversation (conversation
graders against the conversation score). Both sides use the built-in -3..+3 scale; grader
scores are rounded to the nearest integer and clamped onto it for the category figures
(agreement, kappa, confusion matrix) and used as they are for the correlation and the bias.

Figures (all `None` when they cannot be computed, never a made-up 0):
- `pairs`, and `coverage`: the share of graded items a human rated, and of rated items the
  grader scored (the caller counts both sides);
- exact and within-1 agreement;
- quadratic-weighted Cohen's kappa, with the base rates beside it (each side's distribution
  over the scale, and the exact agreement two raters with those base rates would reach by
  chance), because a high agreement on a skewed scale can be chance;
- Spearman's rank correlation (average ranks for ties);
- the confusion matrix, human rows x grader columns, -3..+3;
- bias: mean(grader - human);
- the disagreements, largest first, each with the links the caller attached.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SCALE = tuple(range(-3, 4))


@dataclass(frozen=True)
class CalibrationPair:
    """One grade with a human rating of the same thing, and links back to both."""

    human: float
    grader: float
    links: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Calibration:
    """How well a grader agrees with the human ratings: agreement, kappa and base rates."""

    pairs: int
    graded: int
    rated: int
    exact: float | None
    within_one: float | None
    kappa: float | None
    human_base_rates: dict[int, float]
    grader_base_rates: dict[int, float]
    chance_exact: float | None
    spearman: float | None
    confusion: list[list[int]]  # rows: human -3..3, columns: grader -3..3
    bias: float | None
    disagreements: list[dict[str, Any]]

    @property
    def coverage_of_graded(self) -> float | None:
        return self.pairs / self.graded if self.graded else None

    @property
    def coverage_of_rated(self) -> float | None:
        return self.pairs / self.rated if self.rated else None

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "graded": self.graded,
            "rated": self.rated,
            "coverage": {
                "ofGraded": _round(self.coverage_of_graded),
                "ofRated": _round(self.coverage_of_rated),
            },
            "exact": _round(self.exact),
            "withinOne": _round(self.within_one),
            "kappa": _round(self.kappa),
            "baseRates": {
                "human": {str(k): _round(v) for k, v in self.human_base_rates.items()},
                "grader": {str(k): _round(v) for k, v in self.grader_base_rates.items()},
                "chanceExact": _round(self.chance_exact),
            },
            "spearman": _round(self.spearman),
            "scale": list(SCALE),
            "confusion": self.confusion,
            "bias": _round(self.bias),
            "disagreements": self.disagreements,
        }


def category(score: float) -> int:
    """The -3..3 category of a score: rounded half away from zero, then clamped."""
    rounded = math.floor(abs(score) + 0.5) * (1 if score >= 0 else -1)
    return max(SCALE[0], min(SCALE[-1], int(rounded)))


def calibrate(
    pairs: Iterable[CalibrationPair], *, graded: int | None = None, rated: int | None = None
) -> Calibration:
    """All calibration figures for `pairs`; `graded`/`rated` default to the number of pairs."""
    pairs = list(pairs)
    n = len(pairs)
    humans = [category(p.human) for p in pairs]
    graders = [category(p.grader) for p in pairs]
    confusion = [[0] * len(SCALE) for _ in SCALE]
    for h, g in zip(humans, graders, strict=True):
        confusion[h - SCALE[0]][g - SCALE[0]] += 1
    human_rates = _base_rates(humans)
    grader_rates = _base_rates(graders)
    disagreements = [
        {
            "human": p.human,
            "grader": p.grader,
            "difference": p.grader - p.human,
            **p.links,
        }
        for p, h, g in zip(pairs, humans, graders, strict=True)
        if h != g
    ]
    disagreements.sort(key=lambda d: -abs(d["difference"]))
    return Calibration(
        pairs=n,
        graded=n if graded is None else graded,
        rated=n if rated is None else rated,
        exact=sum(h == g for h, g in zip(humans, graders, strict=True)) / n if n else None,
        within_one=sum(abs(h - g) <= 1 for h, g in zip(humans, graders, strict=True)) / n
        if n
        else None,
        kappa=quadratic_weighted_kappa(humans, graders),
        human_base_rates=human_rates,
        grader_base_rates=grader_rates,
        chance_exact=sum(human_rates[k] * grader_rates[k] for k in SCALE) if n else None,
        spearman=spearman([p.human for p in pairs], [p.grader for p in pairs]),
        confusion=confusion,
        bias=statistics.fmean(p.grader - p.human for p in pairs) if n else None,
        disagreements=disagreements,
    )


def quadratic_weighted_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Cohen's kappa with quadratic weights over the -3..3 scale.

    kappa = 1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2 / (K - 1)^2, where
    expected comes from the two marginal distributions. `None` when undefined (no pairs, or
    both raters used one and the same category, so chance explains everything).
    """
    n = len(a)
    if n == 0 or n != len(b):
        return None
    k = len(SCALE)
    index = {value: i for i, value in enumerate(SCALE)}
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[index[x]][index[y]] += 1
    rows = [sum(row) for row in observed]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    weighted_observed = weighted_expected = 0.0
    for i in range(k):
        for j in range(k):
            weight = (i - j) ** 2 / (k - 1) ** 2
            weighted_observed += weight * observed[i][j]
            weighted_expected += weight * rows[i] * cols[j] / n
    if weighted_expected == 0:
        return None
    return 1 - weighted_observed / weighted_expected


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's correlation of the average ranks. `None` when a side is
    constant or there are fewer than two pairs."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    mean_a, mean_b = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(ra, rb, strict=True))
    var_a = sum((x - mean_a) ** 2 for x in ra)
    var_b = sum((y - mean_b) ** 2 for y in rb)
    if var_a == 0 or var_b == 0:
        return None
    return cov / math.sqrt(var_a * var_b)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        average = (start + end) / 2 + 1  # 1-based average rank of the tied run
        for position in range(start, end + 1):
            ranks[order[position]] = average
        start = end + 1
    return ranks


def _base_rates(categories: Sequence[int]) -> dict[int, float]:
    n = len(categories)
    return {k: (categories.count(k) / n if n else 0.0) for k in SCALE}


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
