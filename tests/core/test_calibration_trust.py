"""How far a grader can be trusted: intervals, the minimum-evidence rule, the verdict, drift,
agreement between graders, the bias probes and the corrected pass rate in Verify summaries
(docs/calibration.md)."""

from __future__ import annotations

import random

import pytest

from gambit.core._calibration import (
    GATE_MIN_LOWER,
    MAX_KAPPA_WIDTH,
    MIN_PAIRS,
    CalibrationPair,
    calibrate,
    calibration_drift,
    grader_agreement,
    length_bias,
    position_bias,
)
from gambit.core._verify import GradeSample, summarize


def noisy_pairs(
    n: int, *, seed: int = 0, noise: float = 0.4, per_conversation: int = 1, scenario=None
) -> list[CalibrationPair]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        human = rng.choice([-3, -2, -1, 0, 1, 2, 3])
        grader = max(-3, min(3, round(human + rng.gauss(0, noise))))
        labels = {"scenario": scenario(i) if scenario else "s"}
        pairs.append(
            CalibrationPair(
                human,
                grader,
                {"ref": f"m{i}"},
                conversation=f"c{i // per_conversation}",
                labels=labels,
            )
        )
    return pairs


def test_every_figure_carries_an_interval_that_contains_it():
    result = calibrate(noisy_pairs(80, noise=1.0))
    for name, value in [
        ("kappa", result.kappa),
        ("spearman", result.spearman),
        ("exact", result.exact),
        ("withinOne", result.within_one),
        ("bias", result.bias),
    ]:
        interval = result.intervals[name]
        assert interval is not None and interval.low - 1e-9 <= value <= interval.high + 1e-9
    data = result.to_json()
    assert set(data["intervals"]) == {"kappa", "spearman", "exact", "withinOne", "bias"}
    assert data["sensitivity"]["interval"]["method"] == "wilson"


def test_the_same_pairs_give_the_same_figures():
    pairs = noisy_pairs(70, noise=1.0)
    assert calibrate(pairs).to_json() == calibrate(pairs).to_json()


def test_too_few_ratings_say_how_many_more_and_keep_the_figures():
    result = calibrate(noisy_pairs(20))
    data = result.to_json()
    assert data["enoughEvidence"] is False
    assert data["rateMore"] >= MIN_PAIRS - 20
    assert data["message"] == f"too few ratings to judge: rate {data['rateMore']} more"
    assert data["kappa"] is not None  # the JSON keeps the figures
    assert result.verdict.rank is False and result.verdict.gate is False
    assert result.verdict.summary.startswith("not yet: too few ratings to judge")


def test_a_wide_interval_asks_for_more_even_past_the_minimum():
    # Ten conversations of eight messages, the grader's error shared within a conversation:
    # 80 pairs but the evidence of ten conversations.
    rng = random.Random(0)
    pairs = []
    for conversation in range(10):
        offset = rng.gauss(0, 2.5)
        for _ in range(8):
            human = rng.choice([-3, -2, -1, 0, 1, 2, 3])
            grader = max(-3, min(3, round(human + offset + rng.gauss(0, 1))))
            pairs.append(CalibrationPair(human, grader, conversation=f"c{conversation}"))
    result = calibrate(pairs)
    assert result.pairs >= MIN_PAIRS
    assert result.intervals["kappa"].width > MAX_KAPPA_WIDTH
    # the same pairs taken as independent would look like firmer evidence
    loose = calibrate([CalibrationPair(p.human, p.grader) for p in pairs])
    assert loose.intervals["kappa"].width < result.intervals["kappa"].width
    assert result.evidence.enough is False and result.evidence.rate_more > 0


def test_a_good_grader_with_enough_evidence_is_trusted_to_rank_and_gate():
    result = calibrate(noisy_pairs(200, noise=0.3))
    assert result.evidence.enough
    assert result.verdict.rank and result.verdict.gate
    assert result.verdict.summary.startswith("trusted to rank runs and to gate")
    assert result.specificity.interval.low >= GATE_MIN_LOWER


def test_a_poor_grader_is_not_trusted_and_is_told_where_disagreements_cluster():
    # Good on every scenario but "refunds", where it scores everything +3.
    pairs = []
    for pair in noisy_pairs(
        300, noise=0.3, scenario=lambda i: "refunds" if i % 3 == 0 else "other"
    ):
        if pair.labels["scenario"] == "refunds":
            pair = CalibrationPair(pair.human, 3, pair.links, pair.conversation, pair.labels)
        pairs.append(pair)
    result = calibrate(pairs)
    assert result.evidence.enough
    assert not result.verdict.gate
    assert "fix the rubric where disagreements cluster: scenario 'refunds'" in (
        result.verdict.next_step
    )
    (refunds, other) = result.disagreement_groups["scenario"]
    assert refunds.value == "refunds" and refunds.share > other.share
    assert {g.value for g in result.disagreement_groups["scoreRegion"]} <= {
        "low (-1.5 and below)",
        "middle (-1.5 to +1.5)",
        "high (+1.5 and above)",
    }


def test_scarce_failures_ask_for_ratings_of_failing_items():
    pairs = [p for p in noisy_pairs(200, noise=0.3) if p.human >= 0][:60]
    pairs += [
        CalibrationPair(-2, -2, conversation="f1"),
        CalibrationPair(-3, -3, conversation="f2"),
    ]
    result = calibrate(pairs)
    assert "including replies that deserve to fail (below +0): only" in result.verdict.next_step
    assert result.verdict.next_step.endswith(
        "(the grader's failing grades are the likeliest place to find them)"
    )


def test_the_json_can_include_every_pair_used():
    pairs = noisy_pairs(5)
    data = calibrate(pairs).to_json(include_pairs=True)
    assert data["pairsUsed"][0] == {
        "human": pairs[0].human,
        "grader": pairs[0].grader,
        "conversation": "c0",
        "labels": {"scenario": "s"},
        "links": {"ref": "m0"},
    }
    assert "pairsUsed" not in calibrate(pairs).to_json()


def test_drift_flags_the_version_that_made_the_grader_worse():
    good = noisy_pairs(120, noise=0.3, seed=1)
    worse = noisy_pairs(120, noise=2.5, seed=2)
    series = calibration_drift(
        [
            ("v1", "2026-01-01T00:00:00Z", good),
            ("v2", "2026-02-01T00:00:00Z", good),
            ("v3", "2026-03-01T00:00:00Z", worse),
        ]
    )
    assert [p.version for p in series] == ["v1", "v2", "v3"]
    assert [p.worse for p in series] == [False, False, True]
    assert series[2].message.startswith("the rubric edit of 2026-03-01T00:00:00Z made this grader")
    assert series[2].to_json()["kappa"]["value"] < series[1].kappa.interval.low


@pytest.mark.parametrize("seed", [0, 7])
def test_a_versions_drift_kappa_has_its_calibrations_interval(seed):
    # `gambit calibrate` printed "kappa +0.78 [+0.68, +0.85]" for a version and "+0.78
    # [+0.67, +0.85]" on its drift line: same pairs and seed, but the drift bootstrapped them
    # in the caller's order, not the canonical one.
    pairs = noisy_pairs(90, noise=1.5, seed=3, per_conversation=3)
    shuffled = pairs[:]
    random.Random(5).shuffle(shuffled)
    expected = calibrate(pairs, resamples=500, seed=seed).intervals["kappa"]
    for given in (pairs, shuffled):
        older, newer = calibration_drift(
            [("v1", None, noisy_pairs(30, seed=1)), ("v2", None, given)], resamples=500, seed=seed
        )
        assert newer.kappa.interval == expected
        assert calibrate(given, resamples=500, seed=seed).intervals["kappa"] == expected


def test_graders_that_scored_the_same_items_are_compared_pairwise():
    items = {f"i{n}": n % 7 - 3 for n in range(40)}
    close = {item: score for item, score in items.items()}
    far = {item: -score for item, score in items.items()}
    matrix = grader_agreement({"a": items, "b": close, "c": far, "d": {"other": 1}})
    found = {(m.first, m.second): m for m in matrix}
    assert set(found) == {("a", "b"), ("a", "c"), ("b", "c")}  # d shares no item
    assert found[("a", "b")].kappa.value == pytest.approx(1.0)
    assert found[("a", "c")].kappa.value < 0
    assert found[("a", "c")].kappa.interval is not None


def test_the_verbosity_probe_flags_scores_that_follow_length():
    rng = random.Random(3)
    lengths = [rng.randint(50, 2000) for _ in range(80)]
    follows = [min(3, max(-3, round(length / 300) - 3)) for length in lengths]
    flagged = length_bias(follows, lengths)
    assert flagged.flagged and flagged.estimate.value > 0.5
    independent = length_bias([rng.choice([-1, 0, 1, 2]) for _ in lengths], lengths)
    assert not independent.flagged
    assert independent.to_json()["kind"] == "verbosity"
    assert independent.message.startswith("no sign of a preference for long replies")
    # scores that fall with length: not flagged as verbosity, but never "no sign" either
    # (the demo grader's 7 replies read "no sign of a preference ...: Spearman -1.00")
    falls = length_bias([-s for s in follows], lengths)
    assert not falls.flagged and falls.estimate.value < -0.5
    assert falls.message.startswith("shorter replies score higher")


def test_the_position_probe_flags_a_first_shown_preference():
    assert position_bias([True] * 70 + [False] * 30).flagged
    fair = position_bias([True, False] * 40)
    assert not fair.flagged and fair.estimate.value == 0.5
    assert position_bias([]).estimate.value is None


def test_verify_summaries_carry_a_wilson_interval_and_with_ratings_the_corrected_rate():
    samples = [GradeSample("g", f"run{i}", "s", score=1.0 if i < 60 else -1.0) for i in range(100)]
    plain = summarize(samples)["g"]
    assert plain.pass_rate == 0.6
    interval = plain.pass_rate_interval
    assert interval.method == "wilson" and interval.contains(0.6)
    assert plain.to_json()["passRateInterval"]["low"] == round(interval.low, 4)
    assert plain.to_json()["correctedPassRate"] is None

    # Se 0.9 (27 of 30 human passes), Sp 0.8 (24 of 30 human fails)
    pairs = (
        [CalibrationPair(2, 2, conversation=f"p{i}") for i in range(27)]
        + [CalibrationPair(2, -2, conversation=f"q{i}") for i in range(3)]
        + [CalibrationPair(-2, -2, conversation=f"r{i}") for i in range(24)]
        + [CalibrationPair(-2, 2, conversation=f"t{i}") for i in range(6)]
    )
    rated = summarize(samples, ratings={"g": pairs})["g"]
    assert rated.corrected.corrected.value == pytest.approx(4 / 7)
    data = rated.to_json()
    assert data["correctedPassRate"]["raw"]["value"] == 0.6
    assert data["correctedPassRate"]["corrected"]["interval"] is not None
    assert len(data["calibration"]["pairsUsed"]) == 60


def test_when_rating_cannot_reach_the_minimum_the_next_step_is_to_grade_more():
    # Before, a grader version whose every graded item was rated was told "rate 50 more".
    pairs = noisy_pairs(20)
    need = calibrate(pairs).evidence.rate_more
    all_rated = calibrate(pairs, graded=20).verdict
    assert all_rated.grade_more and all_rated.to_json()["gradeMore"] is True
    assert all_rated.next_step == (
        "grade more conversations with this version of the grader, then rate them: "
        f"{need} more rated items are needed and every item it graded is rated"
    )
    few_left = calibrate(pairs, graded=30).verdict
    assert few_left.grade_more and "only 10 of the items it graded" in few_left.next_step
    enough_left = calibrate(pairs, graded=20 + need).verdict
    assert not enough_left.grade_more and enough_left.next_step.startswith(f"rate {need} more")
    # a caller that did not count what was graded gets the rating step
    assert calibrate(pairs).verdict.next_step.startswith(f"rate {need} more")


def test_the_same_pairs_in_another_order_give_the_same_intervals():
    # The simulator and `gambit calibrate` read the same pairs in different orders; with the
    # bootstrap drawing conversations by position, one seed gave them different intervals.
    pairs = noisy_pairs(60, per_conversation=3, noise=1.0)
    shuffled = list(pairs)
    random.Random(7).shuffle(shuffled)
    a, b = calibrate(pairs), calibrate(shuffled)
    assert a.intervals == b.intervals and a.intervals["kappa"] is not None
