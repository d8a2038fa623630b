"""Intervals for every calibration and Verify figure (docs/calibration.md).

- `wilson`: the Wilson score interval of a proportion (pass rates, sensitivity, specificity).
  A closed form, in plain Python, so a Verify run without ratings imports no numpy.
- `ClusterBootstrap`: a seeded bootstrap that resamples *conversations* (clusters), not
  messages, so that several rated messages of one conversation count as the one piece of
  evidence they are. Every resample is a row of frequency weights over the observations, and
  each statistic is a weighted function of those rows, vectorised with numpy: one resample
  matrix serves every figure (kappa, agreement, Spearman, bias), so the figures of one
  calibration come from the same resamples. Intervals are BCa (bias-corrected and
  accelerated, Efron & Tibshirani 1993, ch. 14; the acceleration from a leave-one-
  conversation-out jackknife), falling back to the percentile interval when BCa is
  undefined (a degenerate bootstrap distribution). With one observation per conversation
  this is exactly `scipy.stats.bootstrap(..., paired=True, method="BCa")` on the same
  generator (tests/core/test_statistics.py checks it).
- `rogan_gladen`: the pass rate corrected for the grader's sensitivity and specificity, and
  `corrected_pass_rate` with its interval (never narrower than the raw rate's, mapped).
- `krippendorff_alpha`: agreement across human raters (the `krippendorff` package), with a
  bootstrap interval over rated items.

numpy is imported inside the functions that need it: this module is loaded by calibration
and Verify statistics only, and `gambit run` loads neither (docs/decisions.md, "Statistics").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

    Weights = NDArray[np.float64]
    Values = NDArray[np.float64]
    Statistic = Callable[[Weights], Values]

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0
# Rows of the weight matrix evaluated at once: bounds the memory of a large calibration
# (rows x observations float64 values, 32 MB) without changing the resamples drawn.
_CHUNK_CELLS = 4_000_000
# Fewer defined resamples than this share (a statistic undefined in most of them, such as a
# kappa where most resamples have one category only) give no interval.
_MIN_DEFINED = 0.5
_DIGITS = 12

IntervalMethod = Literal[
    "wilson",
    "bootstrap-bca",
    "bootstrap-percentile",
    # the corrected pass rate's: the hull of three accounts of its uncertainty
    # (`corrected_pass_rate`, docs/calibration.md)
    "rogan-gladen-hull",
]


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval and the method that computed it."""

    low: float
    high: float
    method: IntervalMethod
    level: float = LEVEL

    @property
    def width(self) -> float:
        return self.high - self.low

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def to_json(self) -> dict[str, Any]:
        return {
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "level": self.level,
            "method": self.method,
        }


@dataclass(frozen=True)
class Estimate:
    """A figure (None when it cannot be computed) and its interval (None when that cannot)."""

    value: float | None
    interval: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "value": None if self.value is None else round(self.value, 4),
            "interval": None if self.interval is None else self.interval.to_json(),
        }


def interval_json(interval: Interval | None) -> dict[str, Any] | None:
    return None if interval is None else interval.to_json()


# ---- proportions ------------------------------------------------------------------------------


def wilson(successes: float, trials: int, level: float = LEVEL) -> Interval | None:
    """The Wilson score interval of `successes / trials` (no continuity correction).

    Wilson (1927); the same as `scipy.stats.binomtest(k, n).proportion_ci(method="wilson")`.
    None when there are no trials. `successes` may be fractional (an effective count, as
    Verify's compare gives when a conversation's repeats count once).
    """
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes ({successes}) must be between 0 and trials ({trials})")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    # At 0 or all successes the bound is exactly 0 or 1 (the formula leaves float noise).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return Interval(low, high, "wilson", level)


def proportion(successes: int, trials: int, level: float = LEVEL) -> Estimate:
    """`successes / trials` with its Wilson interval (None for no trials)."""
    if trials <= 0:
        return Estimate(None, None)
    return Estimate(successes / trials, wilson(successes, trials, level))


def cluster_shares(flags: Sequence[bool], clusters: Sequence[Hashable]) -> list[float]:
    """Each cluster's share of true `flags`, clusters in the order they first appear.

    The one definition of "each run counts once" (docs/calibration.md): a Verify scenario run
    is a cluster, its graded repeats the flags (passed or not), and the run counts as one
    trial with its repeats' share of passes as its (possibly fractional) success. A grader
    graded three times does not triple the evidence. The pass rate, its Wilson interval
    (`run_proportion`), Verify's compare and the corrected pass rate all count this way."""
    passed: dict[Hashable, list[int]] = {}
    for flag, cluster in zip(flags, clusters, strict=True):
        counts = passed.setdefault(cluster, [0, 0])
        counts[0] += bool(flag)
        counts[1] += 1
    return [hits / total for hits, total in passed.values()]


def run_proportion(shares: Sequence[float], level: float = LEVEL) -> Estimate:
    """The mean of per-run shares (`cluster_shares`) with the Wilson interval of
    `sum(shares)` successes in `len(shares)` trials: n is the number of runs, not of grades.
    With one flag per run it is `proportion` of the flags exactly."""
    if not shares:
        return Estimate(None, None)
    total = math.fsum(shares)
    return Estimate(total / len(shares), wilson(total, len(shares), level))


@dataclass(frozen=True)
class ProportionTest:
    """Two proportions compared: the difference `second - first`, the pooled z statistic and
    its two-sided p-value (None when both samples are all passes or all failures, or empty)."""

    first: float
    second: float
    difference: float
    standard_error: float
    z: float | None
    p_value: float | None

    def significant(self, level: float = LEVEL) -> bool | None:
        """Whether the difference is beyond chance at `level` (None when untestable)."""
        return None if self.p_value is None else self.p_value < 1 - level


def two_proportion_test(
    successes_first: float, trials_first: float, successes_second: float, trials_second: float
) -> ProportionTest | None:
    """The pooled two-proportion z-test (two-sided), as
    `statsmodels.stats.proportion.proportions_ztest(..., prop_var=False)`.

    Counts may be fractional (Verify passes effective counts: each conversation's pass
    fraction, so a grader's repeats count once). None when a sample is empty.
    """
    if trials_first <= 0 or trials_second <= 0:
        return None
    p1, p2 = successes_first / trials_first, successes_second / trials_second
    pooled = (successes_first + successes_second) / (trials_first + trials_second)
    variance = pooled * (1 - pooled) * (1 / trials_first + 1 / trials_second)
    if variance <= 0:
        return ProportionTest(p1, p2, p2 - p1, 0.0, None, None)
    error = math.sqrt(variance)
    z = (p2 - p1) / error
    return ProportionTest(p1, p2, p2 - p1, error, z, 2 * (1 - NormalDist().cdf(abs(z))))


# ---- the cluster bootstrap ----------------------------------------------------------------------


class ClusterBootstrap:
    """Seeded bootstrap resamples of the clusters (conversations) of some observations.

    `clusters[i]` is the cluster of observation i. Resample r draws as many clusters as there
    are, with replacement (`numpy.random.default_rng(seed).integers(0, C, (resamples, C))`,
    the draw `scipy.stats.bootstrap` makes), and weighs each observation by how often its
    cluster was drawn. A statistic maps a (rows, observations) weight matrix to one value per
    row (NaN where undefined); `estimate` gives its value on the data (all weights 1) and its
    interval.
    """

    def __init__(
        self,
        clusters: Sequence[Hashable],
        *,
        resamples: int = RESAMPLES,
        seed: int = SEED,
        level: float = LEVEL,
    ) -> None:
        import numpy as np

        if resamples < 1:
            raise ValueError("resamples must be at least 1")
        index: dict[Hashable, int] = {}
        self.cluster_of = np.array([index.setdefault(c, len(index)) for c in clusters], dtype=int)
        self.observations = len(self.cluster_of)
        self.clusters = len(index)
        self.level = level
        self.resamples = resamples
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, max(self.clusters, 1), (resamples, max(self.clusters, 1)))
        # counts[r, c]: how often resample r drew cluster c
        offsets = np.arange(resamples)[:, None] * max(self.clusters, 1)
        self.counts = np.bincount(
            (draws + offsets).ravel(), minlength=resamples * max(self.clusters, 1)
        ).reshape(resamples, max(self.clusters, 1))

    def weights(self, rows: slice) -> Weights:
        import numpy as np

        counts = self.counts[rows]
        return np.asarray(counts[:, self.cluster_of], dtype=float)

    def _cluster_sums(self, statistic: SumStatistic) -> Values:
        import numpy as np

        sums = np.zeros((self.clusters, statistic.features.shape[1]))
        np.add.at(sums, self.cluster_of, statistic.features)
        return sums

    def distribution(self, statistic: Statistic | SumStatistic) -> Values:
        """The statistic on every resample, in order (NaN where undefined)."""
        import numpy as np

        if isinstance(statistic, SumStatistic):
            return np.asarray(statistic.combine(self.counts @ self._cluster_sums(statistic)))
        step = max(1, _CHUNK_CELLS // max(self.observations, 1))
        parts = [
            np.asarray(statistic(self.weights(slice(start, start + step))), dtype=float)
            for start in range(0, self.resamples, step)
        ]
        return np.concatenate(parts) if parts else np.zeros(0)

    def jackknife(self, statistic: Statistic | SumStatistic) -> Values:
        """The statistic with each cluster left out in turn."""
        import numpy as np

        if isinstance(statistic, SumStatistic):
            per_cluster = self._cluster_sums(statistic)
            return np.asarray(statistic.combine(per_cluster.sum(axis=0) - per_cluster))
        leave_out = np.ones((self.clusters, self.observations))
        leave_out[self.cluster_of, np.arange(self.observations)] = 0.0
        return np.asarray(statistic(leave_out), dtype=float)

    def value(self, statistic: Statistic | SumStatistic) -> float | None:
        import numpy as np

        point = float(statistic(np.ones((1, self.observations)))[0])
        return point if math.isfinite(point) else None

    def estimate(self, statistic: Statistic | SumStatistic, *, bca: bool = True) -> Estimate:
        """The statistic on the data and its interval (BCa, else percentile)."""
        if self.observations == 0:
            return Estimate(None, None)
        point = self.value(statistic)
        if point is None or self.clusters < 2:
            return Estimate(point, None)
        return Estimate(point, self.interval(statistic, point, bca=bca))

    def interval(
        self, statistic: Statistic | SumStatistic, point: float, *, bca: bool = True
    ) -> Interval | None:
        import numpy as np

        # Rounded so that a resample equal to the data's value up to float noise (sums taken
        # in another order) counts as a tie in BCa's bias correction.
        theta = np.round(self.distribution(statistic), _DIGITS)
        point = round(point, _DIGITS)
        defined = theta[np.isfinite(theta)]
        if len(defined) < max(2, _MIN_DEFINED * len(theta)):
            return None
        alpha = (1 - self.level) / 2
        if bca:
            adjusted = _bca_levels(defined, point, self.jackknife(statistic), alpha)
            if adjusted is not None:
                low, high = np.quantile(defined, adjusted)
                return Interval(float(low), float(high), "bootstrap-bca", self.level)
        low, high = np.quantile(defined, [alpha, 1 - alpha])
        return Interval(float(low), float(high), "bootstrap-percentile", self.level)


def _bca_levels(theta: Values, point: float, jackknife: Values, alpha: float) -> list[float] | None:
    """BCa's adjusted quantile levels (Efron & Tibshirani 1993, eq. 14.9-14.15), computed as
    `scipy.stats.bootstrap` does; None when undefined (the data's value outside every
    resample, or a jackknife with no spread)."""
    import numpy as np

    normal = NormalDist()
    share = (np.count_nonzero(theta < point) + np.count_nonzero(theta <= point)) / (2 * len(theta))
    if not 0 < share < 1 or not np.all(np.isfinite(jackknife)):
        return None
    z0 = normal.inv_cdf(float(share))
    spread = jackknife.mean() - jackknife
    denominator = float(np.sum(spread**2)) ** 1.5
    if denominator == 0:
        return None
    acceleration = float(np.sum(spread**3)) / (6 * denominator)
    levels = []
    for z in (normal.inv_cdf(alpha), normal.inv_cdf(1 - alpha)):
        shifted = z0 + z
        levels.append(normal.cdf(z0 + shifted / (1 - acceleration * shifted)))
    if not all(0 <= level <= 1 for level in levels):
        return None
    return levels


# ---- weighted statistics (rows of weights -> one value per row) ------------------------------


class SumStatistic:
    """A statistic that depends on the data only through weighted sums of some features.

    `features` is an (observations, k) matrix and `combine` maps (rows, k) sums to one value
    per row. Calling it with a weight matrix gives `combine(weights @ features)`, as for any
    statistic; `ClusterBootstrap` instead sums the features per conversation once and
    resamples those sums, which costs resamples x conversations rather than resamples x
    observations (a calibration of thousands of pairs stays fast).
    """

    def __init__(self, features: NDArray[Any], combine: Callable[[Values], Values]) -> None:
        self.features = features
        self.combine = combine

    def __call__(self, weights: Weights) -> Values:
        return self.combine(weights @ self.features)


def weighted_mean(values: ArrayLike) -> SumStatistic:
    import numpy as np

    x = np.asarray(values, dtype=float)

    def combine(sums: Values) -> Values:
        total = sums[:, 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, sums[:, 0] / np.where(total > 0, total, 1), np.nan)

    return SumStatistic(np.column_stack([x, np.ones_like(x)]), combine)


def weighted_ratio(numerator: ArrayLike, denominator: ArrayLike) -> SumStatistic:
    """sum(w * numerator) / sum(w * denominator), NaN where the denominator is 0."""
    import numpy as np

    top, bottom = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)

    def combine(sums: Values) -> Values:
        below = sums[:, 1]
        return np.where(below > 0, sums[:, 0] / np.where(below > 0, below, 1), np.nan)

    return SumStatistic(np.column_stack([top, bottom]), combine)


def quadratic_kappa(first: ArrayLike, second: ArrayLike) -> SumStatistic:
    """Cohen's kappa with quadratic weights, from weighted moments.

    With weights (i - j)^2 (the scale's normalisation cancels), the observed disagreement is
    sum(w (a - b)^2) and the chance one is sum_i sum_j w_i w_j (a_i - b_j)^2 / N
    = sum(w a^2) + sum(w b^2) - 2 sum(w a) sum(w b) / N; kappa = 1 - observed / chance. The
    same figure as the confusion-matrix form over the -3..3 categories, and as
    `sklearn.metrics.cohen_kappa_score(weights="quadratic")` over the whole scale.
    """
    import numpy as np

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    features = np.column_stack([np.ones_like(a), a, b, a * a, b * b, (a - b) ** 2])

    def combine(sums: Values) -> Values:
        n, sa, sb, saa, sbb, observed = sums.T
        safe_n = np.where(n > 0, n, 1)
        chance = saa + sbb - 2 * sa * sb / safe_n
        defined = (n > 0) & (chance > 1e-9 * np.maximum(n, 1))
        return np.where(defined, 1 - observed / np.where(defined, chance, 1), np.nan)

    return SumStatistic(features, combine)


def spearman(first: ArrayLike, second: ArrayLike) -> Statistic | SumStatistic:
    """Spearman's rho with average ranks for ties, for frequency weights: the value
    `scipy.stats.spearmanr` gives on the data with each observation repeated w times."""
    import numpy as np

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    values_a, index_a = np.unique(a, return_inverse=True)
    values_b, index_b = np.unique(b, return_inverse=True)
    if len(values_a) * len(values_b) <= _JOINT_LIMIT:
        return _spearman_by_value_pairs(index_a, index_b, len(values_a), len(values_b))
    rank_a, rank_b = _rank_by_weight(a), _rank_by_weight(b)

    def statistic(weights: Weights) -> Values:
        ra, rb = rank_a(weights), rank_b(weights)
        n = weights.sum(axis=1, keepdims=True)
        safe_n = np.where(n > 0, n, 1)
        ca = ra - (weights * ra).sum(axis=1, keepdims=True) / safe_n
        cb = rb - (weights * rb).sum(axis=1, keepdims=True) / safe_n
        covariance = (weights * ca * cb).sum(axis=1)
        variance = (weights * ca * ca).sum(axis=1) * (weights * cb * cb).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(variance > 1e-12, covariance / np.sqrt(variance), np.nan)

    return statistic


# On a scale of a few values (the -3..+3 ratings), Spearman depends only on how much weight
# each pair of values (a, b) carries: a sum statistic over one-hot features of those pairs,
# which the bootstrap resamples per conversation. Above this many value pairs (raw scores of
# many distinct values), ranks are computed per observation instead.
_JOINT_LIMIT = 256


def _spearman_by_value_pairs(
    index_a: NDArray[Any], index_b: NDArray[Any], count_a: int, count_b: int
) -> SumStatistic:
    import numpy as np

    features = np.zeros((len(index_a), count_a * count_b))
    features[np.arange(len(index_a)), index_a * count_b + index_b] = 1.0

    def average_ranks(weight: Values) -> Values:
        cumulative = np.cumsum(weight, axis=1)
        return cumulative - weight + (weight + 1) / 2

    def combine(sums: Values) -> Values:
        joint = sums.reshape(len(sums), count_a, count_b)
        weight_a, weight_b = joint.sum(axis=2), joint.sum(axis=1)
        n = weight_a.sum(axis=1)
        safe_n = np.where(n > 0, n, 1)
        rank_a, rank_b = average_ranks(weight_a), average_ranks(weight_b)
        mean_a = (weight_a * rank_a).sum(axis=1) / safe_n
        mean_b = (weight_b * rank_b).sum(axis=1) / safe_n
        covariance = np.einsum("ruv,ru,rv->r", joint, rank_a, rank_b) - n * mean_a * mean_b
        variance_a = (weight_a * rank_a**2).sum(axis=1) - n * mean_a**2
        variance_b = (weight_b * rank_b**2).sum(axis=1) - n * mean_b**2
        variance = variance_a * variance_b
        scale = np.maximum(n, 1) ** 3  # ranks^2 x n: relative, so float noise is not a spread
        with np.errstate(invalid="ignore", divide="ignore"):
            defined = (variance_a > 1e-9 * scale) & (variance_b > 1e-9 * scale)
            return np.where(defined, covariance / np.sqrt(np.where(defined, variance, 1)), np.nan)

    return SumStatistic(features, combine)


def _rank_by_weight(values: Values) -> Callable[[Weights], Weights]:
    """Average ranks of `values` when observation i appears w_i times (per row of weights)."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    _, first_of_group, group_of_sorted = np.unique(
        values[order], return_index=True, return_inverse=True
    )
    group_of = np.empty(len(values), dtype=int)
    group_of[order] = group_of_sorted
    ends = np.append(first_of_group[1:], len(values)) - 1

    def ranks(weights: Weights) -> Weights:
        cumulative = np.cumsum(weights[:, order], axis=1)[:, ends]  # weight up to each group's end
        group_weight = np.diff(cumulative, axis=1, prepend=0.0)
        below = cumulative - group_weight
        average = below + (group_weight + 1) / 2
        return np.asarray(average[:, group_of], dtype=float)

    return ranks


# ---- the pass rate corrected for the grader's errors -----------------------------------------


def rogan_gladen(
    apparent: float, sensitivity: float, specificity: float, *, clip: bool = True
) -> float | None:
    """(p + Sp - 1) / (Se + Sp - 1), clipped to [0, 1] (Rogan & Gladen 1978).

    None when Se + Sp - 1 <= 0: a grader no better than chance at the threshold, whose pass
    rate says nothing about the true one.
    """
    informedness = sensitivity + specificity - 1
    if informedness <= 0:
        return None
    value = (apparent + specificity - 1) / informedness
    return min(1.0, max(0.0, value)) if clip else value


UNDEFINED_CORRECTION = (
    "undefined: at the threshold the grader is no better than chance against the human "
    "ratings (sensitivity + specificity - 1 <= 0)"
)


@dataclass(frozen=True)
class CorrectedPassRate:
    """A pass rate beside the same rate corrected for the grader's errors (Rogan-Gladen).

    `sensitivity` / `specificity` are the grader's against the human ratings, both binarised
    at the pass threshold. `corrected` is None when the correction is undefined; `reason`
    then says why.
    """

    raw: Estimate
    corrected: Estimate
    sensitivity: Estimate
    specificity: Estimate
    pairs: int
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "raw": self.raw.to_json(),
            "corrected": self.corrected.to_json(),
            "sensitivity": self.sensitivity.to_json(),
            "specificity": self.specificity.to_json(),
            "pairs": self.pairs,
            "undefined": self.reason,
            "method": CORRECTION_METHOD,
        }


CORRECTION_METHOD = (
    "Rogan-Gladen; interval: the hull of (1) the percentile interval of draws of the raw rate "
    "(over runs), sensitivity and specificity, each from its Wilson confidence distribution, "
    "(2) the raw rate's Wilson interval mapped through the correction, and (3) a percentile "
    "bootstrap over conversations of both the graded runs and the rated pairs"
)


def corrected_pass_rate(
    passes: Sequence[bool],
    pass_clusters: Sequence[Hashable],
    human_passes: Sequence[bool],
    grader_passes: Sequence[bool],
    pair_clusters: Sequence[Hashable],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> CorrectedPassRate:
    """The raw pass rate of `passes` and the Rogan-Gladen corrected one, with intervals.

    The raw rate counts each cluster (scenario run) once with its share of passes
    (`cluster_shares`, `run_proportion`), as Verify's pass rate does. The corrected rate's
    interval is the hull of three accounts of its uncertainty (docs/calibration.md, "Pass
    rates corrected for the grader's errors", says why each):

    1. draws of the raw rate, the sensitivity and the specificity, each from its Wilson
       confidence distribution (a draw's 2.5th and 97.5th percentiles are its Wilson
       interval; it does not collapse at 0% or 100% as a bootstrap does), corrected one by
       one, and the percentile interval of the results;
    2. the raw rate's Wilson interval mapped through the correction at the estimated
       sensitivity and specificity: were they known exactly, the interval would be this, so
       the corrected rate is never surer than the raw rate it corrects;
    3. the percentile interval of a bootstrap that resamples both sources by conversation
       (the graded runs for the raw rate, the rated pairs for sensitivity and specificity),
       which counts several rated messages of one conversation once.

    Draws or resamples where the correction is undefined are left out; below half defined
    in (1) there is no interval.
    """
    import numpy as np

    shares = cluster_shares(passes, pass_clusters)
    raw = run_proportion(shares, level)
    human = np.asarray(human_passes, dtype=bool)
    grader = np.asarray(grader_passes, dtype=bool)
    positives, negatives = int(human.sum()), int((~human).sum())
    hits, rejections = int((human & grader).sum()), int((~human & ~grader).sum())
    sensitivity = proportion(hits, positives, level)
    specificity = proportion(rejections, negatives, level)
    pairs = len(human)
    if raw.value is None:
        return CorrectedPassRate(raw, Estimate(None), sensitivity, specificity, pairs, "no scores")
    if sensitivity.value is None or specificity.value is None:
        missing = "passed" if sensitivity.value is None else "failed"
        return CorrectedPassRate(
            raw,
            Estimate(None),
            sensitivity,
            specificity,
            pairs,
            f"undefined: no rated item that the humans {missing}, so the grader's "
            + ("sensitivity" if missing == "passed" else "specificity")
            + " is unknown",
        )
    point = rogan_gladen(raw.value, sensitivity.value, specificity.value)
    if point is None:
        return CorrectedPassRate(
            raw, Estimate(None), sensitivity, specificity, pairs, UNDEFINED_CORRECTION
        )
    alpha = (1 - level) / 2
    rng = np.random.default_rng(seed)
    drawn = _corrected(
        _wilson_draws(math.fsum(shares), len(shares), rng, resamples),
        _wilson_draws(hits, positives, rng, resamples),
        _wilson_draws(rejections, negatives, rng, resamples),
    )
    defined = drawn[np.isfinite(drawn)]
    if len(defined) < max(2, _MIN_DEFINED * resamples):
        return CorrectedPassRate(raw, Estimate(point, None), sensitivity, specificity, pairs)
    ends = [float(v) for v in np.quantile(defined, [alpha, 1 - alpha])]
    if raw.interval is not None:  # the raw rate's interval, mapped (monotone in p)
        for end in (raw.interval.low, raw.interval.high):
            mapped = rogan_gladen(end, sensitivity.value, specificity.value)
            ends.append(point if mapped is None else mapped)  # defined: the point is
    runs = ClusterBootstrap(list(dict.fromkeys(pass_clusters)), resamples=resamples, seed=seed)
    rated = ClusterBootstrap(pair_clusters, resamples=resamples, seed=seed + 1, level=level)
    resampled = _corrected(
        runs.distribution(weighted_mean(shares)),
        rated.distribution(weighted_ratio(human & grader, human)),
        rated.distribution(weighted_ratio(~human & ~grader, ~human)),
    )
    finite = resampled[np.isfinite(resampled)]
    if len(finite) >= max(2, _MIN_DEFINED * resamples):
        ends += [float(v) for v in np.quantile(finite, [alpha, 1 - alpha])]
    interval = Interval(min(ends), max(ends), "rogan-gladen-hull", level)
    return CorrectedPassRate(raw, Estimate(point, interval), sensitivity, specificity, pairs)


def _corrected(apparent: Values, se: Values, sp: Values) -> Values:
    """The clipped Rogan-Gladen rate of each draw, NaN where it is undefined."""
    import numpy as np

    informedness = se + sp - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            np.where(
                informedness > 0,
                np.clip((apparent + sp - 1) / np.where(informedness > 0, informedness, 1), 0, 1),
                np.nan,
            ),
            dtype=float,
        )


def _wilson_draws(successes: float, trials: int, rng: Any, count: int) -> Values:
    """`count` draws from the Wilson confidence distribution of `successes / trials`: for a
    uniform u, the Wilson bound with the signed normal quantile z = Phi^-1(u) (the lower bound
    for u < 1/2, the upper above), so the draws' quantile at any level is the Wilson bound at
    that level (Xie & Singh 2013, "Confidence distribution, the frequentist distribution
    estimator of a parameter", https://doi.org/10.1111/insr.12000). At 0 or all successes
    half the draws sit on the boundary and the other half spread as the interval does."""
    import numpy as np

    z = rng.standard_normal(count)  # Phi^-1 of a uniform draw
    p = successes / trials
    z2n = z * z / trials
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * np.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    return np.asarray(np.clip(centre + half, 0.0, 1.0), dtype=float)


# ---- agreement across human raters -----------------------------------------------------------


@dataclass(frozen=True)
class RaterAgreement:
    """Krippendorff's alpha across human raters: the ceiling no grader can be expected to beat.

    `items` counts the items rated by at least two raters (the only ones alpha uses).
    """

    alpha: Estimate
    level: str
    raters: list[str]
    items: int
    ratings: int

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha.to_json(),
            "levelOfMeasurement": self.level,
            "raters": self.raters,
            "items": self.items,
            "ratings": self.ratings,
        }


def _alpha_resampled(
    value_counts: NDArray[Any], domain: NDArray[Any], level: str, weights: Weights
) -> Values:
    """Krippendorff's alpha of every resample at once: row r of `weights` says how many times
    each unit (row of `value_counts`) is drawn. The package's own formula (coincidences `o`
    summed over units, `n` their margins, alpha = 1 - sum(o*d) / (n d n / (N - 1))), with
    each unit's coincidences computed once and the resamples' sums taken as one product: it
    called the package once per resample, about 0.2 ms each (a third of a calibration
    report). NaN where a resample holds fewer than two values, as the package cannot say.
    Tests hold it equal to the package, resample by resample."""
    import numpy as np

    units, values = value_counts.shape
    pairable = np.maximum(value_counts.sum(axis=1), 2) - 1
    per_unit = (
        value_counts[:, :, None] * value_counts[:, None, :]
        - value_counts[:, None, :] * np.eye(values)[None, :, :]
    ) / pairable[:, None, None]
    o = (np.asarray(weights, dtype=float) @ per_unit.reshape(units, -1)).reshape(-1, values, values)
    n = o.sum(axis=1)  # (R, V): each value's pairable count
    if level == "interval":
        d = np.broadcast_to((domain[:, None] - domain[None, :]) ** 2, o.shape)
    else:  # ordinal: the distance depends on each resample's margins
        low = np.minimum.outer(np.arange(values), np.arange(values))
        high = np.maximum.outer(np.arange(values), np.arange(values))
        cum = np.cumsum(n, axis=1)
        between = cum[:, high] - cum[:, low] + n[:, low]
        d = (between - (n[:, :, None] + n[:, None, :]) / 2) ** 2
    observed = (o * d).sum(axis=(1, 2))
    expected = np.einsum("rv,rvw,rw->r", n, d, n) / (n.sum(axis=1) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1 - observed / expected
    out[(n > 0).sum(axis=1) < 2] = np.nan
    return out


def krippendorff_alpha(
    ratings: Sequence[tuple[Hashable, str, float]],
    *,
    clusters: dict[Hashable, Hashable] | None = None,
    level: Literal["interval", "ordinal"] = "interval",
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> RaterAgreement:
    """Alpha over `(item, rater, score)` ratings, with a bootstrap interval over items (by
    conversation when `clusters` maps items to one). One rating per rater and item: a rater's
    later rating of the same item replaces the earlier one."""
    import krippendorff
    import numpy as np

    by_item: dict[Hashable, dict[str, float]] = {}
    for item, rater, score in ratings:
        by_item.setdefault(item, {})[rater] = float(score)
    raters = sorted({rater for scores in by_item.values() for rater in scores})
    pairable = [item for item, scores in by_item.items() if len(scores) >= 2]
    count = sum(len(s) for s in by_item.values())
    domain = sorted({score for item in pairable for score in by_item[item].values()})
    if len(raters) < 2 or not pairable or len(domain) < 2:
        return RaterAgreement(Estimate(None), level, raters, len(pairable), count)
    position = {value: i for i, value in enumerate(domain)}
    value_counts = np.zeros((len(pairable), len(domain)))
    for row, item in enumerate(pairable):
        for score in by_item[item].values():
            value_counts[row, position[score]] += 1

    def alpha_of(rows: NDArray[Any]) -> float:
        counts = value_counts[rows]
        if (counts.sum(axis=0) > 0).sum() < 2:
            return math.nan  # one value only: alpha is undefined
        return float(
            krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level)
        )

    every = np.arange(len(pairable))
    point = alpha_of(every)
    groups = [clusters.get(item, item) if clusters else item for item in pairable]
    boot = ClusterBootstrap(groups, resamples=resamples, seed=seed)

    def statistic(weights: Weights) -> Values:
        return _alpha_resampled(value_counts, np.asarray(domain, dtype=float), level, weights)

    interval = (
        boot.interval(statistic, point, bca=False)
        if math.isfinite(point) and boot.clusters >= 2
        else None
    )
    return RaterAgreement(
        Estimate(point if math.isfinite(point) else None, interval),
        level,
        raters,
        len(pairable),
        count,
    )
