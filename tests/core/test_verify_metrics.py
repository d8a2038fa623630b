"""Verify metrics against values computed by hand (worked in the comments)."""

from __future__ import annotations

import pytest

from gambit.core._statistics import wilson
from gambit.core._verify import GradeSample, self_consistency, summarize
from gambit.core._verify_compare import compare
from gambit.core._verify_table import histogram, matrix


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
    # At >= 2 each run counts once with its repeats' share of passes (docs/calibration.md):
    # c1 scores 2, 2, 1 (2/3), c2 -1, -1 (0), c4 3 and a grader error (1 of 1): (2/3 + 0 + 1)
    # / 3 = 5/9, not 3 passing grades of 6 (c1's three repeats would weigh three times c4's).
    summary = summarize(BATCH, threshold=2)["tone"]
    assert summary.pass_rate == pytest.approx(5 / 9)
    assert (summary.passed, summary.scored, summary.pass_rate_runs) == (3, 6, 3)


# ---- the pass rate's interval counts runs, not grades (docs/calibration.md) -----------------


def test_regrading_the_same_runs_does_not_narrow_the_pass_rate_interval():
    # The walker's report: 5 runs all passing gave [57%-100%] with one repeat and
    # [96%-100%] with twenty repeats of the same five conversations.
    once = [sample(f"r{i}", 1) for i in range(5)]
    twenty = [s for s in once for _ in range(20)]
    one, many = summarize(once)["tone"], summarize(twenty)["tone"]
    assert one.pass_rate_interval == wilson(5, 5)  # one repeat: as before, over 5 grades
    assert many.pass_rate_interval == wilson(5, 5)  # twenty repeats: still 5 runs
    assert many.pass_rate_runs == 5 and many.scored == 100
    assert many.to_json()["passRateRuns"] == 5
    assert many.tally.to_json()["runs"] == 5
    # the matrix's scenario tally and the compare page count the same way
    (scenario,) = matrix(twenty, 0.0).scenarios.values()
    assert scenario["tone"].interval == wilson(5, 5)
    assert compare(twenty, twenty)["tone"].pass_rate.before_interval == wilson(5, 5)


def test_with_one_repeat_the_pass_rate_interval_is_the_grades_wilson_interval():
    batch = [sample(f"r{i}", 1 if i % 3 else -1) for i in range(10)]  # 6 of 10 pass
    summary = summarize(batch)["tone"]
    assert summary.pass_rate == pytest.approx(0.6)
    assert summary.pass_rate_interval == wilson(6, 10)


def test_the_summary_and_compare_share_the_per_run_definition():
    # Runs with unequal graded repeats (a grader error): each run's share of passes, the
    # mean of those shares, and the Wilson interval of their sum over the runs, everywhere.
    batch = [
        sample("a", 1),
        sample("a", -1),
        sample("a", 2),
        sample("b", -2),
        sample("b", grader_error="no score"),
        sample("c", 3),
    ]
    shares = [2 / 3, 0.0, 1.0]
    summary = summarize(batch)["tone"]
    assert summary.pass_rate == pytest.approx(sum(shares) / 3)
    assert summary.pass_rate_interval == wilson(sum(shares), 3)
    rate = compare(batch, batch)["tone"].pass_rate
    assert rate.before == pytest.approx(summary.pass_rate)
    assert rate.before_interval == summary.pass_rate_interval
    assert rate.before_runs == summary.pass_rate_runs == 3


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
    # A failure is any sample that did not pass: c2's two low scores count like c3's two
    # failed runs (most failures first, then the lowest mean), then c4's grader error.
    assert [o.conversation for o in outliers] == ["c2", "c3", "c4", "c1"]
    assert outliers[0].failures == 2 and outliers[0].mean == -1
    assert outliers[0].reasons == ["rude"]
    assert outliers[1].tally.not_run == 2 and outliers[1].reasons == ["boom"]
    assert outliers[1].links == [{"session": "session-c3"}] * 2
    assert len(summarize(BATCH, outliers=2)["tone"].outliers) == 2


def test_runs_that_all_passed_alike_are_no_outliers():
    same = [sample(c, 1) for c in ("c1", "c2", "c3")]
    assert summarize(same)["tone"].outliers == []
    # a lower passing mean stands out; the best one does not
    mixed = [sample("c1", 2), sample("c2", 1), sample("c3", 2)]
    assert [o.conversation for o in summarize(mixed)["tone"].outliers] == ["c2"]


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
    # Pass fractions per conversation: before [1, 1, 0], after [1, 1, 1]: 2 of 3 and 3 of
    # 3, by the pooled two-proportion test: p = 5/6, SE = sqrt(5/6 * 1/6 * 2/3) = 0.3043.
    assert result.pass_rate.delta == pytest.approx(1 / 3)
    assert result.pass_rate.standard_error == pytest.approx((5 / 6 * 1 / 6 * 2 / 3) ** 0.5)
    assert result.pass_rate.exceeds_noise is False
    assert result.pass_rate.direction == "no clear change"
    assert result.pass_rate.to_json()["beforeInterval"]["method"] == "wilson"


def test_compare_cannot_estimate_noise_from_one_conversation():
    result = compare([sample("a", 1)], [sample("b", 2)])["tone"]
    assert result.mean.delta == 1 and result.mean.exceeds_noise is None
    only_after = compare([], [sample("b", 2)])["tone"]
    assert only_after.mean.before is None and only_after.mean.delta is None


def test_json_shapes_round_figures():
    data = summarize(BATCH)["tone"].to_json()
    assert data["passRate"] == round(4 / 6, 4)
    assert data["consistency"] == {"pairs": 4, "conversations": 2, "exact": 0.5, "withinOne": 1.0}
    assert data["failures"]["grading"][0] == {"reason": "rude", "count": 2}
    assert data["outliers"][0]["conversation"] == "c2"


def test_one_definition_of_pass_and_fail_everywhere():
    # issue 26: a 0% pass rate with 15 grades below the threshold, while each outlier said
    # "0 failed of 3". Five runs x three grades, every grade -1/3 (a mean of +1, -1, -1).
    batch = [sample(f"r{i}", -1 / 3) for i in range(5) for _ in range(3)]
    summary = summarize(batch)["tone"]
    assert summary.pass_rate == 0.0 and summary.failure_counts == {"below_threshold": 15}
    assert summary.tally.to_json()["failed"] == 15 and summary.tally.verdict == "fail"
    assert all(o.failures == 3 and o.tally.failed == 3 for o in summary.outliers)
    # the histogram puts -1/3 with the failures, not in a "0" bin with passing scores
    bins = {b.label: b for b in summary.histogram}
    assert bins["−1 ≤ s < 0"].count == 15 and not bins["−1 ≤ s < 0"].passes
    assert bins["0 ≤ s < +1"].count == 0 and bins["0 ≤ s < +1"].passes
    # self-consistency: 15 pairs of repeats over 5 runs (not "15 runs")
    assert (summary.consistency.pairs, summary.consistency.conversations) == (15, 5)
    table = matrix(batch, 0.0)
    (scenario,) = table.scenarios.values()
    assert scenario["tone"].failed == 15 and len(table.rows) == 5
    assert {row.verdict for row in table.rows} == {"fail"}


def test_every_sample_has_one_verdict_and_the_counts_agree():
    summary = summarize(BATCH)["tone"]
    verdicts = [s.verdict(0.0) for s in BATCH]
    assert verdicts.count("pass") == summary.passed == summary.tally.passed == 4
    assert verdicts.count("fail") == summary.failure_counts["below_threshold"] == 2
    assert verdicts.count("error") == summary.tally.errors == 1
    assert verdicts.count("not_run") == summary.tally.not_run == 2
    assert summary.tally.graded == summary.scored == 6
    interval = summary.pass_rate_interval
    assert interval is not None and summary.tally.interval == interval
    assert interval.contains(4 / 6)


@pytest.mark.parametrize("threshold", [0.0, 0.5, -1.0, 2.0])
def test_no_histogram_bin_mixes_passing_and_failing_scores(threshold):
    scores = [-3, -2.5, -1, -1 / 3, 0, 1 / 3, 0.5, 1, 2, 3]
    bins = histogram(scores, threshold)
    assert sum(b.count for b in bins) == len(scores)
    for b in bins:
        members = [s for s in scores if b.low <= s < b.high or (b is bins[-1] and s == b.high)]
        assert all((s >= threshold) == b.passes for s in members), (b, members)
    assert any(b.low == threshold for b in bins)  # the threshold is an edge


def test_matrix_cells_carry_verdicts_scores_and_reasons():
    table = matrix([*BATCH, sample("c1", -3, grader="facts", reason="invented")], 0.0)
    assert table.graders == ["tone", "facts"]
    assert list(table.scenarios) == ["s1", "s2"]
    assert table.scenarios["s1"]["tone"].to_json()["passed"] == 3
    rows = {row.conversation: row for row in table.rows}
    assert rows["c1"].cells["facts"].tally.verdict == "fail"
    assert rows["c1"].cells["facts"].reasons == ["invented"]
    assert rows["c1"].verdict == "fail"  # one grader failed it
    assert rows["c3"].cells["tone"].tally.verdict == "not_run"
    assert rows["c4"].cells["tone"].tally.verdict == "error"
    data = table.to_json()
    assert data["scenarios"][0]["rows"][0]["cells"]["tone"]["scores"] == [2, 2, 1]


def test_the_pass_rate_change_is_the_two_proportion_test_of_scipy():
    from scipy.stats import chi2_contingency

    # one grade per run: 4 of 20 passed before, 15 of 20 after
    before = [sample(f"b{i}", 1 if i < 4 else -1) for i in range(20)]
    after = [sample(f"a{i}", 1 if i < 15 else -1) for i in range(20)]
    result = compare(before, after)["tone"].pass_rate
    # the pooled z-test squared is the chi-square test without continuity correction
    _, p_value, _, _ = chi2_contingency([[4, 16], [15, 5]], correction=False)
    assert result.p_value == pytest.approx(p_value, rel=1e-9)
    assert result.exceeds_noise is True and result.direction == "better"
    worse = compare(after, before)["tone"].pass_rate
    assert worse.direction == "worse" and worse.p_value == pytest.approx(p_value, rel=1e-9)
    # repeats of one run count once: the same verdicts three times say no more
    tripled = compare([s for s in before for _ in range(3)], [s for s in after for _ in range(3)])
    assert tripled["tone"].pass_rate.p_value == pytest.approx(p_value, rel=1e-9)
    same = compare([sample("x", 1)] * 2, [sample("y", 2)] * 2)["tone"].pass_rate
    assert same.exceeds_noise is False and same.direction == "no clear change"


def test_a_grading_is_explained_by_its_lowest_scored_result():
    # issue 26: "Grading failures" listed a positive grade's reason (the first one) for a
    # conversation whose turns scored +1, -1, -1 (a mean of -1/3, below the threshold)
    from gambit.core._grading import Grade, GradingRun
    from gambit.core._verify_run import grade_reason

    turns = [Grade(1, "warm and precise"), Grade(-1, "ignores the order id"), Grade(-1, "curt")]
    grading = GradingRun("g", "tone/PROMPT.md", "Tone", "turns", turns, "completed", "now")
    assert grading.score == pytest.approx(-1 / 3)
    assert grade_reason(grading) == "ignores the order id"
    failed = GradingRun("g", "tone/PROMPT.md", None, "turns", [], "error", "now", error="boom")
    assert grade_reason(failed) == "boom" and grade_reason(None) is None
