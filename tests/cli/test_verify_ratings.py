"""`gambit verify --ratings`: pass rates corrected for the grader's errors (docs/calibration.md)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from junitparser import JUnitXml

from tests.cli.test_verify import conversation, respond, verify, workspace  # noqa: F401
from tests.support.fake_model_server import FakeModelServer


def test_ratings_of_earlier_grades_correct_the_pass_rate(
    fake_server: FakeModelServer,
    workspace: Path,  # noqa: F811
):
    # First batch: four runs graded +2, +2, -2, +1; a person then fills in humanRating.
    fake_server.queue(
        *conversation(), *conversation(), *conversation(), *conversation(),
        respond(2, "a"), respond(2, "b"), respond(-2, "c"), respond(1, "d"),
    )  # fmt: skip
    first = verify(
        fake_server, "--runs", "4", "--concurrency", "1", "--grades-csv", "out/grades.csv",
        cwd=workspace,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    rows = list(csv.DictReader((workspace / "out/grades.csv").open()))
    # The humans pass the first two, fail the last two: the grader passed a reply they failed.
    for row, human in zip(rows, ["2", "3", "-1", "-2"], strict=True):
        row["humanRating"] = human
    with (workspace / "out/rated.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    # Second batch: two runs, both passing.
    fake_server.queue(*conversation(), *conversation(), respond(2, "e"), respond(3, "f"))
    second = verify(
        fake_server, "--runs", "2", "--concurrency", "1", "--ratings", "out/rated.csv",
        "--json", "out/report.json", "--junit", "out/junit.xml",
        cwd=workspace,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    line = next(x for x in second.stdout.splitlines() if "corrected for the grader's errors" in x)
    # Four rated pairs are too few to judge: the line says so before the provisional figure,
    # Se 2/2 = 1, Sp 1/2: (1 + 0.5 - 1) / (1 + 0.5 - 1) = 1, the raw 100% stays 100%.
    assert line.startswith(
        "Helpful: pass rate corrected for the grader's errors: too few ratings to judge: "
        "rate 66 more (provisional: 100%"
    )
    assert "sensitivity 100%" in line and "specificity 50%" in line and "4 rated pairs" in line
    report = json.loads((workspace / "out/report.json").read_text())
    (summary,) = report["summaries"].values()
    assert summary["passRateInterval"]["method"] == "wilson"
    corrected = summary["correctedPassRate"]
    assert corrected["raw"]["value"] == 1.0 and corrected["pairs"] == 4
    assert corrected["specificity"]["value"] == 0.5
    assert summary["calibration"]["pairs"] == 4 and len(summary["calibration"]["pairsUsed"]) == 4
    assert "verbosity" in next(iter(report["biasProbes"].values()))
    # JUnit carries the corrected rate beside the raw one, with its interval when it has one
    (suite,) = list(JUnitXml.fromfile(str(workspace / "out/junit.xml")))
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["passRate"] == "1.0000" and properties["correctedPassRate"] == "1.0000"
    interval = corrected["corrected"]["interval"]
    if interval is not None:
        assert float(properties["correctedPassRateLow"]) == round(interval["low"], 4)
    # provisional in JUnit as in the report: 4 pairs are too few to judge
    assert properties["correctedPassRateProvisional"] == "true"
    assert properties["correctedPassRateRateMore"] == "66"


def test_a_corrected_rate_is_never_surer_than_the_raw_one(
    fake_server: FakeModelServer,
    workspace: Path,  # noqa: F811
):
    # The walker's report: every rating equal to the grader's score (Se = Sp = 100%, every
    # bootstrap resample alike) printed "provisional: 100% [100%-100%] (raw 100% [44%-100%]"
    # and JUnit correctedPassRateLow=1.0000 with no provisional marker.
    scores = [2, 3, -1, -2, 1, -3, 2, 1, -1, 2]
    fake_server.queue(
        *[reply for _ in scores for reply in conversation()],
        *[respond(score, "r") for score in scores],
    )
    first = verify(
        fake_server, "--runs", str(len(scores)), "--concurrency", "1",
        "--grades-csv", "out/grades.csv", cwd=workspace,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    rows = list(csv.DictReader((workspace / "out/grades.csv").open()))
    for row in rows:
        row["humanRating"] = row["score"]
    with (workspace / "out/rated.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fake_server.queue(*conversation() * 3, respond(2, "e"), respond(3, "f"), respond(1, "g"))
    second = verify(
        fake_server, "--runs", "3", "--concurrency", "1", "--ratings", "out/rated.csv",
        "--json", "out/report.json", "--junit", "out/junit.xml", cwd=workspace,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    (summary,) = json.loads((workspace / "out/report.json").read_text())["summaries"].values()
    corrected = summary["correctedPassRate"]
    raw, figure = corrected["raw"], corrected["corrected"]
    assert (raw["value"], figure["value"], corrected["pairs"]) == (1.0, 1.0, 10)
    assert corrected["sensitivity"]["value"] == corrected["specificity"]["value"] == 1.0
    # at least as wide as the raw rate's interval, and still holding the estimate
    assert figure["interval"]["low"] <= raw["interval"]["low"] < 1.0
    assert figure["interval"]["high"] == 1.0
    line = next(x for x in second.stdout.splitlines() if "corrected for the grader's errors" in x)
    assert "100% [100%-100%]" not in line and "(provisional: 100% [" in line
    (suite,) = list(JUnitXml.fromfile(str(workspace / "out/junit.xml")))
    properties = {p.name: p.value for p in suite.properties()}
    assert float(properties["correctedPassRateLow"]) <= float(properties["passRateLow"]) < 1
    assert properties["correctedPassRateProvisional"] == "true"


def test_a_bad_ratings_file_fails_before_any_run(fake_server: FakeModelServer, workspace: Path):  # noqa: F811
    (workspace / "bad.jsonl").write_text('{"item": "x", "score": "high"}\n')
    result = verify(fake_server, "--ratings", "bad.jsonl", cwd=workspace)
    assert result.returncode == 1
    assert "bad.jsonl:1: score is 'high'; write a score from -3 to 3\n" in result.stderr
    assert fake_server.requests == []
