"""The bundled examples run end to end offline (no API key): `offline/echo` stands in for models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GAMBIT = str(Path(sys.executable).parent / "gambit")
SUPPORT = ROOT / "examples" / "support"


def gambit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [GAMBIT, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_hello_needs_no_model(tmp_path: Path):
    result = gambit("run", str(ROOT / "examples/hello/deck.py"), "--context", '"Ada"', cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "Hello, Ada!\n")


def test_support_scenario_and_grade_offline(tmp_path: Path):
    """--model-force reaches the deck under test only: the grader keeps its own model (here,
    with no key, the offline demo model), so its grades are not the echo model's greeting."""
    state = tmp_path / "session.json"
    result = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(SUPPORT / "scenarios/late_delivery/PROMPT.md"),
        "--grade", str(SUPPORT / "graders/tone/PROMPT.md"), "--max-turns", "2", "--model-force", "offline/echo",
        "--state", str(state), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Scenario stopped (max turns) after 2 persona turns" in result.stdout
    assert "assistant> You said: Hi! It's about order A1002." in result.stdout  # the deck: echo
    saved = json.loads(state.read_text())
    (grading,) = saved["meta"]["gradingRuns"]
    assert grading["status"] == "completed" and grading["mode"] == "turns"
    reasons = [g["reason"] for g in grading["results"]]
    assert len(reasons) == 2 and all(r.startswith("Demo grade: ") for r in reasons), reasons
    assert "cannot grade" not in result.stderr


def test_support_action_with_respond_runs_offline(tmp_path: Path):
    trace = tmp_path / "trace.jsonl"
    state = tmp_path / "s.json"
    result = gambit(
        "run", str(SUPPORT / "actions/draft_reply/PROMPT.md"), "--context", '{"situation": "late parcel"}',
        "--model-force", "offline/echo", "--trace", str(trace), "--state", str(state), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["payload"]["offersRefund"] is False and output["payload"]["draft"]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [e for e in events if e["type"] in ("model.call", "model.result")]
    assert calls and all(e["offline"] is True and e["provider"] == "offline" for e in calls)


def test_support_verify_offline_as_in_the_readme(tmp_path: Path):
    result = gambit(
        "verify", str(SUPPORT / "PROMPT.md"), "--runs", "5", "--repeats", "3", "--concurrency", "4",
        "--max-turns", "2", "--junit", "verify.xml", "--grades-csv", "grades.csv",
        "--model-force", "offline/echo", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "5 scenario runs (0 failed), 15 grades" in result.stdout
    assert (tmp_path / "verify.xml").read_text().count("<testcase ") == 5
    assert len((tmp_path / "grades.csv").read_text().splitlines()) == 1 + 15 * 2  # 2 turns each


def test_readme_scenario_and_grade_work_without_a_key(tmp_path: Path):
    """No provider key: the offline demo model plays the persona (which ends the scenario),
    calls the deck's action, and grades; every answer is labelled offline on stderr."""
    state = tmp_path / "session.json"
    result = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(SUPPORT / "scenarios/late_delivery/PROMPT.md"),
        "--grade", str(SUPPORT / "graders/tone/PROMPT.md"), "--max-turns", "4", "--state", str(state),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "offline demo model (offline/demo) answers instead" in result.stderr
    assert "Scenario stopped (persona done) after 3 persona turns" in result.stdout
    saved = json.loads(state.read_text())
    (grading,) = saved["meta"]["gradingRuns"]
    scores = [g["score"] for g in grading["results"]]
    assert len(scores) == 3 and all(-3 <= s <= 3 for s in scores)
    assert any(
        m.get("role") == "tool" or m.get("tool_calls") for m in saved["messages"]
    )  # the demo model called the deck's order_status action
    # The persona says what its instructions give it; the lookups use the order it named,
    # also on the turn that does not repeat it; answers read like sentences.
    first = result.stdout.split("user> ", 1)[1].splitlines()[0]
    assert first.startswith("Hi! It's about order A1002. I'd like to know where it is")
    assert "whether I can get the shipping fee back" in first
    lookups = [
        json.loads(call["function"]["arguments"])
        for m in saved["messages"]
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == "order_status"
    ]
    assert lookups and all(args == {"order_id": "A1002"} for args in lookups)
    assert "status: delayed, eta: 5 days" in result.stdout and "None" not in result.stdout
    grade = gambit(
        "grade", str(SUPPORT / "graders/tone/PROMPT.md"), "--state", str(state), cwd=tmp_path
    )
    assert grade.returncode == 0, grade.stderr


def test_scenario_runs_as_a_batch_with_a_summary_and_json_lines(tmp_path: Path):
    result = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(SUPPORT / "scenarios/late_delivery/PROMPT.md"),
        "--grade", str(SUPPORT / "graders/tone/PROMPT.md"), "--runs", "3", "--concurrency", "2",
        "--max-turns", "2", "--json", "runs.jsonl", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "3 scenario runs" in result.stdout and "Customer whose parcel is late #3" in result.stdout
    )
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [line["status"] for line in lines] == ["completed"] * 3
    assert all(len(line["grades"]) == 1 and line["turns"] >= 1 for line in lines)
