"""Calibration figures against values computed by hand (worked in the comments)."""

from __future__ import annotations

import pytest

from gambit.core._calibration import (
    CalibrationPair,
    calibrate,
    category,
    quadratic_weighted_kappa,
    spearman,
)

# human, grader
FIVE = [(3, 3), (2, 1), (-1, -1), (0, 2), (-3, -2)]


def pairs(values, **links):
    return [CalibrationPair(h, g, {"ref": f"m{i}", **links}) for i, (h, g) in enumerate(values)]


def test_it_computes_agreement_and_bias_by_hand():
    result = calibrate(pairs(FIVE))
    assert result.pairs == 5
    assert result.exact == pytest.approx(2 / 5)  # (3,3) and (-1,-1)
    assert result.within_one == pytest.approx(4 / 5)  # only (0,2) is 2 apart
    assert result.bias == pytest.approx((0 - 1 + 0 + 2 + 1) / 5)


def test_it_computes_quadratic_weighted_kappa_by_hand():
    # Indices h+3 = [6,5,2,3,0], g+3 = [6,4,2,5,1]; weights (i-j)^2/36.
    # Observed: 0 + 1 + 0 + 4 + 1 = 6  -> 6/36.
    # Expected: every (row, col) of rows {0,2,3,5,6} x cols {1,2,4,5,6} holds 1*1/5;
    # the squared distances sum to 82+30+19+27+46 = 204 -> 204/36/5.
    # kappa = 1 - (6/36) / (204/180) = 1 - 30/204 = 174/204.
    assert calibrate(pairs(FIVE)).kappa == pytest.approx(174 / 204)


def test_it_gives_base_rates_and_chance_agreement_beside_kappa():
    result = calibrate(pairs(FIVE))
    assert result.human_base_rates == {-3: 0.2, -2: 0.0, -1: 0.2, 0: 0.2, 1: 0.0, 2: 0.2, 3: 0.2}
    assert result.grader_base_rates == {-3: 0.0, -2: 0.2, -1: 0.2, 0: 0.0, 1: 0.2, 2: 0.2, 3: 0.2}
    # Shared categories -1, 2 and 3: 3 * 0.2 * 0.2.
    assert result.chance_exact == pytest.approx(0.12)
    data = result.to_json()
    assert data["baseRates"]["chanceExact"] == 0.12
    assert data["kappa"] == round(174 / 204, 4)


def test_it_computes_spearman_by_hand():
    # Ranks: human [5,4,2,3,1], grader [5,3,2,4,1]; d^2 = 2; rho = 1 - 6*2/(5*24) = 0.9.
    assert calibrate(pairs(FIVE)).spearman == pytest.approx(0.9)


def test_spearman_uses_average_ranks_for_ties():
    # Ranks [1.5, 1.5, 3] and [1, 2, 3]: cov 1.5, variances 1.5 and 2 -> 1.5 / sqrt(3).
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(1.5 / 3**0.5)


def test_it_fills_the_confusion_matrix_human_rows_grader_columns():
    matrix = calibrate(pairs(FIVE)).confusion
    assert sum(map(sum, matrix)) == 5
    assert matrix[3 + 3][3 + 3] == 1
    assert matrix[2 + 3][1 + 3] == 1
    assert matrix[-1 + 3][-1 + 3] == 1
    assert matrix[0 + 3][2 + 3] == 1
    assert matrix[-3 + 3][-2 + 3] == 1


def test_it_lists_disagreements_largest_first_with_their_links():
    result = calibrate(pairs(FIVE, session="session-1"))
    assert [(d["human"], d["grader"], d["difference"]) for d in result.disagreements] == [
        (0, 2, 2),
        (2, 1, -1),
        (-3, -2, 1),
    ]
    assert result.disagreements[0]["ref"] == "m3"
    assert result.disagreements[0]["session"] == "session-1"


def test_coverage_uses_the_callers_counts():
    result = calibrate(pairs(FIVE), graded=10, rated=8)
    assert result.coverage_of_graded == 0.5
    assert result.coverage_of_rated == 5 / 8


def test_perfect_agreement_is_kappa_one_and_a_constant_grader_is_kappa_zero():
    assert quadratic_weighted_kappa([-2, 0, 3], [-2, 0, 3]) == pytest.approx(1.0)
    # A grader that always says 0: observed equals what chance predicts.
    assert quadratic_weighted_kappa([-3, -1, 2, 3], [0, 0, 0, 0]) == pytest.approx(0.0)


def test_undefined_figures_are_none_not_zero():
    empty = calibrate([])
    assert (empty.exact, empty.kappa, empty.spearman, empty.bias) == (None, None, None, None)
    same = calibrate(pairs([(1, 1), (1, 1)]))
    assert same.exact == 1.0
    assert same.kappa is None  # both raters used one category: chance explains everything
    assert same.spearman is None


def test_grader_scores_are_rounded_and_clamped_onto_the_scale():
    assert [category(v) for v in (2.5, -2.5, 0.49, -0.5, 7, -9)] == [3, -3, 0, -1, 3, -3]
    result = calibrate([CalibrationPair(2, 2.4), CalibrationPair(1, 1.6)])
    assert result.exact == 0.5
    assert result.bias == pytest.approx((0.4 + 0.6) / 2)
