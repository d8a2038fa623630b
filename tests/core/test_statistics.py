"""The statistics behind calibration and Verify, against reference implementations.

SciPy's `bootstrap` (same generator, same draws: the intervals must be equal), `spearmanr`,
`binomtest(...).proportion_ci(method="wilson")`, scikit-learn's weighted kappa and the
`krippendorff` package's worked example; properties with hypothesis; Rogan-Gladen by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from gambit.core._statistics import (
    UNDEFINED_CORRECTION,
    ClusterBootstrap,
    corrected_pass_rate,
    krippendorff_alpha,
    quadratic_kappa,
    rogan_gladen,
    spearman,
    weighted_mean,
    wilson,
)

SCALE = np.arange(-3, 4)


def generated_pairs(n: int, seed: int, noise: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    human = rng.choice(SCALE, size=n)
    grader = np.clip(np.rint(human + rng.normal(0, noise, n)), -3, 3)
    return human.astype(float), grader


def ones(n: int) -> np.ndarray:
    return np.ones((1, n))


# ---- point estimates -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_quadratic_kappa_is_scikit_learns(seed):
    # labels=SCALE: scikit-learn weighs by label index, so the whole scale must be listed
    human, grader = generated_pairs(40, seed)
    expected = cohen_kappa_score(human, grader, weights="quadratic", labels=SCALE)
    assert quadratic_kappa(human, grader)(ones(40))[0] == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(5))
def test_spearman_with_ties_is_scipys(seed):
    human, grader = generated_pairs(30, seed)
    expected = stats.spearmanr(human, grader).statistic
    assert spearman(human, grader)(ones(30))[0] == pytest.approx(expected)


def test_weighted_statistics_equal_the_statistic_on_the_repeated_data():
    # A row of frequency weights is the data with each observation repeated that often.
    human, grader = generated_pairs(25, 7)
    weights = np.random.default_rng(1).integers(0, 4, 25).astype(float)
    repeated = np.repeat(np.arange(25), weights.astype(int))
    assert quadratic_kappa(human, grader)(weights[None, :])[0] == pytest.approx(
        cohen_kappa_score(human[repeated], grader[repeated], weights="quadratic", labels=SCALE)
    )
    assert spearman(human, grader)(weights[None, :])[0] == pytest.approx(
        stats.spearmanr(human[repeated], grader[repeated]).statistic
    )


def test_spearman_of_many_distinct_scores_is_scipys_on_repeated_data():
    # Raw scores with many distinct values take the per-observation ranking path.
    rng = np.random.default_rng(8)
    first, second = rng.normal(size=40), rng.normal(size=40).round(1)
    weights = rng.integers(0, 3, 40).astype(float)
    repeated = np.repeat(np.arange(40), weights.astype(int))
    assert spearman(first, second)(weights[None, :])[0] == pytest.approx(
        stats.spearmanr(first[repeated], second[repeated]).statistic
    )
    boot = ClusterBootstrap(range(40), resamples=300, seed=1)
    assert boot.estimate(spearman(first, second)).interval is not None


def test_undefined_statistics_are_nan_not_zero():
    same = np.zeros(5)
    assert math.isnan(quadratic_kappa(same, same)(ones(5))[0])
    assert math.isnan(spearman(same, np.arange(5.0))(ones(5))[0])


# ---- the bootstrap against scipy.stats.bootstrap ---------------------------------------------


def scipy_interval(statistic_of_indices, n: int, *, seed: int, resamples: int, method: str):
    result = stats.bootstrap(
        (np.arange(n),),
        # rounded as ours are, so that ties with the data's value are ties on both sides
        lambda idx, axis=-1: np.round(np.apply_along_axis(statistic_of_indices, -1, idx), 12),
        n_resamples=resamples,
        rng=np.random.default_rng(seed),
        method=method,
        vectorized=True,
    )
    return result.confidence_interval


@pytest.mark.parametrize("seed", [0, 3])
def test_one_pair_per_conversation_gives_scipys_bca_interval_of_kappa(seed):
    human, grader = generated_pairs(50, seed + 10)
    ours = ClusterBootstrap(range(50), resamples=999, seed=seed).estimate(
        quadratic_kappa(human, grader)
    )
    theirs = scipy_interval(
        lambda i: cohen_kappa_score(human[i], grader[i], weights="quadratic", labels=SCALE),
        50,
        seed=seed,
        resamples=999,
        method="BCa",
    )
    assert ours.interval is not None and ours.interval.method == "bootstrap-bca"
    assert ours.interval.low == pytest.approx(theirs.low, abs=1e-9)
    assert ours.interval.high == pytest.approx(theirs.high, abs=1e-9)


def test_one_pair_per_conversation_gives_scipys_bca_interval_of_spearman():
    human, grader = generated_pairs(40, 21, noise=1.5)
    ours = ClusterBootstrap(range(40), resamples=999, seed=5).estimate(spearman(human, grader))
    theirs = scipy_interval(
        lambda i: stats.spearmanr(human[i], grader[i]).statistic,
        40,
        seed=5,
        resamples=999,
        method="BCa",
    )
    assert ours.interval.low == pytest.approx(theirs.low, abs=1e-9)
    assert ours.interval.high == pytest.approx(theirs.high, abs=1e-9)


def test_the_percentile_interval_of_agreement_is_scipys():
    human, grader = generated_pairs(30, 4)
    agree = (human == grader).astype(float)
    boot = ClusterBootstrap(range(30), resamples=500, seed=2)
    ours = boot.interval(weighted_mean(agree), float(agree.mean()), bca=False)
    theirs = scipy_interval(
        lambda i: agree[i].mean(), 30, seed=2, resamples=500, method="percentile"
    )
    assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high))


def test_the_bootstrap_is_seeded():
    human, grader = generated_pairs(30, 1)
    first = ClusterBootstrap(range(30), seed=9).estimate(quadratic_kappa(human, grader))
    again = ClusterBootstrap(range(30), seed=9).estimate(quadratic_kappa(human, grader))
    other = ClusterBootstrap(range(30), seed=10).estimate(quadratic_kappa(human, grader))
    assert first == again
    assert first.interval != other.interval


def test_conversations_not_messages_are_resampled():
    # Ten conversations of six messages each, every message of a conversation rated alike: the
    # evidence is ten conversations, so the interval must be as wide as for ten pairs, and
    # wider than sixty independent pairs would give.
    human10, grader10 = generated_pairs(10, 2, noise=1.2)
    human = np.repeat(human10, 6)
    grader = np.repeat(grader10, 6)
    clustered = ClusterBootstrap(np.repeat(np.arange(10), 6), seed=1).estimate(
        quadratic_kappa(human, grader)
    )
    independent = ClusterBootstrap(range(60), seed=1).estimate(quadratic_kappa(human, grader))
    ten = ClusterBootstrap(range(10), seed=1).estimate(quadratic_kappa(human10, grader10))
    assert clustered.value == pytest.approx(ten.value)
    assert clustered.interval.width > 1.5 * independent.interval.width
    assert clustered.interval.width == pytest.approx(ten.interval.width, rel=0.35)


def test_a_single_conversation_has_no_interval():
    human, grader = generated_pairs(6, 3)
    estimate = ClusterBootstrap(["c"] * 6).estimate(quadratic_kappa(human, grader))
    assert estimate.value is not None and estimate.interval is None


# ---- properties ----------------------------------------------------------------------------

pairs_strategy = st.lists(
    st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=8, max_size=60
)


@settings(max_examples=60, deadline=None)
@given(pairs_strategy, st.integers(0, 1000))
def test_intervals_contain_the_point_estimate(pairs, seed):
    human = np.array([h for h, _ in pairs], dtype=float)
    grader = np.array([g for _, g in pairs], dtype=float)
    boot = ClusterBootstrap(range(len(pairs)), resamples=300, seed=seed)
    for statistic in (
        quadratic_kappa(human, grader),
        weighted_mean((human == grader).astype(float)),
        spearman(human, grader),
    ):
        estimate = boot.estimate(statistic)
        if estimate.interval is not None:
            # BCa may put the point at an end; a tiny tolerance for float quantiles
            assert estimate.interval.low - 1e-9 <= estimate.value <= estimate.interval.high + 1e-9


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_intervals_contain_the_rate_and_stay_in_0_1(successes, extra):
    trials = successes + extra
    interval = wilson(successes, trials)
    assert 0 <= interval.low <= successes / trials <= interval.high <= 1


def test_intervals_narrow_as_the_sample_grows():
    """Sixteen times the pairs give an interval about four times narrower (1/sqrt(n)). Not
    for every sample: 25 pairs whose kappa lies near its ceiling of 1 can give a narrower
    interval than 400 (seed 1908 does), so this holds of the median over 25 samples."""
    ratios = []
    for seed in range(25):
        human, grader = generated_pairs(400, seed, noise=1.5)
        small = ClusterBootstrap(range(25), resamples=400, seed=seed).estimate(
            quadratic_kappa(human[:25], grader[:25])
        )
        large = ClusterBootstrap(range(400), resamples=400, seed=seed).estimate(
            quadratic_kappa(human, grader)
        )
        ratios.append(small.interval.width / large.interval.width)
    assert 3 < float(np.median(ratios)) < 5.5
    assert wilson(4 * 16, 10 * 16).width < wilson(4, 10).width


# ---- Wilson --------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 5), (3, 10), (7, 20), (50, 50), (123, 400)])
def test_wilson_is_scipys(k, n):
    expected = stats.binomtest(k, n).proportion_ci(method="wilson")
    interval = wilson(k, n)
    assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_wilson_of_nothing_is_none():
    assert wilson(0, 0) is None


# ---- Rogan-Gladen ---------------------------------------------------------------------------


def test_rogan_gladen_by_hand():
    # p = 0.6, Se = 0.9, Sp = 0.8: (0.6 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.4 / 0.7
    assert rogan_gladen(0.6, 0.9, 0.8) == pytest.approx(4 / 7)
    # a perfect grader changes nothing
    assert rogan_gladen(0.37, 1.0, 1.0) == pytest.approx(0.37)
    # p = 0.1 with Sp = 0.8: (0.1 - 0.2) / 0.7 < 0 is clipped to 0; unclipped it is -1/7
    assert rogan_gladen(0.1, 0.9, 0.8) == 0.0
    assert rogan_gladen(0.1, 0.9, 0.8, clip=False) == pytest.approx(-1 / 7)
    assert rogan_gladen(0.99, 0.9, 0.8) == 1.0


@pytest.mark.parametrize(("se", "sp"), [(0.5, 0.5), (0.3, 0.6), (0.4, 0.2)])
def test_rogan_gladen_is_undefined_for_a_grader_no_better_than_chance(se, sp):
    assert rogan_gladen(0.5, se, sp) is None


def test_the_corrected_pass_rate_with_its_interval():
    # 100 runs, 60 passing; 60 rated pairs: 30 human passes of which the grader passes 27
    # (Se 0.9), 30 human fails of which it fails 24 (Sp 0.8).
    passes = [True] * 60 + [False] * 40
    human = [True] * 30 + [False] * 30
    grader = [True] * 27 + [False] * 3 + [False] * 24 + [True] * 6
    result = corrected_pass_rate(passes, range(100), human, grader, range(60), resamples=1000)
    assert result.raw.value == pytest.approx(0.6)
    assert result.sensitivity.value == pytest.approx(0.9)
    assert result.specificity.value == pytest.approx(0.8)
    assert result.corrected.value == pytest.approx(4 / 7)
    interval = result.corrected.interval
    assert interval is not None and interval.contains(4 / 7)
    # both sources of error widen it beyond the raw rate's own interval
    assert interval.width > result.raw.interval.width
    assert result.reason is None
    assert result.to_json()["corrected"]["value"] == round(4 / 7, 4)


@pytest.mark.parametrize(("runs", "rated"), [(3, 10), (5, 10), (20, 40)])
@pytest.mark.parametrize("passing", [True, False])
def test_a_perfect_grader_on_few_ratings_is_no_surer_than_the_raw_rate(runs, rated, passing):
    # The walker's report: ratings all equal to the grader's scores (Se = Sp = 100%) and every
    # run passing gave "100% [100%-100%]" beside "raw 100% [44%-100%]": every bootstrap
    # resample was alike. The corrected rate is at least as uncertain as the raw one.
    human = [True] * (rated // 2) + [False] * (rated - rated // 2)
    result = corrected_pass_rate([passing] * runs, range(runs), human, human, range(rated))
    raw, corrected = result.raw.interval, result.corrected.interval
    assert result.corrected.value == result.raw.value == float(passing)
    assert corrected is not None and raw is not None
    # (up to float noise: with Se = Sp = 1 the correction maps p to (p + 1 - 1) / 1)
    assert corrected.low <= raw.low + 1e-12 and corrected.high >= raw.high - 1e-12
    assert corrected.width >= raw.width - 1e-12 and raw.width > 0
    assert corrected.contains(result.corrected.value)
    assert corrected.method == "rogan-gladen-hull"


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(0, 30),
    st.integers(1, 20),
    st.integers(0, 20),
    st.integers(1, 20),
    st.integers(0, 20),
)
def test_the_corrected_interval_holds_the_estimate_and_the_mapped_raw_interval(
    runs, passing, positives, hits, negatives, rejections
):
    passing, hits, rejections = min(passing, runs), min(hits, positives), min(rejections, negatives)
    human = [True] * positives + [False] * negatives
    grader = [True] * hits + [False] * (positives - hits)
    grader += [False] * rejections + [True] * (negatives - rejections)
    passes = [True] * passing + [False] * (runs - passing)
    result = corrected_pass_rate(
        passes, range(runs), human, grader, range(len(human)), resamples=300
    )
    point, interval = result.corrected.value, result.corrected.interval
    if point is None or interval is None:
        return
    assert interval.contains(point)
    se, sp = result.sensitivity.value, result.specificity.value
    for end in (result.raw.interval.low, result.raw.interval.high):
        mapped = rogan_gladen(end, se, sp)
        assert interval.low - 1e-12 <= mapped <= interval.high + 1e-12


@pytest.mark.parametrize(("k", "n"), [(0, 5), (3, 7), (10, 10), (12, 40)])
def test_draws_from_the_wilson_confidence_distribution_have_scipys_wilson_bounds(k, n):
    from gambit.core._statistics import _wilson_draws

    draws = _wilson_draws(k, n, np.random.default_rng(1), 400_000)
    expected = stats.binomtest(k, n).proportion_ci(method="wilson")
    low, high = np.quantile(draws, [0.025, 0.975])
    # at 0 or n successes half the draws sit on the boundary, so that end is exact
    assert low == pytest.approx(expected.low, abs=3e-3)
    assert high == pytest.approx(expected.high, abs=3e-3)


def test_the_correction_says_when_it_is_undefined():
    # The grader passes half of what humans pass and half of what they fail: chance.
    human = [True] * 10 + [False] * 10
    grader = [True] * 5 + [False] * 5 + [True] * 5 + [False] * 5
    result = corrected_pass_rate([True, False] * 10, range(20), human, grader, range(20))
    assert result.corrected.value is None and result.reason == UNDEFINED_CORRECTION
    only_passes = corrected_pass_rate([True] * 4, range(4), [True] * 5, [True] * 5, range(5))
    assert only_passes.corrected.value is None
    assert "specificity is unknown" in only_passes.reason


# ---- Krippendorff's alpha ---------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with four
# observers, twelve units and missing values: alpha interval 0.849, ordinal 0.815.
# https://repository.upenn.edu/asc_papers/43/
NAN = math.nan
KRIPPENDORFF_EXAMPLE = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def example_ratings():
    return [
        (unit, f"observer {rater}", value)
        for rater, row in enumerate(KRIPPENDORFF_EXAMPLE)
        for unit, value in enumerate(row)
        if not math.isnan(value)
    ]


def test_krippendorffs_alpha_gives_the_published_example():
    interval = krippendorff_alpha(example_ratings(), level="interval", resamples=300)
    assert interval.alpha.value == pytest.approx(0.849, abs=5e-4)
    assert interval.items == 11  # unit 12 has one value: not pairable
    assert interval.raters == [f"observer {i}" for i in range(4)]
    assert interval.alpha.interval is not None and interval.alpha.interval.contains(0.849)
    ordinal = krippendorff_alpha(example_ratings(), level="ordinal", resamples=300)
    assert ordinal.alpha.value == pytest.approx(0.815, abs=5e-4)


@pytest.mark.parametrize("level", ["interval", "ordinal"])
def test_alpha_of_every_resample_at_once_equals_the_package_resample_by_resample(level):
    # The bootstrap computes all resamples' alphas in one product; the package, called once
    # per resample on the units drawn (repeated as drawn), is the reference.
    import krippendorff

    from gambit.core._statistics import _alpha_resampled

    rng = np.random.default_rng(7)
    domain = np.array([-3.0, -1.0, 0.0, 1.0, 2.5])
    counts = np.zeros((30, len(domain)))
    for row in counts:  # 2 to 4 raters per unit, around a unit's own value
        centre = rng.integers(len(domain))
        for _ in range(rng.integers(2, 5)):
            row[min(len(domain) - 1, max(0, centre + rng.integers(-1, 2)))] += 1
    weights = rng.multinomial(30, [1 / 30] * 30, size=200).astype(float)
    weights[0] = 0
    weights[0, :2] = [3, 4]  # a resample of two units: may hold one value only
    got = _alpha_resampled(counts, domain, level, weights)
    for r, row in enumerate(weights):
        drawn = counts[np.repeat(np.arange(30), row.astype(int))]
        if (drawn.sum(axis=0) > 0).sum() < 2:
            assert math.isnan(got[r])
            continue
        expected = krippendorff.alpha(
            value_counts=drawn, value_domain=domain, level_of_measurement=level
        )
        assert got[r] == pytest.approx(expected, abs=1e-12), r


def test_alpha_needs_two_raters_on_one_item():
    single = krippendorff_alpha([("a", "ann", 1), ("b", "ann", 2)])
    assert single.alpha.value is None and single.items == 0
