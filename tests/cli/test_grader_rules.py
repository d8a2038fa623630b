"""Grader compatibility wherever a grader runs (docs/decks.md, "Graders"), and deck warnings at run
time (deprecations on stderr once, in the trace, errors under --strict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

GAMBIT = str(Path(sys.executable).parent / "gambit")


def gambit(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.pop("GAMBIT_STRICT", None)
    return subprocess.run(
        [GAMBIT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
    )


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


BAD_GRADER = """
+++
contextSchema = "./ctx.json"
responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
modelParams.model = "offline/demo"
+++
Grade.
"""
CTX = '{"type": "object", "properties": {"transcript": {"type": "string"}}, "required": ["transcript"]}'


def test_gambit_grade_refuses_an_incompatible_grader_with_checks_error(tmp_path: Path):
    grader = write(tmp_path, "g/PROMPT.md", BAD_GRADER)
    write(tmp_path, "g/ctx.json", CTX)
    state = write(
        tmp_path,
        "s.json",
        json.dumps(
            {
                "runId": "r",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ],
            }
        ),
    )
    graded = gambit("grade", str(grader), "--state", str(state), cwd=tmp_path)
    assert graded.returncode == 1
    assert "not compatible with the built-in grader context schemas" in graded.stderr
    checked = gambit("check", str(grader), "--as", "grader", cwd=tmp_path)
    assert checked.returncode == 1
    assert "not compatible with the built-in grader context schemas" in checked.stderr
    assert gambit("check", str(grader), cwd=tmp_path).returncode == 0  # as a root it loads


def test_deprecations_warn_once_on_stderr_go_in_the_trace_and_fail_under_strict(tmp_path: Path):
    deck = write(
        tmp_path,
        "d/PROMPT.md",
        """
        +++
        inputSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
        modelParams.model = "offline/demo"
        +++
        Hello.
        """,
    )
    trace = tmp_path / "t.jsonl"
    ran = gambit("run", str(deck), "--message", "hi", "--trace", str(trace), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    warnings = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and 'deprecated "inputSchema"' in warnings[0]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    logs = [e for e in events if e["type"] == "log" and e.get("level") == "warn"]
    assert len(logs) == 1 and 'deprecated "inputSchema"' in logs[0]["message"]
    strict = gambit("run", str(deck), "--message", "hi", "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and 'deprecated "inputSchema"' in strict.stderr
    env_strict = gambit(
        "run", str(deck), "--message", "hi", cwd=tmp_path, env={"GAMBIT_STRICT": "1"}
    )
    assert env_strict.returncode == 1


def test_the_engine_loads_a_grader_given_by_path_as_a_grader(tmp_path: Path):
    """`grade_state` (and so verify and the Grade tab) checks a grader path as a grader,
    the same rule `gambit grade` applies, before any model is called."""
    import asyncio

    import pytest

    from gambit.core import DeckLoadError, grade_state, state_from_dict
    from gambit.providers.offline import ScriptedProvider

    grader = write(tmp_path, "g/PROMPT.md", BAD_GRADER)
    write(tmp_path, "g/ctx.json", CTX)
    state = state_from_dict({"runId": "r", "messages": [{"role": "user", "content": "hi"}]})
    provider = ScriptedProvider()
    with pytest.raises(DeckLoadError, match="not compatible with the built-in grader context"):
        asyncio.run(grade_state(grader, state, provider=provider))
    assert provider.requests == []


DEPRECATED_CHILD = """
import gambit
deck = gambit.define_deck(
    run=lambda ctx: f"child got {ctx.input}",
    context_schema="gambit://schemas/scenarios/plain_chat_input_optional.ts",
    response_schema="gambit://schemas/scenarios/plain_chat_output.zod.ts",
)
"""


def test_a_deck_first_loaded_during_the_run_warns_too_and_fails_under_strict(tmp_path: Path):
    """A compute deck's spawn_and_wait target is loaded when the run reaches it: its
    deprecations reach stderr and the trace like the root's, and --strict refuses it."""
    write(tmp_path, "child.py", DEPRECATED_CHILD)
    parent = write(
        tmp_path,
        "parent.py",
        """
        import gambit
        deck = gambit.define_deck(run=lambda ctx: ctx.spawn_and_wait("./child.py", "hi"))
        """,
    )
    trace = tmp_path / "t.jsonl"
    ran = gambit("run", str(parent), "--trace", str(trace), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "child got hi\n"
    warnings = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and 'plain_chat_input_optional.ts" is deprecated' in warnings[0]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    logs = [e for e in events if e["type"] == "log" and e.get("level") == "warn"]
    assert len(logs) == 1 and logs[0]["deckPath"] == str(tmp_path / "child.py")
    strict = gambit("run", str(parent), "--strict", cwd=tmp_path)
    assert strict.returncode == 1
    assert strict.stderr.splitlines()[-1].startswith(
        f"error: {tmp_path / 'child.py'}: context_schema:"
    )


def test_scenario_and_grade_strict_reach_decks_first_loaded_during_the_run(tmp_path: Path):
    """--strict of `gambit scenario` and `gambit grade` (and GAMBIT_STRICT=1) refuse a
    deprecated deck that a compute root or a compute grader loads while it runs."""
    write(tmp_path, "child.py", DEPRECATED_CHILD)
    root = write(
        tmp_path,
        "root.py",
        """
        import gambit
        deck = gambit.define_deck(run=lambda ctx: ctx.spawn_and_wait("./child.py", "hi"))
        """,
    )
    persona = write(
        tmp_path,
        "persona/PROMPT.md",
        """
        +++
        contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
        responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
        +++
        You are a customer. Say hello.
        """,
    )
    grader = write(
        tmp_path,
        "grader.py",
        """
        import gambit

        def run(ctx):
            ctx.spawn_and_wait("./child.py", "hi")
            return {"score": 1, "reason": "fine"}

        deck = gambit.define_deck(
            run=run,
            context_schema="gambit://schemas/graders/contexts/conversation.zod.ts",
            response_schema="gambit://schemas/graders/grader_output.zod.ts",
        )
        """,
    )
    scenario = ["scenario", str(root), "--scenario", str(persona), "--max-turns", "1"]
    scenario += ["--scenario-model", "offline/echo", "--state", str(tmp_path / "s.json")]
    grade = ["grade", str(grader), "--state", str(tmp_path / "s.json")]
    lenient = gambit(*scenario, cwd=tmp_path)
    assert lenient.returncode == 0, lenient.stderr
    assert gambit(*grade, cwd=tmp_path).returncode == 0
    child_refused = f"{tmp_path / 'child.py'}: context_schema:"
    for command in (scenario, grade):
        by_flag = gambit(*command, "--strict", cwd=tmp_path)
        by_env = gambit(*command, cwd=tmp_path, env={"GAMBIT_STRICT": "1"})
        for strict in (by_flag, by_env):
            assert strict.returncode == 1, (command, strict.stdout)
            error = strict.stderr.splitlines()[-1]
            assert error.startswith("error: ") and child_refused in error, (command, error)


def test_the_engine_checks_a_grader_loaded_as_a_root_before_it_grades(tmp_path: Path):
    """A grader handed to `grade_state` as a tree or a deck loaded in another role is checked
    as a grader all the same: incompatible, it never runs."""
    import asyncio

    import pytest

    from gambit.core import DeckLoadError, grade_state, load_deck, load_deck_tree, state_from_dict
    from gambit.providers.offline import ScriptedProvider

    grader = write(tmp_path, "g/PROMPT.md", BAD_GRADER)
    write(tmp_path, "g/ctx.json", CTX)
    state = state_from_dict({"runId": "r", "messages": [{"role": "user", "content": "hi"}]})
    provider = ScriptedProvider()
    for loaded in (load_deck_tree(grader), load_deck(grader)):
        with pytest.raises(DeckLoadError, match="g/PROMPT.md: contextSchema: not compatible"):
            asyncio.run(grade_state(loaded, state, provider=provider))
    assert provider.requests == []


def test_check_reports_a_graders_every_problem_at_once(tmp_path: Path):
    # With responseSchema missing, the contextSchema's incompatibility was not reported
    # until the first was fixed (README: all problems are reported at once).
    (tmp_path / "c.json").write_text(
        json.dumps(
            {"type": "object", "properties": {"foo": {"type": "string"}}, "required": ["foo"]}
        )
    )
    (tmp_path / "PROMPT.md").write_text('+++\nlabel = "g"\ncontextSchema = "./c.json"\n+++\nx\n')
    result = gambit("check", "PROMPT.md", "--as", "grader", cwd=tmp_path)
    assert result.returncode == 1
    assert "a grader deck must declare responseSchema" in result.stderr
    assert '"foo": added fields must be optional' in result.stderr
