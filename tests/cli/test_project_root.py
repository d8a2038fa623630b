"""The CLI's project root (docs/decks.md, "Trust and limits"), through the console script:
which folder it is, how --allow-path and GAMBIT_ALLOW_PATHS widen it, that nothing outside
it reaches the model, and what `gambit check` says and does about deck code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.fake_model_server import FakeModelServer
from tests.support.machine import needs_proc  # the tests that plant /proc links

GAMBIT = str(Path(sys.executable).parent / "gambit")
MODEL = "openrouter/test-model"
SECRET = "sk-must-never-leave-4242"


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def deck(root: Path, rel: str, body: str, front: str = "") -> Path:
    return write(root, rel, f'+++\n[modelParams]\nmodel = "{MODEL}"\n{front}+++\n{body}\n')


def gambit(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    for name in ("GAMBIT_ALLOW_PATHS", "GAMBIT_CHAT_FALLBACK"):
        if env is None or name not in env:
            full.pop(name, None)
    return subprocess.run(
        [GAMBIT, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=120
    )


def check_errors(path: Path, cwd: Path, *flags: str, env: dict[str, str] | None = None) -> list:
    done = gambit("check", str(path), "--json", *flags, cwd=cwd, env=env)
    return json.loads(done.stdout)["errors"]


@needs_proc
def test_an_environ_link_fails_the_run_and_nothing_reaches_the_model(
    fake_server: FakeModelServer, tmp_path: Path
):
    bot = deck(tmp_path / "proj", "bot/PROMPT.md", "Hello ![](./env.md)")
    (bot.parent / "env.md").symlink_to("/proc/self/environ")
    (tmp_path / "proj/gambit.toml").write_text("")
    fake_server.queue("hello")
    done = gambit(
        "run", str(bot), cwd=tmp_path, env={**fake_server.env(), "GAMBIT_TEST_SECRET": SECRET}
    )
    assert done.returncode == 1
    assert "./env.md' resolves to /proc/" in done.stderr
    assert f"outside the project root {(tmp_path / 'proj').resolve()}" in done.stderr
    assert fake_server.requests == []
    assert SECRET not in done.stdout + done.stderr


def test_the_root_is_gambit_toml_else_the_current_directory_else_the_decks_parent(
    tmp_path: Path,
):
    ws = tmp_path / "ws"
    write(ws, "snippets/tone.md", "Be brief.")
    bot = deck(ws, "decks/bot/PROMPT.md", "![](../../snippets/tone.md)")
    assert check_errors(bot, cwd=ws) == []  # the current directory holds the deck
    # From inside decks/, or from elsewhere: the folder holding the deck's folder (decks/).
    (inside,) = check_errors(bot, cwd=ws / "decks")
    assert f"outside the project root {(ws / 'decks').resolve()}" in inside["message"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert len(check_errors(bot, cwd=elsewhere)) == 1
    # The home folder never counts as the current directory.
    assert len(check_errors(bot, cwd=ws, env={"HOME": str(ws)})) == 1
    # gambit.toml pins the root, wherever the command runs.
    (ws / "gambit.toml").write_text("")
    assert check_errors(bot, cwd=elsewhere) == []


@needs_proc
def test_allow_path_and_the_environment_widen_the_root_but_never_to_proc(tmp_path: Path):
    write(tmp_path, "outside/tone.md", "Be brief.")
    bot = deck(tmp_path / "proj", "bot/PROMPT.md", "![](../../outside/tone.md)")
    (tmp_path / "proj/gambit.toml").write_text("")
    (error,) = check_errors(bot, cwd=tmp_path)
    assert "--allow-path" not in error["message"]  # the hint names the gambit.toml setting
    assert "[project] allow_paths in gambit.toml" in error["message"]
    assert check_errors(bot, tmp_path, "--allow-path", "outside") == []
    assert check_errors(bot, tmp_path, env={"GAMBIT_ALLOW_PATHS": str(tmp_path / "outside")}) == []
    (bot.parent / "env.md").symlink_to("/proc/self/environ")
    bot.write_text(bot.read_text() + "![](./env.md)\n")
    (error,) = check_errors(bot, tmp_path, "--allow-path", "/", "--allow-path", "/proc")
    assert "under /proc, which Gambit never reads" in error["message"]


def test_check_help_says_that_python_decks_run():
    done = gambit("check", "--help", cwd=Path.cwd())
    text = " ".join(done.stdout.split())
    assert "Checking a deck runs its code" in text
    assert "module-level code runs with your permissions" in text
    assert "--allow-path" in text


def test_a_module_raising_keyboard_interrupt_is_one_error_in_the_json(tmp_path: Path):
    module = write(tmp_path, "bot/deck.py", "raise KeyboardInterrupt\n")
    done = gambit("check", str(module), "--json", cwd=tmp_path)
    assert done.returncode == 1
    assert "Aborted" not in done.stderr
    report = json.loads(done.stdout)
    (error,) = report["errors"]
    assert "importing the module failed: KeyboardInterrupt" in error["message"]


def test_a_workspace_check_gives_each_deck_its_own_helper_and_writes_no_bytecode(
    tmp_path: Path,
):
    for name in ("a", "b"):
        write(tmp_path, f"ws/{name}/helper.py", f"LABEL = 'deck {name}'\n")
        write(
            tmp_path,
            f"ws/{name}/deck.py",
            "import gambit, helper\n"
            "deck = gambit.define_deck(run=lambda ctx: helper.LABEL, label=helper.LABEL)\n",
        )
    done = gambit("check", "ws", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["ok"], report
    assert sorted(d["label"] for d in report["decks"]) == ["deck a", "deck b"]
    assert list(tmp_path.rglob("__pycache__")) == []
