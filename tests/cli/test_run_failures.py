"""Failures are one clear line and nothing is lost (issue 8 §2), through the console script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gambit.core import RunError, run_deck
from gambit.providers.offline import ScriptedProvider

GAMBIT = str(Path(sys.executable).parent / "gambit")
ROOT = Path(__file__).resolve().parents[2]
BOOM = """
import gambit
def run(ctx):
    ctx.log("about to fail")
    raise KeyError("missing customer id")
deck = gambit.define_deck(run=run)
"""


def gambit(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [GAMBIT, *args], capture_output=True, text=True, cwd=cwd, env=env, input=stdin, timeout=120
    )


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_deck_code_that_raises_is_one_line_exit_1_and_keeps_the_trace(tmp_path: Path):
    deck = write(tmp_path, "deck.py", BOOM)
    result = gambit("run", str(deck), "--trace", "t.jsonl", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {deck} raised KeyError: 'missing customer id'"
    ]
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "run.end" and events[-1]["status"] == "failed"
    assert "missing customer id" in events[-1]["error"]
    assert any(e["type"] == "log" and e.get("message") == "about to fail" for e in events)
    verbose = gambit("run", str(deck), "--verbose", cwd=tmp_path)
    assert "Traceback (most recent call last)" in verbose.stderr
    assert 'raise KeyError("missing customer id")' in verbose.stderr


async def test_run_deck_raises_a_run_error_naming_the_deck_with_the_cause(tmp_path: Path):
    deck = write(tmp_path, "deck.py", BOOM)
    with pytest.raises(RunError, match="deck.py raised KeyError") as info:
        await run_deck(deck, provider=ScriptedProvider())
    assert info.value.code == "deck_failed" and isinstance(info.value.__cause__, KeyError)


def test_a_compute_deck_takes_the_message_as_its_input(tmp_path: Path):
    hello = ROOT / "examples" / "hello" / "deck.py"
    assert gambit("run", str(hello), "--message", "Bob", cwd=tmp_path).stdout == "Hello, Bob!\n"


def test_repl_on_a_compute_deck_prints_every_answer_and_no_empty_turn(tmp_path: Path):
    hello = ROOT / "examples" / "hello" / "deck.py"
    result = gambit("repl", str(hello), cwd=tmp_path, stdin="Ada\n\nBob\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["assistant> Hello, Ada!", "assistant> Hello, Bob!"]


def test_repl_on_a_compute_deck_keeps_the_conversation_in_state(tmp_path: Path):
    """--state works for a compute deck too: the deck keeps no conversation, so each line
    and its answer are recorded, resumed by the next session, and a grader can read them."""
    hello = ROOT / "examples" / "hello" / "deck.py"
    for line in ("Ada", "Bob"):
        result = gambit("repl", str(hello), "--state", "s.json", cwd=tmp_path, stdin=line + "\n")
        assert result.returncode == 0, result.stderr
    state = json.loads((tmp_path / "s.json").read_text())
    assert [(m["role"], m["content"]) for m in state["messages"]] == [
        ("user", "Ada"),
        ("assistant", "Hello, Ada!"),
        ("user", "Bob"),
        ("assistant", "Hello, Bob!"),
    ]


def test_stream_prints_the_answer_once(tmp_path: Path):
    deck = write(
        tmp_path,
        "d/PROMPT.md",
        """
        +++
        modelParams.model = "offline/echo"
        +++
        Echo.
        """,
    )
    result = gambit("run", str(deck), "--message", "hello there", "--stream", cwd=tmp_path)
    assert result.stdout == "You said: hello there\n"


def test_verbose_lines_are_well_formed(tmp_path: Path):
    result = gambit(
        "run", str(ROOT / "examples/support/PROMPT.md"), "--context", '{"name": "Sam"}',
        "--message", "Where is A1002?", "--verbose", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[trace")]
    assert len(lines) > 5
    for line in lines:
        assert re.fullmatch(r"\[trace \+\d+ms\] [a-z_.]+( .+)?", line), line
        assert line.count("(") == line.count(")"), line


def test_scenario_exits_1_when_a_grader_fails(tmp_path: Path):
    write(
        tmp_path,
        "bot/PROMPT.md",
        '+++\nstartMode = "user"\nmodelParams.model = "offline/demo"\n+++\nHelp.\n',
    )
    write(
        tmp_path,
        "persona/PROMPT.md",
        """
        +++
        modelParams.model = "offline/demo"
        +++
        You are a customer. ![](gambit://snippets/scenario-participant.md)
        """,
    )
    write(
        tmp_path,
        "grader/deck.py",
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
    result = gambit(
        "scenario", "bot/PROMPT.md", "--scenario", "persona/PROMPT.md", "--grade", "grader/deck.py",
        "--max-turns", "1", "--state", "s.json", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert "grader failed" in result.stderr and "rubric file missing" in result.stderr
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["meta"]["gradingRuns"][0]["status"] == "error"  # recorded, not lost


def test_context_nested_past_the_limit_is_one_line_naming_the_option(tmp_path: Path):
    hello = ROOT / "examples" / "hello" / "deck.py"
    for depth in (5_000, 50_000):  # past the engine's limit; past what json can parse
        deep = "[" * depth + "]" * depth
        result = gambit("run", str(hello), "--context", deep, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            "error: --context: the JSON value is nested more than 256 levels deep (fix: flatten it)"
        ]


def test_a_state_file_nested_past_the_limit_is_one_line_naming_the_file(tmp_path: Path):
    deck = write(tmp_path, "d/PROMPT.md", '+++\nmodelParams.model = "offline/echo"\n+++\nEcho.\n')
    for depth in (5_000, 100_000):
        state = {"runId": "r", "messages": [{"role": "user", "content": "hi"}], "meta": {}}
        text = json.dumps(state)[:-3] + '{"x": ' + "[" * depth + "]" * depth + "}}"
        (tmp_path / "s.json").write_text(text)
        result = gambit("run", str(deck), "--message", "x", "--state", "s.json", cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            "error: s.json: the state is nested more than 256 levels deep "
            "(fix: start a new state file)"
        ]


def test_verbose_lines_stay_whole_with_streamed_text_and_multiline_messages(tmp_path: Path):
    echo = write(tmp_path, "d/PROMPT.md", '+++\nmodelParams.model = "offline/echo"\n+++\nEcho.\n')
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # stdout and stderr on one pipe, as on a terminal: the lines must not run into each other
    merged = subprocess.run(
        [GAMBIT, "run", str(echo), "--message", "hello there", "--stream", "--verbose"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=env,
        timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout
    lines = merged.stdout.splitlines()
    assert any(line.startswith("[trace") and "output_text.delta" in line for line in lines)
    for line in lines:
        assert "[trace" not in line or line.startswith("[trace +"), line
    deck = write(
        tmp_path,
        "c/deck.py",
        """
        import gambit
        def run(ctx):
            ctx.log("line one\\nline two")
            raise ValueError("bad\\nvalue")
        deck = gambit.define_deck(run=run)
        """,
    )
    result = gambit("run", str(deck), "--verbose", cwd=tmp_path)
    assert result.returncode == 1
    traced = [line for line in result.stderr.splitlines() if line.startswith("[trace")]
    assert traced[1].endswith("log [info] line one\\nline two")
    assert traced[-1].endswith("raised ValueError: bad\\nvalue")
    assert not any(line in ("line two", "value") for line in result.stderr.splitlines()[:4])


def one_turn_scenario(root: Path, cwd: Path, *more: str) -> subprocess.CompletedProcess:
    """`gambit scenario ROOT` for one persona turn, the persona answered by offline/echo
    (which repeats what it is told), saved to s.json."""
    persona = ROOT / "examples/support/scenarios/late_delivery/PROMPT.md"
    return gambit(
        "scenario", str(root), "--scenario", str(persona), *more,
        "--max-turns", "1", "--scenario-model", "offline/echo", "--state", "s.json", cwd=cwd,
    )  # fmt: skip


def test_scenario_asks_no_init_fill_for_an_optional_context(tmp_path: Path):
    """examples/hello's context is an optional string: nothing is missing, so the persona is
    not asked to fill it in (it would answer in prose, not JSON)."""
    result = one_turn_scenario(ROOT / "examples/hello/deck.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "assistant> Hello, world!"
    assert "init fill" not in result.stderr


def test_a_compute_root_gets_each_persona_message_as_its_input(tmp_path: Path):
    """A compute deck keeps no conversation: in a scenario each persona message is its input,
    as with `gambit run --message`, and the exchange is recorded in the state for graders."""
    result = one_turn_scenario(ROOT / "examples/hello/deck.py", tmp_path)
    assert result.returncode == 0, result.stderr
    persona = "You said: Hello, world!"  # offline/echo repeats the deck's greeting
    assert result.stdout.splitlines()[:3] == [
        "assistant> Hello, world!",
        f"user> {persona}",
        f"assistant> Hello, {persona}!",
    ]
    state = json.loads((tmp_path / "s.json").read_text())
    said = [(m["role"], m["content"]) for m in state["messages"]]
    assert said == [
        ("assistant", "Hello, world!"),
        ("user", persona),
        ("assistant", f"Hello, {persona}!"),
    ]
    assert [r.get("source") for r in state["messageRefs"]] == [None, "scenario", None]


def test_a_json_message_is_a_compute_roots_input_as_a_value(tmp_path: Path):
    deck = write(
        tmp_path,
        "count.py",
        """
        import gambit
        deck = gambit.define_deck(
            run=lambda ctx: f"n is {ctx.input['n']}" if isinstance(ctx.input, dict) else "n?"
        )
        """,
    )
    result = one_turn_scenario(deck, tmp_path, "--message", '{"n": 2}')
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ['user> {"n": 2}', "assistant> n is 2"]
    said = [m["content"] for m in json.loads((tmp_path / "s.json").read_text())["messages"]]
    assert said[:2] == ['{"n": 2}', "n is 2"]
