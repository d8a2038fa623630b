"""The calibration page's figures with their intervals, verdicts, drift, agreement between
graders and between raters: the JSON twin against the engine and the krippendorff package on
the pairs it says it used, and the page laying them out."""

from __future__ import annotations

import random

import krippendorff
import pytest

from gambit.core.verify import CalibrationPair, calibrate
from tests.decks_app.grading.graded import OTHER, TONE, Turn, graded_session, ref, tone_hash

pytestmark = pytest.mark.django_db


def _many(workspace, key, n_sessions, per_session, score, *, start=0, scenario=None, **kw):
    """Sessions of rated turns; `score(rng, human)` gives the grader's score(s)."""
    rng = random.Random(start)
    for s in range(start, start + n_sessions):
        turns = []
        for _ in range(per_session):
            human = rng.choice([-3, -2, -1, 0, 1, 2, 3])
            grades = score(rng, human)
            turns.append(
                Turn(
                    grades if isinstance(grades, dict) else {key: grades},
                    {"ann": human},
                    reply="x" * rng.randint(5, 400),
                )
            )
        graded_session(workspace, turns, index=s, scenario=scenario, **kw)


def _current(report):
    return next(g for g in report["graders"] if g["current"])


def test_enough_evidence_gives_intervals_a_verdict_and_recomputable_pairs(client, workspace):
    key = (TONE, tone_hash(workspace))
    _many(workspace, key, 40, 2, lambda rng, h: [h if rng.random() < 0.8 else max(-3, h - 1)])
    report = client.get("/grade/calibration.json").json()
    tone = _current(report)
    assert tone["pairs"] == 80 and tone["conversations"] == 40 and tone["enoughEvidence"]
    kappa = tone["intervals"]["kappa"]
    assert kappa["low"] <= tone["kappa"] <= kappa["high"] and kappa["high"] - kappa["low"] < 0.3
    assert tone["verdict"]["canRank"] is True
    assert tone["verdict"]["summary"].startswith("trusted to rank runs")
    # anyone can recompute every figure from the pairs the twin lists
    pairs = [
        CalibrationPair(p["human"], p["grader"], conversation=p["conversation"])
        for p in tone["pairsUsed"]
    ]
    again = calibrate(pairs, resamples=report["resamples"], seed=report["seed"]).to_json()
    for name in ("kappa", "spearman", "exact", "withinOne", "bias"):
        assert again[name] == tone[name]
        assert again["intervals"][name] == tone["intervals"][name]
    html = client.get("/grade/calibration").content.decode()
    assert "trusted to rank runs" in html and 'data-figure="evidence"' not in html
    assert (
        f'data-figure="kappa">{tone["kappa"]:+.2f} [{kappa["low"]:+.2f}, {kappa["high"]:+.2f}]'
        in html
    )


def test_disagreements_are_grouped_by_scenario_and_region_and_link_to_the_conversation(
    client, workspace
):
    key = (TONE, tone_hash(workspace))
    _many(workspace, key, 5, 3, lambda rng, h: [h], scenario="late_delivery")
    _many(workspace, key, 5, 3, lambda rng, h: [3], start=10, scenario="refunds")
    tone = _current(client.get("/grade/calibration.json").json())
    by_scenario = {g["value"]: g for g in tone["disagreementGroups"]["scenario"]}
    assert by_scenario["late_delivery"]["disagreements"] == 0
    assert by_scenario["refunds"]["disagreements"] > 0
    assert {d["scoreRegion"] for d in tone["disagreements"]} <= {
        "low (-1.5 and below)", "middle (-1.5 to +1.5)", "high (+1.5 and above)"
    }  # fmt: skip
    html = client.get("/grade/calibration").content.decode()
    assert 'data-groups="scenario"' in html and 'data-groups="scoreRegion"' in html
    first = next(d for d in tone["disagreements"] if d["scenario"] == "refunds")
    assert f'href="/test/{first["session"]}#{first["messageRefId"]}"' in html


def test_a_worse_rubric_edit_is_flagged_on_the_chart_and_the_table(client, workspace):
    current = tone_hash(workspace)
    old = "0ld0000000000000"
    times = {old: "2026-11-01T09:00:00+00:00", current: "2026-11-20T09:00:00+00:00"}
    _many(workspace, (TONE, old), 40, 2, lambda rng, h: [h], run_times=times)
    _many(
        workspace, (TONE, current), 40, 2, lambda rng, h: [rng.choice([-3, 3])], start=100,
        run_times=times,
    )  # fmt: skip
    report = client.get("/grade/calibration.json").json()
    old_point, new_point = report["drift"][TONE]
    assert old_point["version"] == old and old_point["worse"] is False
    assert new_point["worse"] is True
    assert new_point["message"].startswith("the rubric edit of 2026-11-20T09:00:00+00:00 made")
    html = client.get("/grade/calibration").content.decode()
    assert "made this grader worse" in html and 'id="drift-chart-data"' in html
    assert "vendor/chart.js/chart.umd.min.js" in html and '<canvas id="drift-chart-1"' in html


def test_graders_against_each_other_and_raters_against_each_other(client, workspace):
    tone = (TONE, tone_hash(workspace))
    other = (OTHER, "other00000000000")
    rng = random.Random(7)
    sessions = []
    for s in range(12):
        turns = []
        for _ in range(2):
            h = rng.choice([-3, -1, 0, 2, 3])
            turns.append(
                Turn({tone: [h], other: [-h]}, {"ann": h, "ben": h if rng.random() < 0.7 else -h})
            )
        sessions.append(graded_session(workspace, turns, index=s))
    report = client.get("/grade/calibration.json").json()
    agreement = report["graderAgreement"]
    (pair,) = agreement["pairs"]
    assert pair["items"] == 24 and pair["kappa"]["value"] < 0  # one is the other mirrored
    assert agreement["matrix"][0][1] == agreement["matrix"][1][0] == pair
    # alpha against the krippendorff package on the same ratings
    raters = report["raters"]
    assert raters["raters"] == ["ann", "ben"] and raters["items"] == 24
    rows = {"ann": [], "ben": []}
    for session in sessions:
        for fb in session.feedback.order_by("message_ref_id", "rater"):
            rows[fb.rater].append(fb.score)
    expected = krippendorff.alpha(
        reliability_data=[rows["ann"], rows["ben"]], level_of_measurement="interval"
    )
    assert raters["alpha"]["value"] == pytest.approx(
        expected, abs=1e-4
    )  # the twin rounds to 4 digits
    assert raters["alpha"]["interval"] is not None
    html = client.get("/grade/calibration").content.decode()
    assert (
        'id="grader-agreement"' in html and "Krippendorff" in html and "the ceiling" in html.lower()
    )


def test_self_consistency_and_bias_probes_stand_beside_agreement(client, workspace):
    key = (TONE, tone_hash(workspace))
    # two repeats per item; the second differs by one on every other item
    _many(workspace, key, 10, 2, lambda rng, h: [h, h if rng.random() < 0.5 else min(3, h + 1)])
    tone = _current(client.get("/grade/calibration.json").json())
    consistency = tone["selfConsistency"]
    assert consistency["pairs"] == 20 and consistency["withinOne"] == 1.0
    assert 0 < consistency["exact"] < 1
    # a pair's grader score is the mean of its repeats, as `gambit calibrate` pairs them
    assert any(p["grader"] % 1 == 0.5 for p in tone["pairsUsed"])
    verbosity = tone["biasProbes"]["verbosity"]
    assert verbosity["kind"] == "verbosity" and verbosity["samples"] == 20
    assert tone["biasProbes"]["position"]["message"] == "not measurable: no comparisons"
    html = client.get("/grade/calibration").content.decode()
    assert 'data-figure="selfConsistency"' in html and 'data-probe="verbosity"' in html
    assert "pairs of repeats" in html


def test_the_same_inputs_give_the_cached_report_and_a_rating_changes_it(client, workspace):
    key = (TONE, tone_hash(workspace))
    session = graded_session(workspace, [Turn({key: [1]}, {"ann": 1}), Turn({key: [2]})], index=1)
    first = client.get("/grade/calibration.json").json()
    assert client.get("/grade/calibration.json").json() == first
    client.cookies["gambit_rater"] = "ben"
    client.post(f"/grade/rate/{session.id}/{ref(1, 1)}/rating", {"score": "-2"})
    second = client.get("/grade/calibration.json").json()
    assert second["inputsHash"] != first["inputsHash"]
    assert _current(second)["pairs"] == _current(first)["pairs"] + 1
