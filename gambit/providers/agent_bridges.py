"""`codex-cli/` and `claude-code-cli/`: coding agents run as subprocesses (the stdlib
bridge decks `gambit://decks/openai/codex-sdk/PROMPT.md` and
`gambit://decks/anthropic/agent-sdk/PROMPT.md` use them as their models; docs/decisions.md,
"Agent bridges (stdlib decks)").

- **Codex**: `codex exec --json [--model M] [-c key=value ...] PROMPT` (or `codex exec resume
  THREAD_ID --json PROMPT` to continue), whose JSON Lines events (`thread.started`,
  `item.started` / `item.updated` / `item.completed` for agent messages, reasoning, command
  executions, file changes, MCP tool calls, web searches, todo lists; `turn.completed` with
  usage; `turn.failed` / `error`) become Open Responses items. The thread id is kept in
  `state.meta["codex.threadId"]`.
- **Claude Code**: `claude --print --verbose --output-format stream-json
  --include-partial-messages --permission-mode MODE [--model M] [--resume SESSION]
  [--append-system-prompt INSTRUCTIONS] PROMPT`; text deltas stream as they come, tool uses
  and results become `claude-code:` items, the `result` line gives usage and cost. The
  session id is kept in `state.meta["claudeCode.sessionId"]`.

A continued conversation sends only the latest user message (the agent keeps the history
in its own thread); a fresh one sends the whole conversation as `ROLE:` blocks. The deck's
instructions go to Codex as `developer_instructions` and to Claude Code as an appended
system prompt. Executables come from `GAMBIT_CODEX_BIN` / `GAMBIT_CLAUDE_CODE_BIN`, else
`codex` / `claude` on PATH; a missing one is a clear error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from gambit.core.provider import (
    BaseProvider,
    CreateResponseRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ProviderCall,
    ProviderError,
    ProviderResponse,
    ResponseUsage,
    SavedState,
    item_text,
)

from ._agent_cli import ResponseBuilder, find_executable, json_lines, passthrough_env, usage_of

__all__ = ["ClaudeCodeProvider", "CodexCliProvider"]


def _conversation(request: CreateResponseRequest) -> tuple[str, list[tuple[str, str]]]:
    """(instructions, [(role, text)]) from the request's items."""
    instructions = [request.instructions] if request.instructions else []
    turns: list[tuple[str, str]] = []
    for item in request.input:
        if isinstance(item, MessageItem):
            text = item_text(item)
            if item.role == "system":
                instructions.append(text)
            elif text:
                turns.append((item.role, text))
        elif isinstance(item, FunctionCallOutputItem):
            turns.append(("context", item.output))
        elif isinstance(item, FunctionCallItem) and item.name != "gambit_context":
            turns.append(("assistant", f"(called {item.name} with {item.arguments})"))
    return "\n\n".join(i for i in instructions if i), turns


def _prompt(turns: list[tuple[str, str]], resuming: bool) -> str:
    users = [text for role, text in turns if role == "user"]
    if resuming and users:
        return users[-1]
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1]
    return "\n\n".join(f"{role.upper()}:\n{text}" for role, text in turns) or "Begin."


def _model(request: CreateResponseRequest, prefix: str) -> str | None:
    name = request.model.removeprefix(prefix + "/")
    return None if name in ("", "default", prefix) else name


def _cwd(deck_path: str | None, env: Mapping[str, str]) -> str | None:
    root = env.get("GAMBIT_BOT_ROOT")
    if root and deck_path and Path(deck_path).resolve().is_relative_to(Path(root).resolve()):
        return root
    folder = Path(deck_path).parent if deck_path else None
    return str(folder) if folder is not None and folder.is_dir() else None


def _with_meta(state: SavedState | None, key: str, value: str | None) -> SavedState | None:
    if state is None or value is None:
        return None
    updated = state.model_copy()
    updated.meta = {**(state.meta or {}), key: value}
    return updated


@dataclass
class _AgentRun:
    """One run of an agent: what it is asked (the deck's instructions, the conversation's
    turns) and what it has told so far: its conversation id (to resume, from the state at
    first), its usage, the text of each message it streams (Codex) and whether text is
    streaming (Claude Code)."""

    instructions: str
    turns: list[tuple[str, str]]
    resume: Any
    usage: ResponseUsage | None = None
    texts: dict[str, str] = field(default_factory=dict)
    streamed: bool = False


class _AgentBridge(BaseProvider):
    name = ""  # also the routing prefix (`codex-cli/<model>`)
    offline = False
    binary_env = ""
    default_binary = ""
    env_prefixes: tuple[str, ...] = ()
    meta_key = ""  # the key of the agent's conversation id in the state's meta

    def __init__(self, *, env: Mapping[str, str] | None = None, binary: str | None = None):
        self.env = dict(env or {})
        self.binary = binary or self.env.get(self.binary_env) or self.default_binary

    @classmethod
    def from_env(cls, env: Mapping[str, str], **_: Any) -> Self:
        return cls(env=env)

    def _executable(self) -> str:
        if "/" in self.binary:
            if not Path(self.binary).is_file():
                raise ProviderError(
                    f"{self.name}: {self.binary} (from {self.binary_env}) does not exist",
                    provider=self.name,
                    code="executable_not_found",
                )
            return self.binary
        return find_executable(self.binary, self.env, provider=self.name, setting=self.binary_env)

    async def execute(self, call: ProviderCall) -> ProviderResponse:
        """Run the agent once over the conversation (resuming its own conversation when the
        state holds its id) and build the response from its JSON lines (`_on_event`)."""
        request, state = call.request, call.state
        run = _AgentRun(
            *_conversation(request),
            resume=(state.meta or {}).get(self.meta_key) if state is not None else None,
        )
        argv = [*self._argv(self._executable(), request, run), _prompt(run.turns, bool(run.resume))]
        builder = ResponseBuilder(request.model, call.on_event)
        await builder.start()
        async for event in json_lines(
            argv,
            cwd=_cwd(call.deck_path, self.env),
            env=passthrough_env(self.env, self.env_prefixes),
            provider=self.name,
        ):
            if isinstance(event, dict):
                await self._on_event(event, builder, run)
        response = await builder.finish(run.usage)
        return ProviderResponse(response, _with_meta(state, self.meta_key, run.resume))

    def _argv(self, executable: str, request: CreateResponseRequest, run: _AgentRun) -> list[str]:
        """The agent's command line for `run` but the prompt (`execute` adds it last); it
        resumes the agent's own conversation when `run.resume` is set."""
        raise NotImplementedError

    async def _on_event(self, event: dict[str, Any], out: ResponseBuilder, run: _AgentRun) -> None:
        """Take one of the agent's JSON lines into the response."""
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class CodexCliProvider(_AgentBridge):
    """`codex-cli/<model>` (or `codex-cli/default`): the Codex CLI's `exec --json` mode."""

    name = "codex-cli"
    binary_env = "GAMBIT_CODEX_BIN"
    default_binary = "codex"
    env_prefixes = ("CODEX_", "OPENAI_", "GAMBIT_CODEX_")
    meta_key = "codex.threadId"

    def _argv(self, executable: str, request: CreateResponseRequest, run: _AgentRun) -> list[str]:
        argv = [executable, "exec"]
        if run.resume:
            argv += ["resume", str(run.resume)]
        argv += ["--json", "--skip-git-repo-check"]
        model = _model(request, self.name)
        if model:
            argv += ["--model", model]
        if run.instructions and not run.resume:
            argv += ["-c", f"developer_instructions={json.dumps(run.instructions)}"]
        for key, value in ((request.params or {}).get("codex") or {}).items():
            argv += ["-c", f"{key}={json.dumps(value)}"]
        return argv

    async def _on_event(self, event: dict[str, Any], out: ResponseBuilder, run: _AgentRun) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            run.resume = event.get("thread_id") or run.resume
        elif kind in ("item.updated", "item.completed"):
            item = event.get("item") or {}
            item_type = item.get("type") or item.get("item_type")
            if item_type in ("agent_message", "assistant_message"):
                text = item.get("text") or ""
                shown = run.texts.get(item.get("id", ""), "")
                if text.startswith(shown):
                    await out.text_delta(text[len(shown) :])
                run.texts[item.get("id", "")] = text
                if kind == "item.completed":
                    await out.message_done(text)
            elif kind == "item.completed" and item_type:
                data = {k: v for k, v in item.items() if k not in ("type", "item_type")}
                await out.extension_item({"type": f"codex:{item_type}", **data})
        elif kind == "turn.completed":
            raw = event.get("usage") or {}
            run.usage = usage_of(
                raw.get("input_tokens"),
                raw.get("output_tokens"),
                cached=raw.get("cached_input_tokens"),
                reasoning=raw.get("reasoning_output_tokens"),
            )
        elif kind in ("turn.failed", "error"):
            error = event.get("error")
            error = error if isinstance(error, dict) else event
            raise ProviderError(
                f"codex-cli: {error.get('message') or 'the turn failed'}",
                provider=self.name,
                code="agent_failed",
                partial_text=out.partial_text(),
            )


class ClaudeCodeProvider(_AgentBridge):
    """`claude-code-cli/<model>` (or `/default`): Claude Code's `--print` stream-json mode."""

    name = "claude-code-cli"
    binary_env = "GAMBIT_CLAUDE_CODE_BIN"
    default_binary = "claude"
    env_prefixes = ("ANTHROPIC_", "CLAUDE_", "GAMBIT_CLAUDE_CODE_")
    meta_key = "claudeCode.sessionId"

    def _argv(self, executable: str, request: CreateResponseRequest, run: _AgentRun) -> list[str]:
        # "default" asks before risky tools (and so declines them in --print mode); a user
        # who wants the agent to edit freely sets bypassPermissions or acceptEdits.
        mode = self.env.get("GAMBIT_CLAUDE_CODE_PERMISSION_MODE") or "default"
        argv = [
            executable,
            "--print",
            "--verbose",
            "--output-format",
            "stream-json",
            "--include-partial-messages",
            "--permission-mode",
            mode,
        ]
        model = _model(request, self.name)
        if model:
            argv += ["--model", model]
        if run.resume:
            argv += ["--resume", str(run.resume)]
        elif run.instructions:
            argv += ["--append-system-prompt", run.instructions]
        return argv

    async def _on_event(self, event: dict[str, Any], out: ResponseBuilder, run: _AgentRun) -> None:
        kind = event.get("type")
        run.resume = event.get("session_id") or run.resume
        if kind == "stream_event":
            inner = event.get("event") or {}
            delta = inner.get("delta") or {}
            if inner.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                run.streamed = True
                await out.text_delta(delta.get("text", ""))
        elif kind == "assistant":
            for block in (event.get("message") or {}).get("content") or []:
                if block.get("type") == "text":
                    await out.message_done(block.get("text", "") if not run.streamed else None)
                    run.streamed = False
                elif block.get("type") == "tool_use":
                    await out.extension_item(
                        {
                            "type": "claude-code:tool_use",
                            "id": block.get("id"),
                            "name": block.get("name"),
                            "input": block.get("input"),
                        }
                    )
        elif kind == "user":
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    await out.extension_item(
                        {
                            "type": "claude-code:tool_result",
                            "tool_use_id": block.get("tool_use_id"),
                            "content": block.get("content"),
                            "is_error": bool(block.get("is_error")),
                        }
                    )
        elif kind == "result":
            raw = event.get("usage") or {}
            run.usage = usage_of(
                (raw.get("input_tokens") or 0) + (raw.get("cache_creation_input_tokens") or 0),
                raw.get("output_tokens"),
                cached=raw.get("cache_read_input_tokens"),
                cost=event.get("total_cost_usd"),
            )
            if event.get("is_error") or event.get("subtype") not in (None, "success"):
                raise ProviderError(
                    f"claude-code-cli: {event.get('result') or event.get('subtype') or 'the run failed'}",
                    provider=self.name,
                    code="agent_failed",
                    partial_text=out.partial_text(),
                )
            if not out.output and isinstance(event.get("result"), str):
                await out.message_done(event["result"])
