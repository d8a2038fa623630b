"""The terminal as a UI (README "Using it", docs/cli.md), through the real console script: one
note about a missing provider, what --model and --model-force reach, graders kept on their own
model and warned about when it cannot grade, the repl's commands and banner, progress as a bar
on a terminal and as plain lines elsewhere, and `gambit keys` in a deck folder."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

from tests.support.fake_model_server import FakeModelServer, Reply

ROOT = Path(__file__).resolve().parents[2]
GAMBIT = str(Path(sys.executable).parent / "gambit")
SUPPORT = ROOT / "examples" / "support"
HELLO = ROOT / "examples" / "hello" / "deck.py"
PERSONA = SUPPORT / "scenarios/late_delivery/PROMPT.md"
TONE = SUPPORT / "graders/tone/PROMPT.md"
_PROVIDER_PREFIXES = ("OPENAI_", "OPENROUTER_", "OLLAMA_", "OPENRESPONSES_", "GAMBIT_")


def clean_env(**extra: str) -> dict[str, str]:
    """No provider configured, no Gambit variable, not in CI: the offline models answer."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_PROVIDER_PREFIXES) and k not in ("CI", "DATABASE_URL", "REDIS_URL")
    }
    env.update(extra)
    return env


def gambit(
    *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [GAMBIT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env or clean_env(),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        timeout=120,
    )


def on_a_terminal(
    args: list[str], cwd: Path, *, env: dict[str, str], keys: list[bytes] = ()
) -> tuple[int, str]:
    """Run `gambit ARGS` with stdin, stdout and stderr on a pseudo-terminal; type `keys` one
    after the other (a pause before each); return the exit code and everything it showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [GAMBIT, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env
    )
    os.close(slave)
    shown = bytearray()

    def read_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    return
                if not chunk:
                    return
                shown.extend(chunk)

    try:
        for key in keys:
            read_for(1.0)
            os.write(master, key)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            read_for(0.2)
        read_for(0.3)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        os.close(master)
    return proc.returncode, shown.decode("utf-8", errors="replace")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def trace_models(trace: Path) -> dict[str, set[str]]:
    """deck file name (parent folder for PROMPT.md) -> the models its calls went to."""
    models: dict[str, set[str]] = {}
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "model.call":
            path = Path(event["deckPath"])
            name = path.parent.name if path.name == "PROMPT.md" else path.name
            models.setdefault(name, set()).add(event["model"])
    return models


# ---- the no-provider note, and what --model reaches --------------------------------------------


def test_scenario_says_once_that_no_provider_is_configured(tmp_path: Path):
    """Four decks (the persona, the deck, its LLM action, the grader) name a model whose key
    is missing: one note, not one per deck."""
    result = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(PERSONA), "--grade", str(TONE),
        "--max-turns", "4", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("note: no configured provider") == 1, result.stderr
    assert "OPENROUTER_API_KEY is not set" in result.stderr
    assert "--model-force MODEL" in result.stderr


def test_model_says_which_decks_keep_their_own(tmp_path: Path):
    """--model is a default for decks that name no model: the support deck and its LLM action
    name theirs, and the command says so instead of ignoring the flag silently."""
    result = gambit(
        "run", str(SUPPORT / "PROMPT.md"), "--model", "offline/echo", "--message", "hi",
        "--context", '{"tier": "standard"}', cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (note,) = [line for line in result.stderr.splitlines() if "--model offline/echo" in line]
    assert "used only by decks that name no model" in note
    assert "2 decks keep their own" in note and "openrouter/openai/gpt-4o-mini" in note
    assert "draft_reply" in note and "--model-force" in note
    forced = gambit(
        "run", str(SUPPORT / "PROMPT.md"), "--model", "offline/echo", "--model-force",
        "offline/echo", "--message", "hi", "--context", '{"tier": "standard"}', cwd=tmp_path,
    )  # fmt: skip
    assert "--model offline/echo" not in forced.stderr  # nothing left for --model to miss


# ---- the deck's model and the graders' ----------------------------------------------------------


def test_verify_model_force_stops_at_the_deck_under_test(tmp_path: Path):
    """--model-force offline/echo answers the support deck; the persona and the grader keep
    their own model (with no key: the offline demo model), so the grades are grades."""
    result = gambit(
        "verify", str(SUPPORT / "PROMPT.md"), "--runs", "2", "--max-turns", "2",
        "--model-force", "offline/echo", "--trace", "t.jsonl", "--json", "report.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    models = trace_models(tmp_path / "t.jsonl")
    assert models["support"] == {"offline/echo"}
    assert models["late_delivery"] == {"offline/demo"}
    assert models["tone"] == {"offline/demo"}
    report = json.loads((tmp_path / "report.json").read_text())
    reasons = [g["reason"] for grade in report["grades"] for g in grade["grading"]["results"]]
    assert reasons and all(r.startswith("Demo grade: ") for r in reasons)
    assert "cannot grade" not in result.stderr


def test_a_grader_answered_by_the_echo_model_is_warned_about(tmp_path: Path):
    result = gambit(
        "verify", str(SUPPORT / "PROMPT.md"), "--runs", "2", "--max-turns", "1",
        "--model-force", "offline/echo", "--grader-model", "offline/echo", "--trace", "t.jsonl",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert trace_models(tmp_path / "t.jsonl")["tone"] == {"offline/echo"}
    warnings = [line for line in result.stderr.splitlines() if "cannot grade" in line]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].startswith("warning: the grader Tone was answered by offline/echo")
    assert "--grader-model MODEL" in warnings[0]
    # gambit scenario and gambit grade say the same
    state = tmp_path / "s.json"
    scenario = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(PERSONA), "--grade", str(TONE),
        "--max-turns", "1", "--grader-model", "offline/echo", "--state", str(state), cwd=tmp_path,
    )  # fmt: skip
    assert scenario.returncode == 0, scenario.stderr
    assert "the grader Tone" in scenario.stderr and "offline/echo, which cannot grade" in (
        scenario.stderr
    )
    graded = gambit(
        "grade", str(TONE), "--state", str(state), "--model-force", "offline/echo", cwd=tmp_path
    )
    assert graded.returncode == 0, graded.stderr
    assert "cannot grade" in graded.stderr and "--model-force MODEL" in graded.stderr


def test_a_grader_whose_replies_are_not_grades_is_warned_about(
    fake_server: FakeModelServer, tmp_path: Path
):
    """A model that answers a grader in prose gives no grade: the grade fails, and a warning
    names the model and what a grade is."""
    grader = write(
        tmp_path,
        "grader/PROMPT.md",
        """
        +++
        contextSchema = "gambit://schemas/graders/contexts/conversation.zod.ts"
        responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
        +++
        Grade the conversation.
        """,
    )
    state = tmp_path / "s.json"
    ran = gambit(
        "run", str(HELLO), "--message", "Ada", "--state", str(state), cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    fake_server.queue(Reply(text="Looks friendly enough to me."))
    env = clean_env(OPENRESPONSES_BASE_URL=fake_server.base_url)
    graded = gambit(
        "grade", str(grader), "--state", str(state), "--model", "openresponses/chatty",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert graded.returncode == 1
    (warning,) = [line for line in graded.stderr.splitlines() if "not a grade" in line]
    assert warning.startswith("warning: 1 of 1 replies from openresponses/chatty to the grader")
    assert "a numeric score and a reason" in warning


# ---- the repl -----------------------------------------------------------------------------------


def test_repl_commands_are_not_messages(tmp_path: Path):
    lines = "/help\nhello\n/state\n/nope\n//slash\n/quit\nnever said\n"
    result = gambit(
        "repl", str(SUPPORT / "PROMPT.md"), "--model-force", "offline/echo", "--context",
        '{"tier": "standard"}', cwd=tmp_path, stdin=lines,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "assistant> You said: hello",
        "assistant> You said: /slash",
    ]
    assert "/state         the conversation so far" in result.stderr
    assert "state: run run-" in result.stderr and "not saved (pass --state FILE" in result.stderr
    assert "  user: hello" in result.stderr
    assert "unknown command /nope" in result.stderr
    exited = gambit("repl", str(HELLO), cwd=tmp_path, stdin="Ada\n/exit\nBob\n")  # /exit, too
    assert (exited.returncode, exited.stdout) == (0, "assistant> Hello, Ada!\n")


def test_repl_on_a_terminal_says_how_to_leave_and_ctrl_d_leaves(tmp_path: Path):
    code, shown = on_a_terminal(
        ["repl", str(HELLO), "--context", '"Ada"'],
        tmp_path,
        env=clean_env(),
        keys=[b"/help\r", b"Bob\r", b"\x04"],  # Ctrl-D on an empty line: end of input
    )
    assert code == 0, shown
    banner = shown.splitlines()[0]
    assert banner.startswith("Talking to Hello (no model needed).")
    assert "/help lists the commands" in banner and "/exit or Ctrl-D leaves" in banner
    assert "assistant> Hello, Ada!" in shown and "assistant> Hello, Bob!" in shown
    assert "/exit, /quit   leave" in shown
    assert "error" not in shown.lower() and "Traceback" not in shown


def test_repl_on_a_compute_deck_answers_its_context_first(tmp_path: Path):
    """examples/hello: the context names whom to greet; each message after it is the next
    name (a compute deck keeps no conversation: a message is its input)."""
    result = gambit("repl", str(HELLO), "--context", '"Ada"', cwd=tmp_path, stdin="go\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "assistant> Hello, Ada!\nassistant> Hello, go!\n"


# ---- progress -----------------------------------------------------------------------------------


VERIFY = ["verify", str(SUPPORT / "PROMPT.md"), "--runs", "3", "--max-turns", "1"]
VERIFY += ["--model-force", "offline/echo"]


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tmp_path: Path):
    result = gambit(*VERIFY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    for line in ("scenario runs: 1/3 done (0 failed)", "scenario runs: 3/3 done (0 failed)"):
        assert line in lines
    assert "grades: 3/3 done (0 failed)" in lines
    assert "━" not in result.stderr and "\x1b[" not in result.stderr
    quiet = gambit(*VERIFY, "--quiet", cwd=tmp_path)
    assert "done (" not in quiet.stderr
    batch = gambit(
        "scenario", str(SUPPORT / "PROMPT.md"), "--scenario", str(PERSONA), "--runs", "3",
        "--max-turns", "1", cwd=tmp_path,
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr
    assert "scenario runs: 3/3 done (0 failed)" in batch.stderr.splitlines()


def test_progress_is_a_bar_on_a_terminal_and_plain_lines_in_ci(tmp_path: Path):
    code, shown = on_a_terminal(VERIFY, tmp_path, env=clean_env(COLUMNS="100"))
    assert code == 0, shown
    assert "scenario runs" in shown and "━" in shown and "\x1b[" in shown  # rich's bar
    assert "done (0 failed)" not in shown
    code, shown = on_a_terminal(VERIFY, tmp_path, env=clean_env(CI="true", COLUMNS="100"))
    assert code == 0, shown
    assert "scenario runs: 3/3 done (0 failed)" in shown
    assert "\x1b[?25l" not in shown  # no bar hiding the cursor to redraw itself


# ---- gambit keys --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_keys_made_in_a_deck_folder_open_the_server_started_there(tmp_path: Path):
    """`gambit keys create` and `gambit serve`, both without a folder, in a folder of decks:
    the key goes to that workspace's database (stderr says which), and its server takes it."""
    folder = tmp_path / "mydecks"
    write(folder, "echo/PROMPT.md", '+++\nmodelParams.model = "offline/echo"\n+++\nRepeat.\n')
    env = clean_env()
    created = gambit("keys", "create", "laptop", cwd=folder, env=env)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert f"for the workspace {folder.resolve()} (gambit serve {folder.resolve()};" in (
        created.stderr
    )
    assert (folder / ".gambit" / "simulator.sqlite3").is_file()
    # a second active key of the same name is refused: revoke takes a name
    again = gambit("keys", "create", "laptop", cwd=folder, env=env)
    assert again.returncode != 0 and "an active key is named 'laptop'" in again.stderr
    port = _free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [GAMBIT, "serve", "--port", str(port)], cwd=folder, env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/test/?format=json", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail((tmp_path / "serve.log").read_text())
                time.sleep(0.2)
        reply = httpx.post(
            url + "/v1/responses",
            json={"model": "deck/echo", "input": "with my key"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        assert "You said: with my key" in reply.text
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()
