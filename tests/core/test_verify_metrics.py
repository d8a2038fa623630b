"""Verify metrics against values computed by hand (worked in the comments)."""

from __future__ import annotations

import pytest

from gambit.core._verify import GradeSample, compare, self_consistency, summarize


def sample(conversation, score=None, *, scenario="s1", grader="tone", **kw):
    return GradeSample(
        grader=grader,
        conversation=conversation,
        scenario=scenario,
        score=score,
        links={"session": f"session-{conversation}"},
        **kw,
    )


BATCH = [
    sample("c1", 2),
    sample("c1", 2),
    sample("c1", 1),
    sample("c2", -1, reason="rude"),
    sample("c2", -1, reason="rude"),
    sample("c3", scenario="s2", execution_error="boom"),
    sample("c3", scenario="s2", execution_error="boom"),
    sample("c4", 3, scenario="s2"),
    sample("c4", scenario="s2", grader_error="grader crashed"),
]


def test_it_computes_pass_rate_and_spread_by_hand():
    summary = summarize(BATCH)["tone"]
    # Scored: 2, 2, 1, -1, -1, 3; passing (>= 0): 4 of 6.
    assert (summary.samples, summary.scored, summary.passed) == (9, 6, 4)
    assert summary.pass_rate == pytest.approx(4 / 6)
    assert summary.scores.mean == pytest.approx(1.0)
    assert summary.scores.median == pytest.approx(1.5)
    assert (summary.scores.minimum, summary.scores.maximum) == (-1, 3)
    # Deviations from 1: 1, 1, 0, -2, -2, 2 -> 14 / 5.
    assert summary.scores.stdev == pytest.approx((14 / 5) ** 0.5)


def test_a_threshold_moves_the_pass_rate():
    assert summarize(BATCH, threshold=2)["tone"].pass_rate == pytest.approx(3 / 6)


def test_it_computes_per_scenario_spread():
    per = summarize(BATCH)["tone"].per_scenario
    assert per["s1"].mean == pytest.approx(0.6)  # 2, 2, 1, -1, -1
    assert per["s2"].count == 1 and per["s2"].mean == 3 and per["s2"].stdev is None


def test_it_measures_self_consistency_over_pairs_of_repeats():
    consistency = summarize(BATCH)["tone"].consistency
    # c1: (2,2) exact, (2,1) and (2,1) within one; c2: (-1,-1) exact; c4 has one score.
    assert consistency.pairs == 4
    assert consistency.exact == pytest.approx(2 / 4)
    assert consistency.within_one == pytest.approx(4 / 4)
    assert self_consistency([[0, 3]]).within_one == 0.0
    assert self_consistency([[1], []]).pairs == 0


def test_it_groups_failure_reasons_by_kind():
    summary = summarize(BATCH)["tone"]
    assert summary.failure_counts == {"execution": 2, "grader_error": 1, "below_threshold": 2}
    assert summary.failures == {
        "execution": [("boom", 2)],
        "grading": [("rude", 2), ("grader crashed", 1)],
    }


def test_outliers_put_failures_first_then_the_lowest_mean():
    outliers = summarize(BATCH)["tone"].outliers
    assert [o.conversation for o in outliers] == ["c3", "c4", "c2", "c1"]
    assert outliers[0].failures == 2
    assert outliers[2].mean == -1
    assert outliers[0].links == [{"session": "session-c3"}] * 2
    assert len(summarize(BATCH, outliers=2)["tone"].outliers) == 2


def test_graders_are_summarised_separately():
    summaries = summarize([*BATCH, sample("c1", -3, grader="facts")])
    assert list(summaries) == ["tone", "facts"]
    assert summaries["facts"].pass_rate == 0.0


def test_compare_says_whether_a_difference_exceeds_the_repeat_noise():
    before = [sample(c, s) for c, s in [("a", 1), ("a", 1), ("b", 0), ("b", 0), ("c", -1)]]
    before += [sample("c", -1)]
    after = [sample(c, s) for c, s in [("d", 2), ("d", 2), ("e", 3), ("e", 1), ("f", 1)]]
    after += [sample("f", 1)]
    result = compare(before, after)["tone"]
    # Conversation means: before [1, 0, -1] (var 1), after [2, 2, 1] (var 1/3).
    # delta 5/3; SE = sqrt(1/3 + 1/9) = 2/3; 5/3 > 1.96 * 2/3.
    assert result.mean.delta == pytest.approx(5 / 3)
    assert result.mean.standard_error == pytest.approx(2 / 3)
    assert result.mean.exceeds_noise is True
    # Pass fractions per conversation: before [1, 1, 0], after [1, 1, 1];
    # delta 1/3; SE = sqrt((1/3)/3 + 0) = 1/3; 1/3 < 1.96 * 1/3.
    assert result.pass_rate.delta == pytest.approx(1 / 3)
    assert result.pass_rate.standard_error == pytest.approx(1 / 3)
    assert result.pass_rate.exceeds_noise is False


def test_compare_cannot_estimate_noise_from_one_conversation():
    result = compare([sample("a", 1)], [sample("b", 2)])["tone"]
    assert result.mean.delta == 1 and result.mean.exceeds_noise is None
    only_after = compare([], [sample("b", 2)])["tone"]
    assert only_after.mean.before is None and only_after.mean.delta is None


def test_json_shapes_round_figures():
    data = summarize(BATCH)["tone"].to_json()
    assert data["passRate"] == round(4 / 6, 4)
    assert data["consistency"] == {"pairs": 4, "exact": 0.5, "withinOne": 1.0}
    assert data["failures"]["grading"][0] == {"reason": "rude", "count": 2}
    assert data["outliers"][0]["conversation"] == "c3"
