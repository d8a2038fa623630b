"""`gambit run | repl | scenario | grade` through the console script, against the fake model
server on 127.0.0.1, each in responses mode (`--responses`) and chat mode
(`GAMBIT_CHAT_FALLBACK=1`): every command works in both modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

GAMBIT = str(Path(sys.executable).parent / "gambit")
MODEL = "openrouter/test-model"


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A bot with a compute action, an LLM action, an error handler, a persona and graders."""
    write(
        tmp_path,
        "bot/PROMPT.md",
        f"""
        +++
        label = "Bot"
        contextSchema = "./in.json"
        allowEnd = true
        [modelParams]
        model = "{MODEL}"
        [guardrails]
        maxPasses = 6
        [handlers.onError]
        path = "./handler.py"
        [[actions]]
        name = "lookup"
        description = "Look an order up"
        execute = "./lookup.py"
        [[actions]]
        name = "draft"
        description = "Draft a reply"
        path = "./draft/PROMPT.md"
        +++
        You help customers.
        """,
    )
    write(
        tmp_path,
        "bot/in.json",
        '{"type":"object","properties":{"customer":{"type":"string"}},"required":["customer"]}',
    )
    write(
        tmp_path,
        "bot/lookup.py",
        """
        import gambit
        def run(ctx):
            if ctx.input["order"] == "boom":
                raise RuntimeError("order service down")
            return {"order": ctx.input["order"], "status": "shipped"}
        deck = gambit.define_deck(
            run=run,
            context_schema={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
            response_schema={"type": "object"},
        )
        """,
    )
    write(
        tmp_path,
        "bot/handler.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: {'status': 503, 'code': 'HANDLED', 'payload': 'try later'}, context_schema={}, response_schema={})\n",
    )
    write(
        tmp_path,
        "bot/draft/PROMPT.md",
        f"""
        +++
        contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
        responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
        [modelParams]
        model = "{MODEL}"
        +++
        Draft replies.
        ![](gambit://snippets/respond.md)
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
        You are Sam.
        ![](gambit://snippets/scenario-participant.md)
        ![](gambit://snippets/init.md)
        """,
    )
    write(
        tmp_path,
        "graders/turn/PROMPT.md",
        f"""
        +++
        contextSchema = "gambit://schemas/graders/contexts/turn.zod.ts"
        responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
        [modelParams]
        model = "{MODEL}"
        +++
        Grade the message.
        ![](gambit://snippets/respond.md)
        """,
    )
    write(
        tmp_path,
        "graders/whole/PROMPT.md",
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


@pytest.fixture(params=["responses", "chat"])
def mode(request) -> str:
    return request.param


def gambit(
    server: FakeModelServer, mode: str, *args: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, **server.env()}
    env.pop("GAMBIT_CHAT_FALLBACK", None)
    flags = list(args)
    if mode == "chat":
        env["GAMBIT_CHAT_FALLBACK"] = "1"
    elif args[0] != "check":
        flags.append("--responses")
    return subprocess.run(
        [GAMBIT, *flags], capture_output=True, text=True, env=env, cwd=cwd, input=stdin, timeout=120
    )


def model_paths(server: FakeModelServer) -> set[str]:
    return {r.path for r in server.requests if r.method == "POST"}


def expected_path(mode: str) -> str:
    return "/v1/chat/completions" if mode == "chat" else "/v1/responses"


def respond(payload, **extra) -> Reply:
    return Reply(function_calls=[FunctionCall("gambit_respond", {"payload": payload, **extra})])


def respond_by_turn(replies: dict[str, Reply]):
    """A reply chosen by the message a per-turn grader was given (turns are graded at once,
    so their calls arrive in any order)."""

    def reply(request) -> Reply:
        text = json.dumps(request.body)
        graded = text[text.index("messageToGrade") :]
        return next(r for needle, r in replies.items() if needle in graded[:400])

    return reply


# ---- run ------------------------------------------------------------------------------------


def test_run_with_actions_state_and_trace(fake_server: FakeModelServer, workspace: Path, mode: str):
    fake_server.queue(
        Reply(text="Checking.", function_calls=[FunctionCall("lookup", {"order": "A1"})]),
        Reply(function_calls=[FunctionCall("draft", {"input": "late parcel"})]),
        respond("Sorry about that."),
        Reply(text="Your order A1 has shipped."),
    )
    state, trace = workspace / "s.json", workspace / "t.jsonl"
    result = gambit(
        fake_server, mode, "run", "bot/PROMPT.md", "--context", '{"customer":"Sam"}', "--message", "where is A1?",
        "--state", str(state), "--trace", str(trace), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Your order A1 has shipped."
    assert model_paths(fake_server) == {expected_path(mode)}
    saved = json.loads(state.read_text())
    assert saved["format"] == mode and saved["runId"].startswith("run-")
    if mode == "responses":
        assert any(i.get("name") == "gambit_complete" for i in saved["items"])
    else:
        assert "items" not in saved
    roles = [m["role"] for m in saved["messages"]]
    assert roles[:4] == ["system", "assistant", "tool", "user"] and roles[-1] == "assistant"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    types = [e["type"] for e in events]
    assert (
        types[0] == "run.start" and types[-1] == "run.end" and events[-1]["status"] == "completed"
    )
    assert types.count("deck.start") == 2 and "monolog" not in types  # the draft deck responded
    lookup = next(e for e in events if e["type"] == "tool.result" and e["name"] == "lookup")
    assert json.loads(lookup["result"])["payload"] == {"order": "A1", "status": "shipped"}
    draft = next(e for e in events if e["type"] == "tool.result" and e["name"] == "draft")
    assert json.loads(draft["result"])["payload"] == "Sorry about that."
    # The request to the model after the action carries gambit_complete with the envelope.
    body = json.dumps(fake_server.requests[1].body)
    assert "gambit_complete" in body and "shipped" in body


def test_run_resumes_from_state(fake_server: FakeModelServer, workspace: Path, mode: str):
    state = workspace / "s.json"
    fake_server.queue(Reply(text="Hello Sam."), Reply(text="Still here."))
    first = gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--context",
        '{"customer":"Sam"}',
        "--message",
        "hi",
        "--state",
        str(state),
        cwd=workspace,
    )
    assert first.returncode == 0, first.stderr
    second = gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--message",
        "you there?",
        "--state",
        str(state),
        cwd=workspace,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Still here."
    saved = json.loads(state.read_text())
    assert [m["content"] for m in saved["messages"] if m["role"] == "user"] == ["hi", "you there?"]
    last_body = json.dumps(fake_server.requests[-1].body)
    assert last_body.count("gambit_context") >= 1 and "Hello Sam." in last_body


def test_run_streams_text_as_it_arrives(fake_server: FakeModelServer, workspace: Path, mode: str):
    fake_server.queue(Reply(deltas=["Hel", "lo ", "Sam", "!"], delay=0.05))
    result = gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--context",
        '{"customer":"Sam"}',
        "--stream",
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello Sam!\n"
    assert fake_server.requests[0].body["stream"] is True


def test_run_handles_action_errors_with_on_error(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(
        Reply(function_calls=[FunctionCall("lookup", {"order": "boom"})]),
        Reply(text="Sorry, try later."),
    )
    trace = workspace / "t.jsonl"
    result = gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--context",
        '{"customer":"Sam"}',
        "--trace",
        str(trace),
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    lookup = next(e for e in events if e["type"] == "tool.result" and e["name"] == "lookup")
    assert json.loads(lookup["result"])["code"] == "HANDLED"


def test_run_end_signal_prints_its_message(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(Reply(function_calls=[FunctionCall("gambit_end", {"message": "Goodbye."})]))
    result = gambit(
        fake_server, mode, "run", "bot/PROMPT.md", "--context", '{"customer":"Sam"}', cwd=workspace
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Goodbye."


def test_run_failure_mid_stream_keeps_state_and_trace(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(
        Reply(deltas=["partial ", "answer ", "then"], terminal="none", cut_after_bytes=None)
    )
    state, trace = workspace / "s.json", workspace / "t.jsonl"
    result = gambit(
        fake_server, mode, "run", "bot/PROMPT.md", "--context", '{"customer":"Sam"}', "--message", "hi", "--stream",
        "--state", str(state), "--trace", str(trace), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    assert "openrouter" in result.stderr
    assert "partial answer" in result.stdout
    saved = json.loads(state.read_text())
    assert [m["content"] for m in saved["messages"] if m["role"] == "user"] == ["hi"]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[-1]["type"] == "run.end" and events[-1]["status"] == "failed"
    assert (
        "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        == "partial answer then"
    )


def test_run_reports_invalid_context_in_one_line(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    result = gambit(
        fake_server, mode, "run", "bot/PROMPT.md", "--context", '{"customer": 3}', cwd=workspace
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "customer" in result.stderr
    assert fake_server.requests == []


def test_init_is_a_deprecated_alias(fake_server: FakeModelServer, workspace: Path, mode: str):
    fake_server.queue(Reply(text="ok"))
    result = gambit(
        fake_server, mode, "run", "bot/PROMPT.md", "--init", '{"customer":"Sam"}', cwd=workspace
    )
    assert result.returncode == 0 and "deprecated" in result.stderr
    assert '\\"customer\\":\\"Sam\\"' in json.dumps(fake_server.requests[0].body)


def test_run_verbose_prints_one_line_per_event(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(Reply(text="ok"))
    result = gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--context",
        '{"customer":"Sam"}',
        "--verbose",
        cwd=workspace,
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("[trace")]
    assert lines[0].split()[2] == "run.start" and lines[-1].split()[2] == "run.end"
    assert any(" model.call " in line for line in lines)


# ---- repl -----------------------------------------------------------------------------------


def test_repl_through_stdin(fake_server: FakeModelServer, workspace: Path, mode: str):
    fake_server.queue(
        Reply(text="Hi Sam, how can I help?"), Reply(deltas=["It ", "shipped."]), Reply(text="Bye!")
    )
    state = workspace / "s.json"
    result = gambit(
        fake_server, mode, "repl", "bot/PROMPT.md", "--context", '{"customer":"Sam"}', "--state", str(state),
        cwd=workspace, stdin="where is A1?\n\nthanks\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "assistant> Hi Sam, how can I help?",
        "assistant> It shipped.",
        "assistant> Bye!",
    ]
    saved = json.loads(state.read_text())
    assert [m["content"] for m in saved["messages"] if m["role"] == "user"] == [
        "where is A1?",
        "thanks",
    ]
    assert all(r.body.get("stream") for r in fake_server.requests)


# ---- scenario and grade -----------------------------------------------------------------------


def test_scenario_with_init_fill_and_graders(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(
        Reply(text='{"customer": "Sam"}'),  # persona fills the missing context
        Reply(text="Hello Sam, how can I help?"),  # the bot speaks first (startMode assistant)
        Reply(text="Where is my order A1?"),  # persona
        Reply(text="It has shipped."),  # bot
        Reply(text=""),  # persona is done
        *[
            respond_by_turn(
                {
                    "Hello Sam": respond(
                        {"score": 2, "reason": "friendly", "evidence": ["Hello Sam"]}
                    ),
                    "It has shipped": respond({"score": 3, "reason": "concrete"}),
                }
            )
        ]
        * 2,  # the turn grader, once per assistant message
        respond({"score": -1, "reason": "too short"}),  # conversation grader
    )
    state = workspace / "s.json"
    result = gambit(
        fake_server, mode, "scenario", "bot/PROMPT.md", "--scenario", "persona/PROMPT.md",
        "--grade", "graders/turn/PROMPT.md", "--grade", "graders/whole/PROMPT.md", "--state", str(state), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "assistant> Hello Sam, how can I help?" in result.stdout
    assert "user> Where is my order A1?" in result.stdout
    assert "persona done" in result.stdout and "after 1 persona turns" in result.stdout
    assert "(turns): +2.50" in result.stdout and "(conversation): -1.00" in result.stdout
    saved = json.loads(state.read_text())
    assert [m["content"] for m in saved["messages"] if m["role"] in ("user", "assistant") and m["content"]] == [
        "Hello Sam, how can I help?", "Where is my order A1?", "It has shipped.",
    ]  # fmt: skip
    runs = saved["meta"]["gradingRuns"]
    assert [r["mode"] for r in runs] == ["conversation", "turns"]
    turns = runs[1]
    assert [g["score"] for g in turns["results"]] == [2, 3] and turns["results"][0]["evidence"] == [
        "Hello Sam"
    ]
    assert all(g["messageRefId"].startswith("msg-") for g in turns["results"])
    assert saved["meta"]["scenarioRunId"].startswith("scenario-")
    assert model_paths(fake_server) == {expected_path(mode)}
    init_fill = json.dumps(fake_server.requests[0].body)
    assert "gambit_test_bot_init_fill" in init_fill and "customer" in init_fill


def test_scenario_stops_at_max_turns(fake_server: FakeModelServer, workspace: Path, mode: str):
    fake_server.queue(
        Reply(text="Hi"), Reply(text="Q1"), Reply(text="A1"), Reply(text="Q2"), Reply(text="A2")
    )
    result = gambit(
        fake_server, mode, "scenario", "bot/PROMPT.md", "--scenario", "persona/PROMPT.md", "--context", '{"customer":"Sam"}',
        "--max-turns", "2", "--state", str(workspace / "s.json"), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "max turns" in result.stdout and len(fake_server.requests) == 5


def test_scenario_input_reaches_the_persona_and_is_checked(
    fake_server: FakeModelServer, workspace: Path, mode: str
):
    fake_server.queue(Reply(text="Hi"), Reply(text="Q1"), Reply(text="A1"))
    result = gambit(
        fake_server, mode, "scenario", "bot/PROMPT.md", "--scenario", "persona/PROMPT.md", "--context", '{"customer":"Sam"}',
        "--scenario-input", "an impatient regular", "--max-turns", "1", "--state", str(workspace / "s.json"), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    persona_request = json.dumps(fake_server.requests[1].body)  # the bot spoke first
    assert "gambit_context" in persona_request and "an impatient regular" in persona_request
    assert "an impatient regular" not in json.dumps(fake_server.requests[0].body)
    # The persona's contextSchema (plain chat input: a string) refuses an object.
    fake_server.queue(Reply(text="Hi"))
    result = gambit(
        fake_server, mode, "scenario", "bot/PROMPT.md", "--scenario", "persona/PROMPT.md", "--context", '{"customer":"Sam"}',
        "--scenario-input", '{"mood": "calm"}', "--max-turns", "1", "--state", str(workspace / "t.json"), cwd=workspace,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Schema validation failed" in result.stderr and "Traceback" not in result.stderr


def test_grade_fail_under_gates_ci(fake_server: FakeModelServer, workspace: Path, mode: str):
    state = workspace / "s.json"
    fake_server.queue(Reply(text="Hello."))
    gambit(
        fake_server,
        mode,
        "run",
        "bot/PROMPT.md",
        "--context",
        '{"customer":"Sam"}',
        "--message",
        "hi",
        "--state",
        str(state),
        cwd=workspace,
    )
    fake_server.queue(respond({"score": -2, "reason": "rude"}))
    result = gambit(
        fake_server,
        mode,
        "grade",
        "graders/whole/PROMPT.md",
        "--state",
        str(state),
        "--fail-under",
        "0",
        cwd=workspace,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "error: mean score -2.00 is below --fail-under +0"
    assert "rude" in result.stdout
    saved = json.loads(state.read_text())
    assert saved["meta"]["gradingRuns"][0]["results"][0]["reason"] == "rude"
    fake_server.queue(respond({"score": 1, "reason": "fine"}))
    ok = gambit(
        fake_server,
        mode,
        "grade",
        "graders/whole/PROMPT.md",
        "--state",
        str(state),
        "--fail-under",
        "0",
        cwd=workspace,
    )
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(state.read_text())["meta"]["gradingRuns"]) == 2


def test_grade_missing_state_is_an_error(fake_server: FakeModelServer, workspace: Path, mode: str):
    result = gambit(
        fake_server, mode, "grade", "graders/whole/PROMPT.md", "--state", "nope.json", cwd=workspace
    )
    assert result.returncode == 1 and "nope.json" in result.stderr


def test_ctrl_c_cancels_the_run_and_keeps_what_arrived(
    fake_server: FakeModelServer, workspace: Path
):
    import signal
    import time

    fake_server.queue(Reply(deltas=["one ", "two ", "three ", "four"], delay=1.5))
    state, trace = workspace / "s.json", workspace / "t.jsonl"
    env = {**os.environ, **fake_server.env()}
    process = subprocess.Popen(
        [GAMBIT, "run", "bot/PROMPT.md", "--context", '{"customer":"Sam"}', "--message", "hi", "--stream",
         "--state", str(state), "--trace", str(trace)],
        cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "response.output_text.delta" not in (
        trace.read_text() if trace.exists() else ""
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 1
    assert stderr.strip().splitlines()[-1] == "error: run canceled"
    assert stdout.startswith("one ") and "four" not in stdout
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[-1]["type"] == "run.end" and events[-1]["status"] == "canceled"
    assert [
        m["content"] for m in json.loads(state.read_text())["messages"] if m["role"] == "user"
    ] == ["hi"]


def test_two_batches_started_in_the_same_second_get_folders_of_their_own(tmp_path, monkeypatch):
    from gambit.cli._common import timestamped_path

    monkeypatch.chdir(tmp_path)
    deck = Path("support/PROMPT.md")
    first, second = timestamped_path(deck, "verify"), timestamped_path(deck, "verify")
    assert first != second and first.is_dir() and second.is_dir()
    state = timestamped_path(deck, "sessions", ".json")
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("{}")
    assert timestamped_path(deck, "sessions", ".json") != state


def test_a_batch_refuses_state_rather_than_ignore_it(tmp_path):
    root = Path(__file__).resolve().parents[2] / "examples" / "support"
    result = subprocess.run(
        [GAMBIT, "scenario", str(root / "PROMPT.md"), "--scenario",
         str(root / "scenarios" / "late_delivery" / "PROMPT.md"), "--runs", "2",
         "--state", str(tmp_path / "s.json")],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--state resumes and saves one conversation" in result.stderr
    assert not (tmp_path / "s.json").exists() and not (tmp_path / ".gambit").exists()
