"""What the coding-agent bridges share: run a CLI as a subprocess, read its JSON lines, and
turn what it did into an Open Responses response with streamed events.

The agent (Codex, Claude Code) runs its own tools; Gambit does not execute them. Its messages
become assistant `message` items and everything else it reports (commands, file changes,
tool uses) becomes namespaced extension items (`codex:command_execution`,
`claude-code:tool_use`, ...), so the trace shows what the agent did without the runtime
mistaking it for a function call to execute. Cancelling the call terminates the process
(SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gambit.core.provider import (
    CreateResponseResponse,
    ProviderError,
    ResponseUsage,
    StreamEventCallback,
    items_from_json,
    new_id,
)

KILL_GRACE_SECONDS = 3.0


def find_executable(name: str, env: Mapping[str, str], *, provider: str, setting: str) -> str:
    """The full path of `name`, or a ProviderError that says how to install or point at it."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise ProviderError(
            f"{provider}: the `{name}` executable was not found on PATH; install it, or set "
            f"{setting} to its full path",
            provider=provider,
            code="executable_not_found",
        )
    return found


async def json_lines(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    provider: str,
    stdin: bytes | None = None,
) -> AsyncIterator[dict[str, Any] | str]:
    """Yield each stdout line of `argv` (parsed JSON object, or the raw text when it is not).

    A non-zero exit raises ProviderError with the end of stderr; cancellation terminates the
    process and re-raises.
    """
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024,  # one JSON line can carry a whole file diff
        )
    except OSError as exc:
        raise ProviderError(
            f"{provider}: could not start {argv[0]}: {exc.strerror or exc}",
            provider=provider,
            code="executable_failed",
        ) from exc
    stderr_task = asyncio.create_task(process.stderr.read())  # type: ignore[union-attr]
    try:
        if stdin is not None:
            process.stdin.write(stdin)  # type: ignore[union-attr]
            await process.stdin.drain()  # type: ignore[union-attr]
            process.stdin.close()  # type: ignore[union-attr]
        assert process.stdout is not None
        async for raw in process.stdout:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                yield line
                continue
            yield value if isinstance(value, dict) else line
        code = await process.wait()
    except BaseException:
        await _terminate(process)
        stderr_task.cancel()
        raise
    stderr = (await stderr_task).decode("utf-8", errors="replace").strip()
    if code != 0:
        tail = stderr[-2000:] or "(no output on stderr)"
        raise ProviderError(
            f"{provider}: {os.path.basename(argv[0])} failed (exit {code}): {tail}",
            provider=provider,
            code="executable_failed",
        )


async def _terminate(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), KILL_GRACE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


@dataclass
class ResponseBuilder:
    """Builds the response item by item, emitting the Open Responses stream events as it goes."""

    model: str
    on_stream_event: StreamEventCallback | None
    response_id: str = field(default_factory=lambda: new_id("resp"))
    output: list[dict[str, Any]] = field(default_factory=list)
    sequence: int = 0
    created_at: int = field(default_factory=lambda: int(time.time()))
    _open_message: dict[str, Any] | None = None
    _pending: list[Any] = field(default_factory=list)

    async def _emit(self, type_: str, **fields: Any) -> None:
        if self.on_stream_event is None:
            return
        self.sequence += 1
        result = self.on_stream_event({"type": type_, "sequence_number": self.sequence, **fields})
        if inspect.isawaitable(result):
            await result

    async def start(self) -> None:
        await self._emit("response.created", response=self._resource("in_progress"))

    def _resource(self, status: str) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": list(self.output),
        }

    async def text_delta(self, delta: str) -> None:
        """Stream text into the open assistant message (opened on the first delta)."""
        if not delta:
            return
        message = await self._message()
        message["content"][0]["text"] += delta
        await self._emit(
            "response.output_text.delta",
            item_id=message["id"],
            output_index=len(self.output) - 1,
            content_index=0,
            delta=delta,
        )

    async def _message(self) -> dict[str, Any]:
        if self._open_message is None:
            message = {
                "type": "message",
                "id": new_id("msg"),
                "role": "assistant",
                "status": "in_progress",
                "content": [{"type": "output_text", "text": "", "annotations": []}],
            }
            self.output.append(message)
            self._open_message = message
            await self._emit(
                "response.output_item.added",
                output_index=len(self.output) - 1,
                item={**message, "content": []},
            )
        return self._open_message

    async def message_done(self, full_text: str | None = None) -> None:
        """Close the open message; `full_text` (when the agent reports it) wins over deltas."""
        if full_text is not None and self._open_message is None and full_text:
            await self.text_delta(full_text)
        message = self._open_message
        if message is None:
            return
        part = message["content"][0]
        if full_text is not None and full_text != part["text"]:
            part["text"] = full_text
        message["status"] = "completed"
        index = self.output.index(message)
        await self._emit(
            "response.output_text.done",
            item_id=message["id"],
            output_index=index,
            content_index=0,
            text=part["text"],
        )
        await self._emit("response.output_item.done", output_index=index, item=message)
        self._open_message = None

    async def extension_item(self, item: dict[str, Any]) -> None:
        """A namespaced item (`codex:...`, `claude-code:...`): what the agent did."""
        await self.message_done()
        item = {"id": item.get("id") or new_id("item"), "status": "completed", **item}
        self.output.append(item)
        index = len(self.output) - 1
        await self._emit("response.output_item.added", output_index=index, item=item)
        await self._emit("response.output_item.done", output_index=index, item=item)

    async def finish(self, usage: ResponseUsage | None) -> CreateResponseResponse:
        await self.message_done()
        resource = self._resource("completed")
        if usage is not None:
            resource["usage"] = usage.to_dict() if hasattr(usage, "to_dict") else usage
        await self._emit("response.completed", response=resource)
        return CreateResponseResponse(
            id=self.response_id,
            model=self.model,
            created=self.created_at,
            status="completed",
            output=items_from_json(self.output),
            usage=usage,
        )

    def partial_text(self) -> str:
        return "".join(
            part.get("text", "")
            for item in self.output
            if item.get("type") == "message"
            for part in item.get("content", [])
        )


def usage_of(
    input_tokens: Any,
    output_tokens: Any,
    *,
    cached: Any = None,
    reasoning: Any = None,
    cost: Any = None,
) -> ResponseUsage:
    def number(value: Any) -> int:
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    prompt, completion = number(input_tokens), number(output_tokens)
    data: dict[str, Any] = {
        "promptTokens": prompt,
        "completionTokens": completion,
        "totalTokens": prompt + completion,
    }
    if number(cached):
        data["cachedTokens"] = number(cached)
    if number(reasoning):
        data["reasoningTokens"] = number(reasoning)
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        data["costUsd"] = float(cost)
    return ResponseUsage.model_validate(data)


def passthrough_env(env: Mapping[str, str], prefixes: Sequence[str]) -> dict[str, str]:
    """The variables an agent CLI needs (PATH, HOME, locale, proxies, CA bundles, its own)."""
    keep = {"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL"}
    ca = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
    out = {}
    for key, value in env.items():
        upper = key.upper()
        if (
            key in keep
            or key in ca
            or upper.endswith("_PROXY")
            or any(key.startswith(p) for p in prefixes)
        ):
            out[key] = value
    return out
