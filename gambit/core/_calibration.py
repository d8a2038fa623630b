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
- the disagreements, largest first, each with the links the caller attached, and grouped by
  each label the caller attached (a scenario, say) and by the human score's region;
- a 95% interval on each figure (a bootstrap over conversations: docs/calibration.md), the
  grader's sensitivity and specificity at the pass threshold (Wilson intervals), whether
  there is enough evidence to judge (`MIN_PAIRS`, `MAX_KAPPA_WIDTH`), and a plain-language
  verdict: can the grader rank runs, gate a release on a pass rate, or not yet, and the most
  useful next step.

Beside one grader against the humans: `calibration_drift` (kappa per grader version in time
order, flagging a version worse than the one before), `grader_agreement` (pairwise kappa of
graders that scored the same items), and two probes of known judge biases, `length_bias`
(score against reply length) and `position_bias` (how often the first-shown reply wins).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._statistics import (
    RESAMPLES,
    SEED,
    ClusterBootstrap,
    Estimate,
    Interval,
    interval_json,
    proportion,
    quadratic_kappa,
    weighted_mean,
)
from ._statistics import spearman as weighted_spearman

SCALE = tuple(range(-3, 4))
# The minimum-evidence rule (docs/calibration.md, "How much is enough"): a calibration is
# judged when it has at least MIN_PAIRS pairs and its kappa interval is at most
# MAX_KAPPA_WIDTH wide. MIN_PAIRS is the smallest number of pairs at which the median 95%
# interval of kappa is that narrow for a typical grader (docs/simulate_min_evidence.py;
# tests/core/test_min_evidence.py re-runs a smaller simulation).
MIN_PAIRS = 70
MAX_KAPPA_WIDTH = 0.30
# The verdict (docs/calibration.md, "The verdict"): a grader ranks runs when the lower bounds
# of both kappa and Spearman reach RANK_MIN_LOWER ("substantial" agreement, Landis & Koch
# 1977); it gates a release on a pass rate when the lower bounds of both its sensitivity and
# its specificity at the pass threshold reach GATE_MIN_LOWER.
RANK_MIN_LOWER = 0.6
GATE_MIN_LOWER = 0.75
# Fewer rated items than this on one side of the threshold: the next ratings should be of
# that side (sensitivity or specificity is unknown or wide without them).
MIN_PER_SIDE = 15
# Regions of the human score, for grouping disagreements.
# Regions of the human score's category (a mean of several raters rounds half away from
# zero), named by the means they hold: a mean of +1.67 is "high", not "+2..+3".
SCORE_REGIONS = (
    ("low (-1.5 and below)", -3, -2),
    ("middle (-1.5 to +1.5)", -1, 1),
    ("high (+1.5 and above)", 2, 3),
)


@dataclass(frozen=True)
class CalibrationPair:
    """One grade with a human rating of the same thing, and links back to both.

    `conversation` is the unit the bootstrap resamples (several rated messages of one
    conversation are one piece of evidence); None makes the pair its own conversation.
    `labels` are what disagreements are grouped by (for example {"scenario": "refunds"}).
    """

    human: float
    grader: float
    links: dict[str, Any] = field(default_factory=dict)
    conversation: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "human": self.human,
            "grader": self.grader,
            "conversation": self.conversation,
            "labels": self.labels,
            "links": self.links,
        }


@dataclass(frozen=True)
class Evidence:
    """Whether a calibration has enough pairs to be judged, and how many more to rate."""

    enough: bool
    rate_more: int
    message: str | None  # "too few ratings to judge: rate N more", when not enough

    def to_json(self) -> dict[str, Any]:
        return {
            "enoughEvidence": self.enough,
            "rateMore": self.rate_more,
            "minPairs": MIN_PAIRS,
            "maxKappaWidth": MAX_KAPPA_WIDTH,
            "message": self.message,
        }


@dataclass(frozen=True)
class Verdict:
    """What a grader can be trusted with, in plain words, and the most useful next step."""

    rank: bool  # can rank runs (kappa and Spearman lower bounds)
    gate: bool  # can gate a release on a pass rate (sensitivity/specificity lower bounds)
    summary: str
    next_step: str
    # The next step is to grade more (rating cannot reach the minimum evidence: too few of
    # the items this grader graded are left unrated), not to rate.
    grade_more: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "canRank": self.rank,
            "canGate": self.gate,
            "summary": self.summary,
            "nextStep": self.next_step,
            "gradeMore": self.grade_more,
        }


@dataclass(frozen=True)
class DisagreementGroup:
    """The pairs sharing one label value (or score region), and how many of them disagree."""

    value: str
    pairs: int
    disagreements: int
    mean_difference: float  # mean of grader - human over the group's pairs

    @property
    def share(self) -> float:
        return self.disagreements / self.pairs if self.pairs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "pairs": self.pairs,
            "disagreements": self.disagreements,
            "share": _round(self.share),
            "meanDifference": _round(self.mean_difference),
        }


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
    threshold: float = 0.0
    conversations: int = 0
    intervals: dict[str, Interval | None] = field(default_factory=dict)
    sensitivity: Estimate = field(default_factory=lambda: Estimate(None))
    specificity: Estimate = field(default_factory=lambda: Estimate(None))
    human_passes: int = 0
    human_fails: int = 0
    evidence: Evidence = field(default_factory=lambda: Evidence(False, MIN_PAIRS, None))
    verdict: Verdict | None = None
    disagreement_groups: dict[str, list[DisagreementGroup]] = field(default_factory=dict)
    pair_list: list[CalibrationPair] = field(default_factory=list)
    graded_counted: bool = False  # `graded` was counted by the caller, not defaulted to pairs

    @property
    def coverage_of_graded(self) -> float | None:
        return self.pairs / self.graded if self.graded else None

    @property
    def coverage_of_rated(self) -> float | None:
        return self.pairs / self.rated if self.rated else None

    def to_json(self, *, include_pairs: bool = False) -> dict[str, Any]:
        """The figures; `include_pairs` adds every pair used, so anyone can recompute them."""
        data = {
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
            "threshold": self.threshold,
            "conversations": self.conversations,
            "intervals": {name: interval_json(i) for name, i in self.intervals.items()},
            "sensitivity": self.sensitivity.to_json(),
            "specificity": self.specificity.to_json(),
            "humanPasses": self.human_passes,
            "humanFails": self.human_fails,
            **self.evidence.to_json(),
            "verdict": self.verdict.to_json() if self.verdict is not None else None,
            "disagreementGroups": {
                key: [group.to_json() for group in groups]
                for key, groups in self.disagreement_groups.items()
            },
        }
        if include_pairs:
            data["pairsUsed"] = [pair.to_json() for pair in self.pair_list]
        return data


def category(score: float) -> int:
    """The -3..3 category of a score: rounded half away from zero, then clamped."""
    rounded = math.floor(abs(score) + 0.5) * (1 if score >= 0 else -1)
    return max(SCALE[0], min(SCALE[-1], int(rounded)))


def calibrate(
    pairs: Iterable[CalibrationPair],
    *,
    graded: int | None = None,
    rated: int | None = None,
    threshold: float = 0.0,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Calibration:
    """All calibration figures for `pairs`; `graded`/`rated` default to the number of pairs.

    A pair passes, on either side, when its score is at least `threshold`. The intervals come
    from `resamples` bootstrap resamples of the conversations drawn with `seed`: the same
    pairs and seed give the same figures.
    """
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
            "scoreRegion": _region(h),
            **p.labels,
            **p.links,
        }
        for p, h, g in zip(pairs, humans, graders, strict=True)
        if h != g
    ]
    disagreements.sort(key=lambda d: -abs(d["difference"]))
    intervals, conversations = _intervals(pairs, humans, graders, resamples, seed)
    human_pass = [p.human >= threshold for p in pairs]
    grader_pass = [p.grader >= threshold for p in pairs]
    positives = sum(human_pass)
    sensitivity = proportion(
        sum(h and g for h, g in zip(human_pass, grader_pass, strict=True)), positives
    )
    specificity = proportion(
        sum(not h and not g for h, g in zip(human_pass, grader_pass, strict=True)),
        n - positives,
    )
    kappa_interval = intervals.get("kappa")
    evidence = _evidence(n, kappa_interval)
    groups = _disagreement_groups(pairs, humans, graders)
    result = Calibration(
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
        threshold=threshold,
        conversations=conversations,
        intervals=intervals,
        sensitivity=sensitivity,
        specificity=specificity,
        human_passes=positives,
        human_fails=n - positives,
        evidence=evidence,
        disagreement_groups=groups,
        pair_list=pairs,
        graded_counted=graded is not None,
    )
    return _with_verdict(result)


def _conversations(pairs: Sequence[CalibrationPair]) -> list[Hashable]:
    return [
        ("conversation", p.conversation) if p.conversation is not None else ("pair", i)
        for i, p in enumerate(pairs)
    ]


def _canonical_order(pair: CalibrationPair) -> tuple[str, float, float, str]:
    return (
        pair.conversation or "",
        pair.human,
        pair.grader,
        json.dumps(pair.links, sort_keys=True, default=str),
    )


def _in_canonical_order(pairs: Sequence[CalibrationPair]) -> list[int]:
    """The positions of `pairs` in the one order every bootstrap over them uses, whatever the
    caller's (the simulator reads sessions, the CLI export rows): the bootstrap draws
    conversations by position, so the same pairs in another order gave other intervals for
    the same seed. `calibrate`'s intervals and `calibration_drift`'s kappa share it, so a
    version's kappa has one interval everywhere."""
    return sorted(range(len(pairs)), key=lambda i: _canonical_order(pairs[i]))


def _intervals(
    pairs: Sequence[CalibrationPair],
    humans: Sequence[int],
    graders: Sequence[int],
    resamples: int,
    seed: int,
) -> tuple[dict[str, Interval | None], int]:
    """95% intervals of exact, within-1, kappa, Spearman and bias, by conversation."""
    names = ("exact", "withinOne", "kappa", "spearman", "bias")
    if not pairs:
        return dict.fromkeys(names), 0
    order = _in_canonical_order(pairs)
    pairs = [pairs[i] for i in order]
    humans = [humans[i] for i in order]
    graders = [graders[i] for i in order]
    boot = ClusterBootstrap(_conversations(pairs), resamples=resamples, seed=seed)
    statistics_: dict[str, Any] = {
        "exact": weighted_mean([float(h == g) for h, g in zip(humans, graders, strict=True)]),
        "withinOne": weighted_mean(
            [float(abs(h - g) <= 1) for h, g in zip(humans, graders, strict=True)]
        ),
        "kappa": quadratic_kappa(humans, graders),
        "spearman": weighted_spearman([p.human for p in pairs], [p.grader for p in pairs]),
        "bias": weighted_mean([p.grader - p.human for p in pairs]),
    }
    return (
        {name: boot.estimate(statistic).interval for name, statistic in statistics_.items()},
        boot.clusters,
    )


def _evidence(pairs: int, kappa: Interval | None) -> Evidence:
    """Enough when there are MIN_PAIRS pairs and kappa's interval is at most MAX_KAPPA_WIDTH
    wide. Otherwise how many more: up to MIN_PAIRS, and, since an interval narrows as one
    over the square root of the sample, as many as would bring the width down to the limit."""
    more = max(0, MIN_PAIRS - pairs)
    if kappa is not None and kappa.width > MAX_KAPPA_WIDTH:
        needed = math.ceil(pairs * (kappa.width / MAX_KAPPA_WIDTH) ** 2)
        more = max(more, needed - pairs)
    elif kappa is None and more == 0:
        more = MIN_PAIRS  # kappa has no interval (one category throughout): rate varied items
    if more == 0:
        return Evidence(True, 0, None)
    return Evidence(False, more, f"too few ratings to judge: rate {more} more")


def _region(category_: int) -> str:
    for name, low, high in SCORE_REGIONS:
        if low <= category_ <= high:
            return name
    return "?"


def _disagreement_groups(
    pairs: Sequence[CalibrationPair], humans: Sequence[int], graders: Sequence[int]
) -> dict[str, list[DisagreementGroup]]:
    """Pairs grouped by each label key and by the human score's region; most disagreeing
    groups first."""
    keyed: dict[str, dict[str, list[tuple[bool, float]]]] = {}
    for pair, h, g in zip(pairs, humans, graders, strict=True):
        entry = (h != g, pair.grader - pair.human)
        for key, value in [*pair.labels.items(), ("scoreRegion", _region(h))]:
            keyed.setdefault(key, {}).setdefault(str(value), []).append(entry)
    out = {}
    for key, values in keyed.items():
        groups = [
            DisagreementGroup(
                value=value,
                pairs=len(entries),
                disagreements=sum(d for d, _ in entries),
                mean_difference=statistics.fmean(diff for _, diff in entries),
            )
            for value, entries in values.items()
        ]
        groups.sort(key=lambda group: (-group.disagreements, -group.share, group.value))
        out[key] = groups
    return out


def _fmt(estimate_value: float | None, interval: Interval | None, spec: str = ".2f") -> str:
    if estimate_value is None:
        return "undefined"
    if interval is None:
        return format(estimate_value, spec)
    return f"{estimate_value:{spec}} [{interval.low:{spec}}, {interval.high:{spec}}]"


def _clustered_disagreement(calibration: Calibration) -> tuple[str, DisagreementGroup] | None:
    """The group where disagreements cluster: at least 3 of them, at a share above the
    overall one; the largest such group."""
    overall = len(calibration.disagreements) / calibration.pairs if calibration.pairs else 0
    best: tuple[str, DisagreementGroup] | None = None
    for key, groups in calibration.disagreement_groups.items():
        for group in groups:
            if (
                group.disagreements < 3
                or group.share <= overall
                or group.pairs == calibration.pairs
            ):
                continue
            if best is None or (group.disagreements, group.share) > (
                best[1].disagreements,
                best[1].share,
            ):
                best = (key, group)
    return best


def _with_verdict(calibration: Calibration) -> Calibration:
    from dataclasses import replace

    return replace(calibration, verdict=verdict(calibration))


def verdict(calibration: Calibration) -> Verdict:
    """Can this grader rank runs, gate a release on a pass rate, or not yet; and what next.

    Judged on the lower bounds of the 95% intervals (docs/calibration.md, "The verdict").
    """
    c = calibration
    side_hint = _side_hint(c)
    if not c.evidence.enough:
        unrated = c.graded - c.pairs
        if c.graded_counted and unrated < c.evidence.rate_more:
            # Rating alone cannot get there (before, this said "rate N more" when every item
            # the grader had graded was rated already).
            left = (
                "every item it graded is rated"
                if unrated <= 0
                else f"only {unrated} of the items it graded are not rated yet"
            )
            step = (
                f"grade more conversations with this version of the grader, then rate them: "
                f"{c.evidence.rate_more} more rated items are needed and {left}"
            )
            return Verdict(False, False, f"not yet: {c.evidence.message}", step, grade_more=True)
        step = f"rate {c.evidence.rate_more} more items"
        if side_hint:
            step += f", {side_hint}"
        return Verdict(False, False, f"not yet: {c.evidence.message}", step)
    kappa_i, spearman_i = c.intervals.get("kappa"), c.intervals.get("spearman")
    rank = (
        kappa_i is not None
        and spearman_i is not None
        and kappa_i.low >= RANK_MIN_LOWER
        and spearman_i.low >= RANK_MIN_LOWER
    )
    se_i, sp_i = c.sensitivity.interval, c.specificity.interval
    gate = (
        se_i is not None
        and sp_i is not None
        and se_i.low >= GATE_MIN_LOWER
        and sp_i.low >= GATE_MIN_LOWER
    )
    figures = (
        f"kappa {_fmt(c.kappa, kappa_i)}, Spearman {_fmt(c.spearman, spearman_i)}; "
        f"at the threshold {c.threshold:+g}: sensitivity {_fmt(c.sensitivity.value, se_i)}, "
        f"specificity {_fmt(c.specificity.value, sp_i)}"
    )
    if rank and gate:
        summary = "trusted to rank runs and to gate a release on its pass rate"
    elif rank:
        summary = "trusted to rank runs, not to gate a release on its pass rate"
    elif gate:
        summary = "trusted to gate a release on its pass rate, not to rank runs"
    else:
        summary = "not yet: neither ranking runs nor gating a release"
    summary += f" ({figures})"
    cluster = _clustered_disagreement(c)
    if rank and gate:
        step = "none needed now: rate a sample of new runs now and then, to catch drift"
    elif side_hint and not gate:
        step = f"rate more items, {side_hint}"
    elif cluster is not None:
        key, group = cluster
        where = "human scores " + group.value if key == "scoreRegion" else f"{key} {group.value!r}"
        step = (
            f"fix the rubric where disagreements cluster: {where} "
            f"({group.disagreements} of {group.pairs} pairs disagree, grader "
            f"{group.mean_difference:+.1f} on average)"
        )
    elif not gate and (
        (
            se_i is not None
            and c.sensitivity.value is not None
            and c.sensitivity.value >= GATE_MIN_LOWER
            and se_i.low < GATE_MIN_LOWER
        )
        or (
            sp_i is not None
            and c.specificity.value is not None
            and c.specificity.value >= GATE_MIN_LOWER
            and sp_i.low < GATE_MIN_LOWER
        )
    ):
        step = "rate more items near the threshold: the pass/fail figures are too uncertain"
    else:
        step = "revise the rubric: read the largest disagreements first"
    return Verdict(rank, gate, summary, step)


def _side_hint(c: Calibration) -> str | None:
    """Which side of the threshold the next ratings should come from, when one is scarce."""
    if c.pairs == 0:
        return None
    if c.human_fails < MIN_PER_SIDE and c.human_fails <= c.human_passes:
        return (
            f"including replies that deserve to fail (below {c.threshold:+g}): only "
            f"{c.human_fails} of the {c.pairs} rated so far are below it (the grader's "
            "failing grades are the likeliest place to find them)"
        )
    if c.human_passes < MIN_PER_SIDE:
        return (
            f"including replies that deserve to pass (at least {c.threshold:+g}): only "
            f"{c.human_passes} of the {c.pairs} rated so far reach it (the grader's passing "
            "grades are the likeliest place to find them)"
        )
    return None


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


# ---- graders over time, graders against each other, and known judge biases ------------------


@dataclass(frozen=True)
class DriftPoint:
    """One grader version's kappa against the humans, and whether it got worse.

    `worse` when its kappa is below the interval of the version before it (the previous one
    with an interval): that version's rubric edit made the grader worse.
    """

    version: str
    time: str | None
    pairs: int
    kappa: Estimate
    enough_evidence: bool
    worse: bool
    message: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "time": self.time,
            "pairs": self.pairs,
            "kappa": self.kappa.to_json(),
            "enoughEvidence": self.enough_evidence,
            "worse": self.worse,
            "message": self.message,
        }


def calibration_drift(
    versions: Sequence[tuple[str, str | None, Sequence[CalibrationPair]]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[DriftPoint]:
    """Kappa per grader version (`(version, time, pairs)`, oldest first), flagging a version
    whose kappa falls below the previous version's 95% interval."""
    out: list[DriftPoint] = []
    previous: DriftPoint | None = None
    for version, time, given in versions:
        pairs = [given[i] for i in _in_canonical_order(given)]  # as `calibrate` bootstraps them
        humans = [category(p.human) for p in pairs]
        graders = [category(p.grader) for p in pairs]
        kappa = (
            ClusterBootstrap(_conversations(pairs), resamples=resamples, seed=seed).estimate(
                quadratic_kappa(humans, graders)
            )
            if pairs
            else Estimate(None)
        )
        worse, message = False, None
        before = previous.kappa.interval if previous is not None else None
        if before is not None and kappa.value is not None and kappa.value < before.low:
            worse = True
            message = (
                f"the rubric edit of {time or version} made this grader worse: kappa "
                f"{kappa.value:.2f}, below the previous version's interval "
                f"[{before.low:.2f}, {before.high:.2f}]"
            )
        point = DriftPoint(
            version=version,
            time=time,
            pairs=len(pairs),
            kappa=kappa,
            enough_evidence=_evidence(len(pairs), kappa.interval).enough,
            worse=worse,
            message=message,
        )
        out.append(point)
        if kappa.interval is not None:
            previous = point
    return out


@dataclass(frozen=True)
class GraderPairAgreement:
    """Quadratic kappa between two graders over the items both scored."""

    first: str
    second: str
    items: int
    kappa: Estimate

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "second": self.second,
            "items": self.items,
            "kappa": self.kappa.to_json(),
        }


def grader_agreement(
    scores: Mapping[str, Mapping[Any, float]],
    *,
    conversations: Mapping[Any, str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[GraderPairAgreement]:
    """Every pair of graders (`scores[grader][item]`) that scored at least two of the same
    items: their quadratic kappa over those items, with an interval by conversation."""
    names = list(scores)
    out = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            shared = [item for item in scores[first] if item in scores[second]]
            if len(shared) < 2:
                continue
            a = [category(scores[first][item]) for item in shared]
            b = [category(scores[second][item]) for item in shared]
            clusters = [(conversations or {}).get(item, ("item", item)) for item in shared]
            boot = ClusterBootstrap(clusters, resamples=resamples, seed=seed)
            out.append(
                GraderPairAgreement(
                    first, second, len(shared), boot.estimate(quadratic_kappa(a, b))
                )
            )
    return out


@dataclass(frozen=True)
class BiasProbe:
    """A probe of a known judge bias: its figure, interval, and whether the interval shows it.

    `kind` is "verbosity" (Spearman of score against reply length: 0 means no preference for
    long replies) or "position" (the share of comparisons the first-shown reply wins: 0.5
    means no preference for the first).
    """

    kind: str
    estimate: Estimate
    samples: int
    flagged: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            **self.estimate.to_json(),
            "samples": self.samples,
            "flagged": self.flagged,
            "message": self.message,
        }


def length_bias(
    scores: Sequence[float],
    lengths: Sequence[float],
    *,
    conversations: Sequence[Hashable] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> BiasProbe:
    """Verbosity: Spearman's rho of the grader's scores against the graded replies' lengths,
    with a bootstrap interval (by conversation when given). Flagged when the interval lies
    above 0: longer replies score higher than chance would give."""
    clusters = list(conversations) if conversations is not None else list(range(len(scores)))
    if len(scores) < 2:
        estimate = Estimate(None)
    else:
        boot = ClusterBootstrap(clusters, resamples=resamples, seed=seed)
        estimate = boot.estimate(weighted_spearman(lengths, scores))
    interval = estimate.interval
    flagged = interval is not None and interval.low > 0
    if estimate.value is None:
        message = "not measurable: fewer than two replies, or all of one length or one score"
    elif flagged:
        message = (
            f"longer replies score higher: Spearman {_fmt(estimate.value, interval)} between "
            "length and score"
        )
    elif interval is not None and interval.high < 0:
        # Not the verbosity bias the probe looks for, but a preference all the same: say so
        # (a rubric that asks for brevity does this; otherwise the grader penalises length).
        message = (
            f"shorter replies score higher: Spearman {_fmt(estimate.value, interval)} between "
            "length and score; expected only if the rubric asks for brevity"
        )
    else:
        message = (
            f"no sign of a preference for long replies: Spearman {_fmt(estimate.value, interval)}"
        )
    return BiasProbe("verbosity", estimate, len(scores), flagged, message)


def position_bias(first_shown_wins: Sequence[bool]) -> BiasProbe:
    """Position: for a grader that compares two replies, how often the first-shown one wins,
    with a Wilson interval. Flagged when the interval excludes 0.5."""
    estimate = proportion(sum(first_shown_wins), len(first_shown_wins))
    interval = estimate.interval
    flagged = interval is not None and not interval.contains(0.5)
    if estimate.value is None:
        message = "not measurable: no comparisons"
    elif flagged:
        side = "first" if estimate.value > 0.5 else "second"
        message = (
            f"the {side}-shown reply wins more often than chance: first wins "
            f"{_fmt(estimate.value, interval)}"
        )
    else:
        message = f"no sign of a position preference: first wins {_fmt(estimate.value, interval)}"
    return BiasProbe("position", estimate, len(first_shown_wins), flagged, message)
