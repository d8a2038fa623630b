"""`gambit check`: exit codes and the stable `--json` shape (docs/decks.md, "Checking decks"),
through the real console script."""

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


# ---- --providers -----------------------------------------------------------------------------


def _provider_workspace(tmp_path: Path) -> Path:
    (tmp_path / "gambit.toml").write_text(
        '[models.aliases]\nfast = ["openai-api/gpt-4.1-mini", "offline/echo"]\n'
    )
    root = tmp_path / "bot"
    (root / "grader").mkdir(parents=True)
    (root / "PROMPT.md").write_text(
        "+++\n"
        '[modelParams]\nmodel = ["openai-api/gpt-4.1", "openrouter/openai/gpt-4.1"]\n'
        '[[graders]]\npath = "./grader/PROMPT.md"\n'
        "+++\nHi\n"
    )
    (root / "grader" / "PROMPT.md").write_text(
        '+++\ncontextSchema = "gambit://schemas/graders/contexts/turn.zod.ts"\n'
        'responseSchema = "gambit://schemas/graders/grader_output.zod.ts"\n'
        '[modelParams]\nmodel = "fast"\n+++\nGrade.\n'
    )
    return root


def run_check_env(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [GAMBIT, "check", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=60,
    )


def test_providers_reports_each_model_as_json(tmp_path: Path):
    root = _provider_workspace(tmp_path)
    env = {"OPENROUTER_API_KEY": "sk-secret-value", "OPENROUTER_BASE_URL": "http://127.0.0.1:9/v1"}
    result = run_check_env(str(root), "--providers", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"ok", "errors", "warnings", "decks", "providers"}
    assert report["ok"] is True and report["errors"] == []
    models = {m["model"]: m for m in report["providers"]["models"]}
    assert list(models) == [
        "openai-api/gpt-4.1",
        "openrouter/openai/gpt-4.1",
        "openai-api/gpt-4.1-mini",
        "offline/echo",
    ]
    first = models["openai-api/gpt-4.1"]
    assert first["provider"] == "openai-api" and first["configured"] is False
    assert first["reason"] == "OPENAI_API_KEY is not set"
    served = models["openrouter/openai/gpt-4.1"]
    assert served["configured"] is True and served["providerModel"] == "openai/gpt-4.1"
    assert served["baseUrl"] == "http://127.0.0.1:9/v1"
    assert served["env"]["OPENROUTER_API_KEY"] == "set"
    assert models["openai-api/gpt-4.1-mini"]["alias"] == "fast"
    assert models["offline/echo"]["offline"] is True
    assert models["offline/echo"]["decks"] == [str((root / "grader" / "PROMPT.md").resolve())]
    decks = {
        Path(d["path"]).name + ":" + Path(d["path"]).parent.name: d
        for d in report["providers"]["decks"]
    }
    assert decks["PROMPT.md:bot"]["model"] == "openrouter/openai/gpt-4.1"
    assert decks["PROMPT.md:bot"]["available"] is True
    assert decks["PROMPT.md:grader"]["models"] == ["fast"]
    assert decks["PROMPT.md:grader"]["model"] == "offline/echo"
    assert "sk-secret-value" not in result.stdout + result.stderr


def test_providers_human_output_has_one_line_per_model(tmp_path: Path):
    root = _provider_workspace(tmp_path)
    result = run_check_env(str(root), "--providers", env={"OPENAI_API_KEY": "k"})
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("model")]
    assert len(lines) == 4
    assert "openai-api/gpt-4.1  -> openai-api: configured, https://api.openai.com/v1" in lines[0]
    assert "openrouter: not configured: OPENROUTER_API_KEY is not set" in lines[1]
    assert "(alias fast)" in lines[2] and "offline (no network)" in lines[3]


def test_providers_fails_when_a_deck_has_no_configured_candidate(tmp_path: Path):
    root = _provider_workspace(tmp_path)
    result = run_check_env(str(root), "--providers", env={})
    assert result.returncode == 1
    assert "no provider is configured for any model in the list" in result.stderr
    assert "openai-api/gpt-4.1 (openai-api: OPENAI_API_KEY is not set)" in result.stderr
    assert "openrouter/openai/gpt-4.1 (openrouter: OPENROUTER_API_KEY is not set)" in result.stderr
    # the fix does not send the reader to the command they are running
    assert "set the variable named above, or change the model" in result.stderr
    assert "gambit check --providers shows which" not in result.stderr
    assert "failed:" in result.stderr
    as_json = run_check_env(str(root), "--providers", "--json", env={})
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and report["ok"] is False
    assert [e["file"] for e in report["errors"]] == [str((root / "PROMPT.md").resolve())]
    assert "modelParams.model" in report["errors"][0]["message"]
    # The grader's alias ends in an offline model, which is always available.
    assert [d["available"] for d in report["providers"]["decks"]] == [False, True]


def test_without_providers_the_report_and_exit_code_are_unchanged(tmp_path: Path):
    root = _provider_workspace(tmp_path)
    result = run_check_env(str(root), "--json", env={})
    assert result.returncode == 0
    assert set(json.loads(result.stdout)) == {"ok", "errors", "warnings", "decks"}
    assert "model " not in run_check_env(str(root), env={}).stdout


def test_providers_warns_about_undefined_aliases_and_respects_default_none(tmp_path: Path):
    root = _provider_workspace(tmp_path)
    (tmp_path / "gambit.toml").write_text(
        '[providers]\ndefault = "none"\n[models.aliases]\nfast = "offline/echo"\n'
    )
    (root / "PROMPT.md").write_text(
        '+++\n[modelParams]\nmodel = ["quick", "offline/echo"]\n+++\nHi\n'
    )
    result = run_check_env(str(root), "--providers", "--json", "--strict", env={})
    report = json.loads(result.stdout)
    assert result.returncode == 0, report
    assert any("Model alias 'quick' is not defined" in w["message"] for w in report["warnings"])
    quick = report["providers"]["models"][0]
    assert quick["model"] == "quick" and quick["provider"] is None and not quick["configured"]
    assert "default" in quick["reason"]


def test_a_broken_gambit_toml_fails_the_check_as_it_would_fail_the_run(tmp_path: Path):
    (tmp_path / "gambit.toml").write_text('[context]\nwindow = "big"\n')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "PROMPT.md").write_text('+++\nlabel = "d"\n+++\nHi.\n')
    result = run_check(str(tmp_path / "d"))
    assert result.returncode == 1
    assert f"error: {tmp_path / 'gambit.toml'}: context.window must be" in result.stderr
    assert f"{tmp_path / 'gambit.toml'}: {tmp_path}" not in result.stderr  # named once
    (tmp_path / "gambit.toml").write_text('[providers]\ndefault = "nosuch"\n')
    warned = run_check(str(tmp_path / "d"))
    assert warned.returncode == 0
    assert warned.stderr.count("unknown providers.default 'nosuch'") == 1


def test_a_folder_of_decks_names_the_decks_it_does_not_search(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "PROMPT.md").write_text('+++\nlabel = "a"\n+++\nHi.\n')
    (tmp_path / "b" / "sub").mkdir(parents=True)
    (tmp_path / "b" / "sub" / "PROMPT.md").write_text('+++\nlabel = "b\n+++\n')  # broken
    result = run_check(str(tmp_path))
    assert result.returncode == 0  # the listing's decks load; the deeper one is named
    assert "b/sub/PROMPT.md: not checked: this deck lies more than one folder down" in result.stderr
    assert "check it by path: gambit check" in result.stderr
    only_deeper = tmp_path / "only"
    (only_deeper / "x" / "y").mkdir(parents=True)
    (only_deeper / "x" / "y" / "PROMPT.md").write_text('+++\nlabel = "y"\n+++\nHi.\n')
    result = run_check(str(only_deeper))
    assert result.returncode == 1
    assert "no deck found" in result.stderr and "decks lie deeper:" in result.stderr
    assert "x/y/PROMPT.md" in result.stderr


def test_running_a_folder_of_decks_names_the_decks_in_it():
    result = subprocess.run(
        [GAMBIT, "run", "examples", "--message", "hi"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "examples: this folder has no PROMPT.md or deck.py" in result.stderr
    assert (
        "(fix: pass one of the decks in it: examples/hello/deck.py, examples/support/PROMPT.md)"
        in (result.stderr)
    )
    assert "examples/PROMPT.md" not in result.stderr  # it said to pass a file that is not there
