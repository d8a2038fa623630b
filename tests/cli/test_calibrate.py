"""`gambit calibrate` on the export formats `gambit verify` and the simulator write, and on
plain rating rows (docs/calibration.md)."""

from __future__ import annotations

import csv
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score

from decks_app.grading.grades import EXPORT_FIELDS
from gambit.cli._verify import CSV_FIELDS
from gambit.cli.main import cli

GAMBIT = str(Path(sys.executable).parent / "gambit")


def simulator_rows(
    sessions: int,
    *,
    noise: float = 0.4,
    seed: int = 0,
    version: str = "h1",
    rated: int | None = None,
) -> list[dict]:
    """Rows as the simulator's grades export writes them: one per graded turn."""
    rng = random.Random(seed)
    rows = []
    for s in range(sessions):
        for turn in (1, 3):
            human = rng.choice([-3, -2, -1, 0, 1, 2, 3])
            score = max(-3, min(3, round(human + rng.gauss(0, noise))))
            rows.append(
                {
                    "session": f"sess-{s}",
                    "scenario": "refunds" if s % 2 else "greeting",
                    "grader": "Tone",
                    "graderHash": version,
                    "gradeRun": f"run-{version}-{s}",
                    "turn": turn,
                    "messageRefId": f"ref-{s}-{turn}",
                    "score": score,
                    "reason": "ok",
                    "flag": False,
                    "flagReason": None,
                    "humanRating": human if rated is None or s < rated else None,
                }
            )
    return rows


def write_csv(path: Path, fields, rows) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def calibrate(*args: str):
    return CliRunner().invoke(cli, ["calibrate", *args])


def test_the_simulator_export_gives_figures_with_intervals_and_a_verdict(tmp_path):
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, simulator_rows(60))
    result = calibrate(str(grades))
    assert result.exit_code == 0, result.output
    assert "Tone (version h1): 120 pairs in 60 conversations" in result.output
    assert "verdict: trusted to rank runs" in result.output
    kappa_line = next(line for line in result.output.splitlines() if "  kappa " in line)
    assert "kappa +0." in kappa_line and "[" in kappa_line  # a figure and its interval
    assert "disagreements by scenario:" in result.output


def test_the_json_keeps_the_pairs_so_anyone_can_recompute_kappa(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", simulator_rows(40))
    result = calibrate(str(grades), "--json", "-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    (entry,) = report["graders"]
    figures = entry["calibration"]
    pairs = figures["pairsUsed"]
    assert len(pairs) == figures["pairs"] == 80
    recomputed = cohen_kappa_score(
        [p["human"] for p in pairs],
        [p["grader"] for p in pairs],
        weights="quadratic",
        labels=list(range(-3, 4)),
    )
    assert figures["kappa"] == pytest.approx(recomputed, abs=1e-4)
    assert figures["intervals"]["kappa"]["method"] == "bootstrap-bca"
    assert pairs[0]["conversation"] == "sess-0" and pairs[0]["labels"] == {"scenario": "greeting"}
    assert report["seed"] == 0 and report["resamples"] == 2000


def test_min_kappa_passes_and_fails_on_the_lower_bound(tmp_path):
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, simulator_rows(60))
    passing = calibrate(str(grades), "--min-kappa", "0.5")
    assert passing.exit_code == 0, passing.output
    report = json.loads(calibrate(str(grades), "--json", "-").output)
    kappa = report["graders"][0]["calibration"]["kappa"]
    # a bar between the lower bound and the figure fails: the figure alone would pass it
    low = report["graders"][0]["calibration"]["intervals"]["kappa"]["low"]
    bar = round((low + kappa) / 2, 3)
    failing = calibrate(str(grades), "--min-kappa", str(bar))
    assert failing.exit_code == 1
    (line,) = [line for line in failing.output.splitlines() if line.startswith("error:")]
    assert f"Tone: kappa's lower bound {low:.2f} is below --min-kappa {bar:g}" in line


def test_too_few_ratings_say_rate_n_more_and_fail_a_min_kappa(tmp_path):
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, simulator_rows(60, rated=10))
    result = calibrate(str(grades), "--min-kappa", "0.2")
    # the figures would clear the bar, but 20 pairs are too few to judge: the gate fails
    assert result.exit_code == 1
    assert "too few ratings to judge: rate" in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "before --min-kappa 0.2 can be judged" in line
    report = json.loads(calibrate(str(grades), "--json", "-").output)
    figures = report["graders"][0]["calibration"]
    assert figures["enoughEvidence"] is False and figures["rateMore"] >= 70 - 20
    assert figures["kappa"] is not None  # the JSON keeps the figures


def test_plain_ratings_match_by_ref_by_session_turn_and_by_run(tmp_path):
    rows = [{**row, "humanRating": None} for row in simulator_rows(40, seed=3)]
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, rows)
    truth = {(r["session"], r["turn"]): r for r in simulator_rows(40, seed=3)}
    plain = []
    for (session, turn), row in truth.items():
        item = row["messageRefId"] if turn == 1 else f"{session}#{turn}"
        plain.append({"item": item, "rater": "ann", "score": row["humanRating"]})
    plain.append({"item": "nowhere", "rater": "ann", "score": 1})
    ratings_csv = write_csv(tmp_path / "ratings.csv", ["item", "rater", "score"], plain)
    report = json.loads(calibrate(str(grades), "--ratings", str(ratings_csv), "--json", "-").output)
    assert report["ratings"] == {"total": 81, "unmatched": 1}
    assert report["graders"][0]["calibration"]["pairs"] == 80

    # a conversation grade of a `gambit verify` export, rated by its run id in JSON lines
    verify_rows = [
        dict.fromkeys(CSV_FIELDS)
        | {"run": f"vrun-{i}", "scenario": "s", "grader": "Helpful", "score": i % 7 - 3}
        for i in range(30)
    ]
    exported = write_csv(tmp_path / "verify.csv", CSV_FIELDS, verify_rows)
    ratings = write_jsonl(
        tmp_path / "ratings.jsonl",
        [{"item": f"vrun-{i}", "score": i % 7 - 3, "rater": "bo"} for i in range(30)],
    )
    report = json.loads(calibrate(str(exported), "--ratings", str(ratings), "--json", "-").output)
    figures = report["graders"][0]["calibration"]
    assert figures["pairs"] == 30 and figures["kappa"] == 1.0


def test_versions_drift_graders_and_raters(tmp_path):
    rows = simulator_rows(60, version="old") + simulator_rows(60, version="new", noise=2.5)
    for row in rows:
        row["grader"] = "Tone"
    second = [{**row, "grader": "Other", "graderHash": "x"} for row in simulator_rows(60)]
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, rows + second)
    other_rater = write_jsonl(
        tmp_path / "bo.jsonl",
        [
            {"item": r["messageRefId"], "rater": "bo", "score": r["humanRating"]}
            for r in simulator_rows(60)
        ],
    )
    result = calibrate(str(grades), "--ratings", str(other_rater))
    assert result.exit_code == 0, result.output
    assert "Tone (version new)" in result.output
    assert "the rubric edit of new made this grader worse" in result.output
    assert "Tone vs Other: kappa" in result.output
    assert "human raters: Krippendorff's alpha (interval) +1.00" in result.output


def test_a_versions_kappa_has_one_interval_in_the_summary_and_the_drift(tmp_path):
    # The walker's data: two versions of a grader over the same 90 rated turns, rows in the
    # order they were written (sess0, sess1, ..., sess10, ...). The summary said kappa
    # [+0.68, +0.85] and the drift line for the same version [+0.67, +0.85].
    rng = random.Random(3)
    human = {(c, t): rng.choice(range(-3, 4)) for c in range(30) for t in (2, 4, 6)}
    rows = []
    for version, noise, when in (
        ("aaaa1111", 0.3, "2026-01-01T00:00:00Z"),
        ("bbbb2222", 1.5, "2026-02-01T00:00:00Z"),
    ):
        for (c, t), x in human.items():
            score = max(-3, min(3, round(x + rng.gauss(0, noise))))
            rows.append(
                {"session": f"sess{c}", "scenario": f"sc{c % 3}", "grader": "Tone",
                 "graderHash": version, "repeat": 1, "turn": t, "score": score,
                 "humanRating": "", "gradedAt": when}
            )  # fmt: skip
    grades = write_csv(tmp_path / "g.csv", rows[0], rows)
    ratings = write_jsonl(
        tmp_path / "r.jsonl",
        [{"item": f"sess{c}#{t}", "rater": "ana", "score": x} for (c, t), x in human.items()],
    )
    result = calibrate(str(grades), "--ratings", str(ratings), "--json", "-")
    (entry,) = json.loads(result.output)["graders"]
    newest = next(p for p in entry["drift"] if p["version"] == entry["version"])
    assert newest["kappa"]["interval"] == entry["calibration"]["intervals"]["kappa"]
    printed = calibrate(str(grades), "--ratings", str(ratings)).output
    summary = next(x for x in printed.splitlines() if x.startswith("  kappa "))
    drift = next(x for x in printed.splitlines() if x.startswith("  version bbbb2222"))
    shown = re.search(r"kappa (\S+ \[[^\]]+\])", summary)
    assert shown is not None and f"kappa {shown.group(1)}," in drift


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        # A rating's score is required: its fix does not offer leaving it empty, which is
        # refused ("has no score") in turn.
        (
            '{"item": "a", "score": "lots"}\n',
            "r.jsonl",
            "r.jsonl:1: score is 'lots'; write a score from -3 to 3\n",
        ),
        (
            '{"item": "a"}\n',
            "r.jsonl",
            "r.jsonl:1: the rating of 'a' has no score; add one from -3 to 3",
        ),
        (
            '{"item": "a", "score": null}\n',
            "r.jsonl",
            "r.jsonl:1: the rating of 'a' has no score; add one from -3 to 3",
        ),
        # A grade row's score may be empty (not graded): there the fix may say so.
        (
            "session,grader,score\ns1,Tone,good\n",
            "g.csv",
            "g.csv:2: score is 'good'; write a score from -3 to 3 (or leave it empty)",
        ),
        ('{"score": 1}\n', "r.jsonl", "neither a grade row (with grader and score) nor a rating"),
        # a saved session passed by mistake: say what it is and what to pass instead
        (
            '{"runId": "r", "messages": []}',
            "s.json",
            "s.json:1: a saved session, not a grades export; export its grades",
        ),
        ("not json\n", "r.jsonl", "r.jsonl:1: not JSON"),
        ("item,score\nm1,x\n", "r.csv", "r.csv:2: score is 'x'; write a score from -3 to 3\n"),
        (
            "grader,score\nTone,1\n",
            "g.csv",
            "g.csv:2: the grade row has neither session nor run",
        ),
        # Out of the scale: before, 9 was taken and moved kappa without a word.
        (
            '{"item": "a", "score": 9}\n',
            "r.jsonl",
            "r.jsonl:1: score is 9; write a score from -3 to 3",
        ),
        (
            "session,grader,score,humanRating\ns1,Tone,1,-4\n",
            "g.csv",
            "g.csv:2: humanRating is '-4'; write a score from -3 to 3",
        ),
    ],
)
def test_a_bad_row_is_one_line_naming_file_line_and_key(tmp_path, content, name, expected):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    result = calibrate(str(path))
    assert result.exit_code == 1
    assert expected in result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.parametrize("threshold", ["9", "-3.5"])
def test_a_threshold_off_the_scale_is_refused(tmp_path, threshold):
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, simulator_rows(5))
    result = calibrate(str(grades), "--threshold", threshold)
    assert result.exit_code == 2
    assert f"Invalid value for '--threshold': {float(threshold)} is not in the range -3<=x<=3" in (
        result.output
    )
    assert calibrate(str(grades), "--threshold", "3", "--resamples", "100").exit_code == 0


def test_ratings_of_items_no_grade_row_names_are_counted_in_words(tmp_path):
    ratings = write_jsonl(tmp_path / "r.jsonl", [{"item": f"x#{i}", "score": 1} for i in range(3)])
    result = calibrate(str(ratings))
    assert result.output.startswith("3 ratings (3 of them rate items that no grade row names),")


def test_a_missing_file_is_named(tmp_path):
    result = calibrate(str(tmp_path / "nope.csv"))
    assert result.exit_code == 1 and "nope.csv: no such file" in result.output


def test_the_console_script_prints_plain_lines_in_ci(tmp_path):
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, simulator_rows(40))
    done = subprocess.run(
        [GAMBIT, "calibrate", str(grades), "--resamples", "500"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout  # no colour codes when stdout is not a terminal
    assert "verdict:" in done.stdout
    # one figure line is one line, however long (a CI log is not wrapped at 80 columns)
    assert any(
        line.startswith("  verdict: ") and len(line) > 100 for line in done.stdout.splitlines()
    )


def test_an_items_rating_repeated_on_each_grade_row_counts_once(tmp_path):
    # An export repeats an item's human rating on every grade row of it (each grader, each
    # repeat); before, the summary counted each row as a rating: "78 ratings" for 25.
    rows = simulator_rows(40)
    repeated = [*rows, *({**r, "gradeRun": r["gradeRun"] + "-b"} for r in rows)]
    grades = write_csv(tmp_path / "grades.csv", EXPORT_FIELDS, repeated)
    result = calibrate(str(grades), "--resamples", "200", "--json", str(tmp_path / "c.json"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "c.json").read_text())["ratings"]["total"] == 80
    assert result.output.startswith("80 ratings, pass: score >= +0,")
