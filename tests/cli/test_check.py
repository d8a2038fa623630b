"""`gambit check` (DESIGN §9): exit codes and the `--json` shape, through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GAMBIT = str(Path(sys.executable).parent / "gambit")


def run_check(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [GAMBIT, "check", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_it_checks_the_bundled_examples():
    result = run_check("examples", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["errors"] == []
    roles = {
        (Path(d["path"]).relative_to(ROOT / "examples").as_posix(), d["role"])
        for d in report["decks"]
    }
    assert roles == {
        ("hello/deck.py", "root"),
        ("support/PROMPT.md", "root"),
        ("support/actions/order_status.py", "action"),
        ("support/actions/draft_reply/PROMPT.md", "action"),
        ("support/scenarios/late_delivery/PROMPT.md", "scenario"),
        ("support/graders/tone/PROMPT.md", "grader"),
    }
    assert set(report) == {"ok", "errors", "warnings", "decks"}
    for deck in report["decks"]:
        assert set(deck) == {"path", "role", "label"}


def test_it_passes_strict_on_the_examples():
    result = run_check("examples", "--strict")
    assert result.returncode == 0, result.stderr
    assert "ok: 6 decks, 0 errors, 0 warnings" in result.stderr + result.stdout


def test_it_reports_a_broken_deck_as_json(tmp_path: Path):
    deck = tmp_path / "PROMPT.md"
    deck.write_text('+++\nstartMode = "bot"\n[[mcpServers]]\nname = "x"\n+++\nHi\n')
    result = run_check(str(deck), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert len(report["errors"]) == 2
    assert all(e["file"] == str(deck.resolve()) for e in report["errors"])
    assert any("startMode" in e["message"] for e in report["errors"])


@pytest.mark.parametrize("strict_flag", [["--strict"], []])
def test_deprecations_are_errors_under_strict(tmp_path: Path, strict_flag: list[str]):
    deck = tmp_path / "PROMPT.md"
    deck.write_text("+++\n+++\n![](gambit://respond)\n")
    result = run_check(str(deck), "--json", *strict_flag)
    report = json.loads(result.stdout)
    if strict_flag:
        assert result.returncode == 1 and report["errors"] and not report["warnings"]
    else:
        assert result.returncode == 0 and report["warnings"] and not report["errors"]


def test_gambit_strict_env_enables_strict(tmp_path: Path):
    deck = tmp_path / "PROMPT.md"
    deck.write_text("+++\n+++\n![](gambit://respond)\n")
    env = {"GAMBIT_STRICT": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [GAMBIT, "check", str(deck)], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 1


def test_a_missing_file_is_an_error(tmp_path: Path):
    result = run_check(str(tmp_path / "nope" / "PROMPT.md"), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"][0]["file"].endswith("nope/PROMPT.md")


def test_human_output_names_roles_and_problems(tmp_path: Path):
    deck = tmp_path / "PROMPT.md"
    deck.write_text('+++\nlabel = "L"\nrespnd = true\n+++\nHi\n')
    result = run_check(str(deck))
    assert result.returncode == 0
    assert "root" in result.stdout and "L" in result.stdout
    assert "warning:" in result.stderr and "respnd" in result.stderr
