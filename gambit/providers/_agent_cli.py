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
from typing import Any

from gambit.core.provider import (
    CreateResponseResponse,
    ProviderError,
    ResponseEventEncoder,
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


class ResponseBuilder:
    """Builds the response item by item, sending the Open Responses stream events (from a
    `ResponseEventEncoder`, the shorter sequence of the offline providers) as it goes."""

    def __init__(self, model: str, on_stream_event: StreamEventCallback | None) -> None:
        self.model = model
        self.on_stream_event = on_stream_event
        self.response_id = new_id("resp")
        self.created_at = int(time.time())
        self.encoder = ResponseEventEncoder(full=False)
        self._message: int | None = None  # the open message's output index

    @property
    def output(self) -> list[dict[str, Any]]:
        return self.encoder.output

    async def _send(self, events: list[dict[str, Any]]) -> None:
        if self.on_stream_event is None:
            return
        for event in events:
            result = self.on_stream_event(event)
            if inspect.isawaitable(result):
                await result

    async def start(self) -> None:
        await self._send(self.encoder.created(self._resource("in_progress")))

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
        if self._message is None:
            self._message, opened = self.encoder.open_message({"id": new_id("msg")})
            await self._send(opened)
        await self._send(self.encoder.text_delta(self._message, delta))

    async def message_done(self, full_text: str | None = None) -> None:
        """Close the open message; `full_text` (when the agent reports it) wins over deltas."""
        if full_text and self._message is None:
            await self.text_delta(full_text)
        if self._message is None:
            return
        index, self._message = self._message, None
        await self._send(self.encoder.close(index, text=full_text))

    async def extension_item(self, item: dict[str, Any]) -> None:
        """A namespaced item (`codex:...`, `claude-code:...`): what the agent did."""
        await self.message_done()
        await self._send(
            self.encoder.item(
                {"id": item.get("id") or new_id("item"), "status": "completed", **item}
            )
        )

    async def finish(self, usage: ResponseUsage | None) -> CreateResponseResponse:
        await self.message_done()
        resource = self._resource("completed")
        if usage is not None:
            resource["usage"] = usage.to_dict() if hasattr(usage, "to_dict") else usage
        await self._send([self.encoder.terminal(resource)])
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
