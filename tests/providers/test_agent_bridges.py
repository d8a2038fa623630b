"""The Codex CLI and Claude Code bridges against fake executables that replay recorded event
streams (real subprocesses, real pipes), and the bundled stdlib decks that use them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from gambit.core import load_deck_tree, new_state, run_deck
from gambit.core._openresponses import CreateResponseRequest, message_item
from gambit.core._provider import ProviderError
from gambit.providers.agent_bridges import ClaudeCodeProvider, CodexCliProvider

CODEX_EVENTS = [
    {"type": "thread.started", "thread_id": "th_123"},
    {"type": "turn.started"},
    {
        "type": "item.started",
        "item": {
            "id": "item_0",
            "type": "command_execution",
            "command": "ls",
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_0",
            "type": "command_execution",
            "command": "ls",
            "aggregated_output": "PROMPT.md\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {"type": "item.updated", "item": {"id": "item_1", "type": "agent_message", "text": "Listed "}},
    {
        "type": "item.completed",
        "item": {"id": "item_1", "type": "agent_message", "text": "Listed the folder."},
    },
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 120, "cached_input_tokens": 20, "output_tokens": 30},
    },
]

CLAUDE_EVENTS = [
    {"type": "system", "subtype": "init", "session_id": "sess-9", "tools": ["Read"]},
    {
        "type": "stream_event",
        "event": {
            "type": "content_block_delta",
            "delta": {"type": "text_delta", "text": "Reading "},
        },
        "session_id": "sess-9",
    },
    {
        "type": "stream_event",
        "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "it."}},
        "session_id": "sess-9",
    },
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "tu_1", "name": "Read", "input": {"file_path": "a.md"}},
            ]
        },
        "session_id": "sess-9",
    },
    {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "# A"}]},
        "session_id": "sess-9",
    },
    {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "It is a heading."}]},
        "session_id": "sess-9",
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "It is a heading.",
        "session_id": "sess-9",
        "total_cost_usd": 0.0123,
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
            "output_tokens": 7,
        },
    },
]


def fake_executable(
    folder: Path,
    name: str,
    events: list,
    *,
    exit_code: int = 0,
    stderr: str = "",
    hang: bool = False,
) -> Path:
    """A program that records its argv and pid, then prints `events` as JSON lines."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.events.json").write_text(json.dumps(events))
    script = folder / name
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, os, sys, time
            here = os.path.dirname(os.path.abspath(__file__))
            with open(os.path.join(here, "{name}.argv.json"), "w") as f:
                json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid(),
                           "env": sorted(os.environ)}}, f)
            for event in json.load(open(os.path.join(here, "{name}.events.json"))):
                print(json.dumps(event), flush=True)
            if {hang!r}:
                time.sleep(60)
            sys.stderr.write({stderr!r})
            sys.exit({exit_code})
            """
        )
    )
    script.chmod(0o755)
    return script


def recorded(script: Path) -> dict:
    return json.loads(script.with_name(script.name + ".argv.json").read_text())


def request(model: str, *texts: str, instructions: str | None = None) -> CreateResponseRequest:
    items = [message_item("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
    return CreateResponseRequest(model=model, input=items, instructions=instructions)


async def test_codex_maps_its_items_usage_and_thread(tmp_path: Path):
    codex = fake_executable(tmp_path / "bin", "codex", CODEX_EVENTS)
    provider = CodexCliProvider(
        env={"PATH": str(codex.parent), "SECRET": "x", "OPENAI_API_KEY": "k"}
    )
    events: list[dict] = []
    result = await provider.responses(
        request("codex-cli/gpt-5-codex", "List the folder", instructions="Be brief."),
        state=new_state(),
        deck_path=str(tmp_path / "deck" / "PROMPT.md"),
        on_stream_event=events.append,
    )
    response = result.response
    kinds = [item.type for item in response.output]
    assert kinds == ["codex:command_execution", "message"]
    assert response.output[0].model_extra["aggregated_output"] == "PROMPT.md\n"
    assert response.output[1].content[0].text == "Listed the folder."
    assert response.usage.prompt_tokens == 120 and response.usage.cached_tokens == 20
    assert result.updated_state.meta["codex.threadId"] == "th_123"
    seen = recorded(codex)
    assert seen["argv"][:3] == ["exec", "--json", "--skip-git-repo-check"]
    assert seen["argv"][3:5] == ["--model", "gpt-5-codex"]
    assert 'developer_instructions="Be brief."' in seen["argv"]
    assert seen["argv"][-1] == "List the folder"
    assert "SECRET" not in seen["env"] and "OPENAI_API_KEY" in seen["env"]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Listed the folder."
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(1, len(events) + 1))


async def test_codex_resumes_its_thread_with_only_the_new_message(tmp_path: Path):
    codex = fake_executable(tmp_path, "codex", CODEX_EVENTS)
    state = new_state()
    state.meta = {"codex.threadId": "th_old"}
    await CodexCliProvider(env={"PATH": str(tmp_path)}).responses(
        request("codex-cli/default", "first", "ok", "second"), state=state
    )
    argv = recorded(codex)["argv"]
    assert argv[:3] == ["exec", "resume", "th_old"] and argv[-1] == "second"
    assert "--model" not in argv


async def test_codex_failure_keeps_the_partial_text(tmp_path: Path):
    failing = [*CODEX_EVENTS[:5], {"type": "turn.failed", "error": {"message": "quota exceeded"}}]
    fake_executable(tmp_path, "codex", failing)
    with pytest.raises(ProviderError, match="codex-cli: quota exceeded") as info:
        await CodexCliProvider(env={"PATH": str(tmp_path)}).responses(
            request("codex-cli/default", "go"), on_stream_event=lambda e: None
        )
    assert info.value.partial_text == "Listed "


async def test_claude_streams_text_and_records_tools_cost_and_session(tmp_path: Path):
    claude = fake_executable(tmp_path, "claude", CLAUDE_EVENTS)
    events: list[dict] = []
    result = await ClaudeCodeProvider(env={"PATH": str(tmp_path)}).responses(
        request("claude-code-cli/default", "What is a.md?", instructions="Answer briefly."),
        state=new_state(),
        on_stream_event=events.append,
    )
    output = result.response.output
    assert [i.type for i in output] == [
        "message",
        "claude-code:tool_use",
        "claude-code:tool_result",
        "message",
    ]
    assert output[0].content[0].text == "Reading it."
    assert output[3].content[0].text == "It is a heading."
    assert output[1].model_extra["name"] == "Read"
    usage = result.response.usage
    assert usage.prompt_tokens == 15 and usage.cached_tokens == 100 and usage.completion_tokens == 7
    assert usage.model_extra["costUsd"] == pytest.approx(0.0123)
    assert result.updated_state.meta["claudeCode.sessionId"] == "sess-9"
    argv = recorded(claude)["argv"]
    assert argv[:8] == [
        "--print", "--verbose", "--output-format", "stream-json",
        "--include-partial-messages", "--permission-mode", "default", "--append-system-prompt",
    ]  # fmt: skip
    assert argv[-1] == "What is a.md?"
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas[:2] == ["Reading ", "it."]


async def test_claude_resume_and_an_error_result(tmp_path: Path):
    error = [{"type": "result", "subtype": "error_max_turns", "is_error": True, "session_id": "s"}]
    claude = fake_executable(tmp_path, "claude", error)
    state = new_state()
    state.meta = {"claudeCode.sessionId": "sess-1"}
    with pytest.raises(ProviderError, match="claude-code-cli: error_max_turns"):
        await ClaudeCodeProvider(env={"PATH": str(tmp_path)}).responses(
            request("claude-code-cli/opus", "a", "b", "c"), state=state
        )
    argv = recorded(claude)["argv"]
    assert "--resume" in argv and argv[argv.index("--resume") + 1] == "sess-1"
    assert argv[-1] == "c" and "--append-system-prompt" not in argv


async def test_a_missing_executable_is_named(tmp_path: Path):
    with pytest.raises(
        ProviderError, match=r"the `codex` executable was not found on PATH.*GAMBIT_CODEX_BIN"
    ):
        await CodexCliProvider(env={"PATH": str(tmp_path)}).responses(request("codex-cli/x", "hi"))
    with pytest.raises(ProviderError, match="does not exist"):
        await ClaudeCodeProvider(
            env={"GAMBIT_CLAUDE_CODE_BIN": str(tmp_path / "nope" / "claude")}
        ).responses(request("claude-code-cli/x", "hi"))


async def test_a_crash_reports_stderr(tmp_path: Path):
    fake_executable(tmp_path, "claude", [], exit_code=3, stderr="not logged in")
    with pytest.raises(ProviderError, match=r"claude failed \(exit 3\): not logged in"):
        await ClaudeCodeProvider(env={"PATH": str(tmp_path)}).responses(
            request("claude-code-cli/x", "hi")
        )


async def test_cancelling_terminates_the_agent(tmp_path: Path):
    codex = fake_executable(tmp_path, "codex", CODEX_EVENTS[:2], hang=True)
    task = asyncio.create_task(
        CodexCliProvider(env={"PATH": str(tmp_path)}).responses(request("codex-cli/x", "go"))
    )
    for _ in range(200):
        await asyncio.sleep(0.02)
        if codex.with_name("codex.argv.json").exists():
            break
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = recorded(codex)["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_the_stdlib_bridge_decks_load_and_run(tmp_path: Path):
    fake_executable(tmp_path / "bin", "claude", CLAUDE_EVENTS)
    deck = tmp_path / "root" / "PROMPT.md"
    deck.parent.mkdir()
    deck.write_text(
        textwrap.dedent(
            """\
            +++
            [modelParams]
            model = "claude-code-cli/default"
            [[actions]]
            name = "codex"
            description = "Delegate a coding task"
            path = "gambit://decks/openai/codex-sdk/PROMPT.md"
            [[actions]]
            name = "claude"
            description = "Delegate a coding task"
            path = "gambit://decks/anthropic/agent-sdk/PROMPT.md"
            +++
            Delegate.
            """
        )
    )
    tree = load_deck_tree(deck)
    bridges = sorted(
        p for p in tree.decks if "gambit" in p and p.endswith("PROMPT.md") and p != str(deck)
    )
    assert any(p.endswith("openai/codex-sdk/PROMPT.md") for p in bridges)
    agent = load_deck_tree(next(p for p in bridges if p.endswith("anthropic/agent-sdk/PROMPT.md")))
    assert agent.root.model_params.models == ["claude-code-cli/default"]
    result = await run_deck(
        agent,
        provider=ClaudeCodeProvider(env={"PATH": str(tmp_path / "bin")}),
        context="What is a.md?",
    )
    assert result.output == "Reading it.It is a heading."


async def test_the_router_routes_the_bridge_prefixes_and_names_a_missing_executable(tmp_path: Path):
    from gambit.core import ModelNotAvailableError
    from gambit.providers import ProviderRouter

    empty = ProviderRouter(env={"PATH": str(tmp_path / "nothing")})
    with pytest.raises(
        ModelNotAvailableError,
        match=r"`codex` is not on PATH \(install it or set GAMBIT_CODEX_BIN\)",
    ):
        empty.resolve_model("codex-cli/default", params=None, deck_path="d")
    fake_executable(tmp_path / "bin", "claude", CLAUDE_EVENTS)
    router = ProviderRouter(env={"PATH": str(tmp_path / "bin")})
    resolved = router.resolve_model("claude-code-cli/default", params=None, deck_path="d")
    assert isinstance(resolved.provider, ClaudeCodeProvider)
    result = await resolved.provider.responses(request("claude-code-cli/default", "hi"))
    assert result.response.output[-1].content[0].text == "It is a heading."
