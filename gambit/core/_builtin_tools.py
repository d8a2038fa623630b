"""The built-in workspace tools: `read_file`, `list_dir`, `grep_files`, `apply_patch`, `exec`.

Offered to a deck only when its effective permissions grant what they need (reference §2.5):
read → `read_file`, `list_dir`, `grep_files`; write → `apply_patch`; run → `exec`. Every call
is checked again against the same permissions; a denied call is a tool result with status
403, code `permission_denied` and a message naming the permission that is missing, and the
run goes on. Results are the envelope fields `{status, payload}` or `{status, code, message}`.

`exec` runs the program directly (no shell), with only the environment variables the `env`
permission grants (taken from the `host_env` the caller passes: the engine reads no
environment of its own), and a timeout capped by the run's remaining time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._permissions import PermissionSet

READ_TOOLS = ("read_file", "list_dir", "grep_files")
BUILTIN_TOOL_NAMES = (*READ_TOOLS, "apply_patch", "exec")
OUTPUT_LIMIT = 65_536
MAX_READ_BYTES = 2_000_000


def _closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TOOL_DEFINITIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a UTF-8 text file.",
        _closed(
            {
                "path": {"type": "string"},
                "start_line": {"type": "number"},
                "end_line": {"type": "number"},
            },
            ["path"],
        ),
    ),
    "list_dir": (
        "List directory entries.",
        _closed(
            {
                "path": {"type": "string"},
                "recursive": {"type": "boolean"},
                "max_entries": {"type": "number"},
            },
            ["path"],
        ),
    ),
    "grep_files": (
        "Search text files using a regular expression.",
        _closed(
            {
                "path": {"type": "string"},
                "query": {"type": "string"},
                "max_matches": {"type": "number"},
            },
            ["path", "query"],
        ),
    ),
    "apply_patch": (
        "Apply text replacements to a file using old/new edit pairs.",
        _closed(
            {
                "path": {"type": "string"},
                "edits": {
                    "type": "array",
                    "items": _closed(
                        {
                            "old_text": {"type": "string"},
                            "new_text": {"type": "string"},
                            "replace_all": {"type": "boolean"},
                        },
                        ["old_text", "new_text"],
                    ),
                },
                "create_if_missing": {"type": "boolean"},
            },
            ["path", "edits"],
        ),
    ),
    "exec": (
        "Run an allowed command with optional args.",
        _closed(
            {
                "command": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}},
                "cwd": {"type": "string"},
                "timeout_ms": {"type": "number"},
            },
            ["command"],
        ),
    ),
}


def offered_tools(permissions: PermissionSet) -> list[str]:
    """The built-in tools these permissions allow, in the reference order."""
    names: list[str] = []
    if not permissions.read.empty:
        names.extend(READ_TOOLS)
    if not permissions.write.empty:
        names.append("apply_patch")
    if not permissions.run.empty:
        names.append("exec")
    return names


def tool_definition(name: str) -> dict[str, Any]:
    """`{name, description, parameters}` for one built-in tool."""
    description, parameters = TOOL_DEFINITIONS[name]
    return {"name": name, "description": description, "parameters": parameters}


def _ok(payload: Any) -> dict[str, Any]:
    return {"status": 200, "payload": payload}


def _error(status: int, code: str, message: str) -> dict[str, Any]:
    return {"status": status, "code": code, "message": message}


def _denied(tool: str, kind: str, path: Path | str) -> dict[str, Any]:
    return _error(
        403,
        "permission_denied",
        f"{tool} denied for {path}: the deck's [permissions] do not grant {kind} there",
    )


def _int_in(value: Any, low: int, high: int, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return default
    return max(low, min(high, int(value)))


async def call_builtin_tool(
    name: str,
    args: Any,
    permissions: PermissionSet,
    *,
    host_env: Mapping[str, str] | None = None,
    remaining_seconds: float | None = None,
) -> dict[str, Any]:
    """Run one built-in tool call under `permissions`; never raises for a bad call."""
    if name not in BUILTIN_TOOL_NAMES:
        return _error(404, "unknown_tool", f"{name} is not a built-in tool")
    if name not in offered_tools(permissions):
        kind = {"apply_patch": "write", "exec": "run"}.get(name, "read")
        return _error(
            403,
            "permission_denied",
            f"{name} denied: the deck's [permissions] grant no {kind} access",
        )
    args = args if isinstance(args, dict) else {}
    try:
        if name == "read_file":
            return await asyncio.to_thread(_read_file, args, permissions)
        if name == "list_dir":
            return await asyncio.to_thread(_list_dir, args, permissions)
        if name == "grep_files":
            return await asyncio.to_thread(_grep_files, args, permissions)
        if name == "apply_patch":
            return await asyncio.to_thread(_apply_patch, args, permissions)
        return await _exec(args, permissions, host_env or {}, remaining_seconds)
    except OSError as exc:
        return _error(500, "io_error", f"{name} failed: {exc.strerror or exc}")


def _path_arg(args: dict[str, Any]) -> str | None:
    path = args.get("path")
    return path if isinstance(path, str) and path.strip() else None


def _read_file(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    raw = _path_arg(args)
    if raw is None:
        return _error(400, "invalid_input", "path is required")
    path = perms.resolve(raw)
    if not perms.can_read(path):
        return _denied("read_file", "read", path)
    if not path.is_file():
        return _error(404, "not_found", f"file not found: {path}")
    data = path.read_bytes()[:MAX_READ_BYTES]
    lines = re.split(r"\r?\n", data.decode("utf-8", errors="replace"))
    start = _int_in(args.get("start_line"), 1, 10**9, 1)
    end = max(start, _int_in(args.get("end_line"), 1, 10**9, start + 399))
    return _ok(
        {
            "path": str(path),
            "start_line": start,
            "end_line": end,
            "total_lines": len(lines),
            "content": "\n".join(lines[start - 1 : end]),
        }
    )


def _list_dir(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    raw = _path_arg(args)
    if raw is None:
        return _error(400, "invalid_input", "path is required")
    root = perms.resolve(raw)
    if not perms.can_read(root):
        return _denied("list_dir", "read", root)
    if not root.is_dir():
        return _error(404, "not_found", f"directory not found: {root}")
    limit = _int_in(args.get("max_entries"), 1, 2000, 200)
    recursive = args.get("recursive") is True
    entries: list[dict[str, str]] = []
    stack = [root]
    while stack and len(entries) < limit:
        folder = stack.pop()
        with contextlib.suppress(OSError):
            for child in sorted(folder.iterdir(), key=lambda p: p.name, reverse=True):
                if len(entries) >= limit:
                    break
                if not perms.can_read(child):
                    continue
                kind = "symlink" if child.is_symlink() else "dir" if child.is_dir() else "file"
                entries.append({"path": str(child), "type": kind})
                if kind == "dir" and recursive:
                    stack.append(child)
    return _ok(
        {
            "path": str(root),
            "recursive": recursive,
            "entries": entries,
            "truncated": len(entries) >= limit,
        }
    )


def _grep_files(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    raw = _path_arg(args)
    if raw is None:
        return _error(400, "invalid_input", "path is required")
    query = args.get("query")
    if not isinstance(query, str) or not query:
        return _error(400, "invalid_input", "query is required")
    try:
        pattern = re.compile(query)
    except re.error as exc:
        return _error(400, "invalid_regex", f"invalid regular expression: {exc}")
    root = perms.resolve(raw)
    if not perms.can_read(root):
        return _denied("grep_files", "read", root)
    limit = _int_in(args.get("max_matches"), 1, 2000, 200)
    matches: list[dict[str, Any]] = []
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for file in files:
        if len(matches) >= limit:
            break
        if not perms.can_read(file):
            continue
        try:
            text = file.read_bytes()[:MAX_READ_BYTES].decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # unreadable or not text
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                matches.append({"path": str(file), "line": number, "text": line[:1000]})
                if len(matches) >= limit:
                    break
    return _ok(
        {"path": str(root), "query": query, "matches": matches, "truncated": len(matches) >= limit}
    )


def _apply_patch(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    raw = _path_arg(args)
    if raw is None:
        return _error(400, "invalid_input", "path is required")
    edits = [
        e
        for e in args.get("edits") or []
        if isinstance(e, dict)
        and isinstance(e.get("old_text"), str)
        and isinstance(e.get("new_text"), str)
    ]
    if not edits:
        return _error(
            400, "invalid_input", "edits must include at least one old_text/new_text pair"
        )
    path = perms.resolve(raw)
    if not perms.can_write(path):
        return _denied("apply_patch", "write", path)
    if not perms.can_read(path):
        return _error(
            403,
            "permission_denied",
            f"apply_patch read denied for {path}: the deck's [permissions] do not grant read there",
        )
    created = False
    if path.is_file():
        text = path.read_text(encoding="utf-8")
    elif args.get("create_if_missing") is True:
        text, created = "", True
    else:
        return _error(404, "not_found", f"file not found: {path}")
    applied = 0
    for edit in edits:
        old, new = edit["old_text"], edit["new_text"]
        if not old or old not in text:
            continue
        text = (
            text.replace(old, new) if edit.get("replace_all") is True else text.replace(old, new, 1)
        )
        applied += 1
    if applied == 0 and not created:
        return _error(409, "no_changes", f"No edit targets were found in {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.gambit-tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)  # atomic: a reader never sees half a file
    return _ok({"path": str(path), "applied": applied, "created": created})


async def _exec(
    args: dict[str, Any],
    perms: PermissionSet,
    host_env: Mapping[str, str],
    remaining_seconds: float | None,
) -> dict[str, Any]:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return _error(400, "invalid_input", "command is required")
    command = command.strip()
    is_path = "/" in command
    if is_path:
        target = perms.resolve(command)
        if not perms.can_run_path(target):
            return _error(
                403,
                "permission_denied",
                f"exec denied for command {command}: not in [permissions.run] paths",
            )
        program = str(target)
    else:
        if not perms.can_run_command(command):
            return _error(
                403,
                "permission_denied",
                f"exec denied for command {command}: not in [permissions.run] commands",
            )
        found = shutil.which(command, path=host_env.get("PATH", os.defpath))
        if found is None:
            return _error(404, "not_found", f"command not found: {command}")
        program = found
    cwd = Path(perms.base_dir)
    if isinstance(args.get("cwd"), str) and args["cwd"].strip():
        cwd = perms.resolve(args["cwd"])
        if not perms.can_read(cwd):  # an explicit folder must be one the deck may read
            return _denied("exec", "read", cwd)
    if not cwd.is_dir():
        return _error(404, "not_found", f"directory not found: {cwd}")
    argv = [a for a in args.get("args") or [] if isinstance(a, str)]
    timeout = _int_in(args.get("timeout_ms"), 1, 30_000, 5_000) / 1000
    if remaining_seconds is not None:
        timeout = max(0.001, min(timeout, remaining_seconds))
    env = {k: v for k, v in host_env.items() if perms.can_read_env(k)}
    env.setdefault("PATH", os.defpath)  # where the program finds its own helpers, not secrets
    try:
        process = await asyncio.create_subprocess_exec(
            program,
            *argv,
            cwd=str(cwd),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return _error(500, "exec_failed", f"exec failed for {command}: {exc.strerror or exc}")
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return _error(
            500, "exec_failed", f"exec timed out after {timeout * 1000:.0f} ms: {command}"
        )
    return _ok(
        {
            "command": command,
            "args": argv,
            "cwd": str(cwd),
            "code": process.returncode,
            "success": process.returncode == 0,
            "stdout": stdout.decode("utf-8", errors="replace")[:OUTPUT_LIMIT],
            "stderr": stderr.decode("utf-8", errors="replace")[:OUTPUT_LIMIT],
        }
    )
