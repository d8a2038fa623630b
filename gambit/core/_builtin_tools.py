"""The built-in workspace tools: `read_file`, `list_dir`, `grep_files`, `apply_patch`, `exec`.

Offered to a deck only when its effective permissions grant what they need (docs/decisions.md,
"Permissions and built-in tools"): read → `read_file`, `list_dir`, `grep_files`; write →
`apply_patch`; run → `exec`. Every call is checked again against the same permissions; a
denied call is a tool result with status 403, code `permission_denied` and a message naming
the permission that is missing, and the run goes on. Results are the envelope fields
`{status, payload}` or `{status, code, message}`.

Every bad argument is a 4xx result, never an exception (docs/decisions.md, "Permissions and
built-in tools"): a path or command that is not a string, holds a NUL byte or an unpaired
surrogate (no file name can hold either), or is longer than a file system allows (400); a
non-array `edits` or `args` (400); NaN or infinity for a number (the default is used); a file
to patch that is not UTF-8 text (415) or would grow past `MAX_PATCH_SIZE` (413). Errors of
the operating system are 4xx where the call is at fault (`_ERRNO_RESULTS`) and 500 where the
host is. A result is always valid Unicode: a name on disk that is not UTF-8 is shown with
`\\xNN` escapes. (A regular expression that is catastrophically slow is not caught: it runs
in a worker thread until it ends, and the run's deadline stops the run waiting for it.)

`apply_patch` never follows a link when it writes: it reaches the target's folder one name at
a time from `/` without following links, refuses a target that is itself a link (409), writes
a fresh temporary file (exclusively created, random name, in that folder) and renames it over
the target, all relative to the folder's descriptor, and removes the temporary file on any
failure.

`exec` runs the program directly (no shell), with only the environment variables the `env`
permission grants (taken from the `host_env` the caller passes: the engine reads no
environment of its own), and a timeout capped by the run's remaining time.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
import re
import secrets
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._json_kinds import kind_words
from ._permissions import PermissionSet, canonical_path, off_limits

READ_TOOLS = ("read_file", "list_dir", "grep_files")
BUILTIN_TOOL_NAMES = (*READ_TOOLS, "apply_patch", "exec")
OUTPUT_LIMIT = 65_536
MAX_READ_BYTES = 2_000_000
# apply_patch: the largest file it reads (bytes) and the longest text it writes (characters).
MAX_PATCH_SIZE = 10_000_000
# Checked before any system call; a file system with lower limits answers ENAMETOOLONG (400).
MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255


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
    """The built-in tools these permissions allow: read, list and grep, then patch, then exec."""
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


class _Refused(Exception):
    """A call answered with an error result, raised from wherever in a tool it is found."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.result = _error(status, code, message)


def _denied(tool: str, kind: str, path: Path) -> dict[str, Any]:
    """A 403 naming why: a path no grant reaches (/proc, a `.gambit` folder...), or the
    missing grant."""
    why = off_limits(path) or f"the deck's [permissions] do not grant {kind} there"
    return _error(403, "permission_denied", f"{tool} denied for {path}: {why}")


# Errors of the operating system that the call, not the host, is at fault for.
_ERRNO_RESULTS: dict[int, tuple[int, str]] = {
    errno.ENOENT: (404, "not_found"),
    errno.ENOTDIR: (404, "not_found"),  # a path through a file
    errno.EACCES: (403, "access_denied"),  # the system refuses, whatever the deck's grants
    errno.EPERM: (403, "access_denied"),
    errno.ENAMETOOLONG: (400, "invalid_input"),
    errno.ELOOP: (400, "invalid_input"),
    errno.EISDIR: (400, "invalid_input"),
    errno.E2BIG: (400, "invalid_input"),  # exec: an argument list too long
    errno.ENOEXEC: (400, "invalid_input"),  # exec: not a program
}


def _os_error(what: str, exc: OSError, default_code: str = "io_error") -> dict[str, Any]:
    status, code = _ERRNO_RESULTS.get(exc.errno or 0, (500, default_code))
    where = f" for {exc.filename}" if isinstance(exc.filename, str) else ""
    return _error(status, code, f"{what} failed{where}: {exc.strerror or exc}")


def _int_in(value: Any, low: int, high: int, default: int) -> int:
    """A whole number clamped to [low, high]; anything else (NaN and infinity too) is the
    default."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return default
    return max(low, min(high, int(value)))


def _checked_text(value: str, what: str) -> str:
    """`value` if a file name or a program argument can hold it."""
    if "\x00" in value:
        raise _Refused(
            400,
            "invalid_input",
            f"{what} contains a NUL character, which no file name or argument can hold",
        )
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise _Refused(
            400,
            "invalid_input",
            f"{what} contains an unpaired surrogate (U+D800 to U+DFFF), which no file name or "
            "argument can hold",
        ) from None
    return value


def _string_arg(args: dict[str, Any], key: str, *, required: bool) -> str | None:
    """A string argument, stripped; None when optional and absent or blank."""
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise _Refused(400, "invalid_input", f"{key} must be a string, not {kind_words(value)}")
    if value is None or not value.strip():
        if required:
            raise _Refused(400, "invalid_input", f"{key} is required")
        return None
    return _checked_text(value.strip() if key == "command" else value, key)


def _path_arg(args: dict[str, Any], key: str = "path", *, required: bool = True) -> str | None:
    value = _string_arg(args, key, required=required)
    if value is not None:
        encoded = os.fsencode(value)
        if len(encoded) > MAX_PATH_BYTES or any(
            len(name) > MAX_NAME_BYTES for name in encoded.split(b"/")
        ):
            raise _Refused(
                400,
                "invalid_input",
                f"{key} is too long: at most {MAX_PATH_BYTES} bytes, {MAX_NAME_BYTES} per name",
            )
    return value


def _valid_text(value: Any) -> Any:
    """`value` with every string encodable as UTF-8, so a result can go to a model and into a
    saved state. Python holds a name on disk that is not UTF-8 with lone surrogates (PEP 383):
    those bytes are shown as `\\xNN`; any other unpaired surrogate becomes U+FFFD."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            try:
                return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, dict):
        return {key: _valid_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_valid_text(item) for item in value]
    return value


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
            result = await asyncio.to_thread(_read_file, args, permissions)
        elif name == "list_dir":
            result = await asyncio.to_thread(_list_dir, args, permissions)
        elif name == "grep_files":
            result = await asyncio.to_thread(_grep_files, args, permissions)
        elif name == "apply_patch":
            result = await asyncio.to_thread(_apply_patch, args, permissions)
        else:
            result = await _exec(args, permissions, host_env or {}, remaining_seconds)
    except _Refused as exc:
        result = exc.result
    except OSError as exc:
        result = _os_error(name, exc)
    except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:
        # An argument of a shape not foreseen above: still the call's fault, and the run goes on.
        result = _error(400, "invalid_input", f"{name}: invalid arguments ({exc})")
    return _valid_text(result)


def _read_regular(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a regular file, None when `path` is anything else. Opened
    without blocking, so a FIFO put in place of a file cannot hang the call."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(limit)


def _read_file(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    path = perms.resolve(_path_arg(args) or "")
    if not perms.can_read(path):
        return _denied("read_file", "read", path)
    data = _read_regular(path, MAX_READ_BYTES) if path.is_file() else None
    if data is None:
        return _error(404, "not_found", f"file not found: {path}")
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
    root = perms.resolve(_path_arg(args) or "")
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
    raw = _path_arg(args) or ""
    query = args.get("query")
    if not isinstance(query, str) or not query:
        what = (
            "is required" if query in (None, "") else f"must be a string, not {kind_words(query)}"
        )
        return _error(400, "invalid_input", f"query {what}")
    try:
        pattern = re.compile(query)
    except (re.error, RecursionError, OverflowError) as exc:  # deep nesting: RecursionError
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
            data = _read_regular(file, MAX_READ_BYTES)
            if data is None:
                continue
            text = data.decode("utf-8")
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


def _edits(args: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """`(old_text, new_text, replace_all)` of each well-formed edit (others are skipped)."""
    value = args.get("edits")
    if value is not None and not isinstance(value, list):
        raise _Refused(
            400,
            "invalid_input",
            f"edits must be an array of old_text/new_text pairs, not {kind_words(value)}",
        )
    edits: list[tuple[str, str, bool]] = []
    for index, edit in enumerate(value or []):
        if not (
            isinstance(edit, dict)
            and isinstance(edit.get("old_text"), str)
            and isinstance(edit.get("new_text"), str)
        ):
            continue
        try:
            edit["new_text"].encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused(
                400,
                "invalid_input",
                f"edits[{index}].new_text contains an unpaired surrogate (U+D800 to U+DFFF), "
                "which a UTF-8 file cannot hold",
            ) from None
        edits.append((edit["old_text"], edit["new_text"], edit.get("replace_all") is True))
    if not edits:
        raise _Refused(
            400, "invalid_input", "edits must include at least one old_text/new_text pair"
        )
    return edits


def _apply_patch(args: dict[str, Any], perms: PermissionSet) -> dict[str, Any]:
    raw = _path_arg(args) or ""
    edits = _edits(args)
    path = perms.resolve(raw)
    if not perms.can_write(path):
        return _denied("apply_patch", "write", path)
    if not perms.can_read(path):
        return _denied("apply_patch read", "read", path)
    folder, name = canonical_path(path.parent), path.name
    if not name:
        return _error(400, "invalid_input", f"{path} is a folder, not a file")
    try:
        folder_fd = _open_folder(folder, create=False)
    except FileNotFoundError:
        folder_fd = None  # a folder on the way is missing
    try:
        found = _read_target(folder_fd, folder / name) if folder_fd is not None else None
        if found is None and args.get("create_if_missing") is not True:
            return _error(404, "not_found", f"file not found: {path}")
        text, mode = found if found is not None else ("", None)
        applied = 0
        for old, new, replace_all in edits:
            count = (text.count(old) if replace_all else 1) if old and old in text else 0
            if count == 0:
                continue
            if len(text) + count * (len(new) - len(old)) > MAX_PATCH_SIZE:
                return _error(
                    413,
                    "too_large",
                    f"the patched {path} would be longer than {MAX_PATCH_SIZE} characters",
                )
            text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
            applied += 1
        if applied == 0 and found is not None:
            return _error(409, "no_changes", f"No edit targets were found in {path}")
        if folder_fd is None:
            folder_fd = _open_folder(folder, create=True)
            # The folders now exist: the final path is what the grant must cover.
            final = canonical_path(folder / name)
            if final != folder / name or not (perms.can_write(final) and perms.can_read(final)):
                return _denied("apply_patch", "write", final)
        _replace(folder_fd, name, text, mode)
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
    return _ok({"path": str(path), "applied": applied, "created": found is None})


# A folder reached without following a link. O_PATH (Linux) needs no read permission on
# the folder, only search permission, as a path does.
_FOLDER_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)


def _open_folder(folder: Path, *, create: bool) -> int:
    """A descriptor of `folder` (a canonical path: no links in it), opened one name at a time
    from `/` without following a link, so no link (one swapped in after the grant was checked
    included) can turn the write elsewhere. A missing folder is made when `create`, else
    raises FileNotFoundError."""
    fd = os.open("/", _FOLDER_FLAGS)
    try:
        for part in folder.parts[1:]:
            try:
                child = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                child = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_target(folder_fd: int, target: Path) -> tuple[str, int] | None:
    """The text and mode of the file `apply_patch` edits, None when it does not exist."""
    name = target.name
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise _Refused(
            409,
            "symlink",
            f"apply_patch does not write through a symbolic link: {target} is a link; "
            "patch the file it points to",
        )
    if stat.S_ISDIR(info.st_mode):
        raise _Refused(400, "invalid_input", f"{target} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise _Refused(400, "invalid_input", f"{target} is not a regular file")
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced since the check above
            raise _Refused(400, "invalid_input", f"{target} is not a regular file")
        data = file.read(MAX_PATCH_SIZE + 1)
    if len(data) > MAX_PATCH_SIZE:
        raise _Refused(
            413, "too_large", f"{target} is larger than {MAX_PATCH_SIZE} bytes: too large to patch"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(
            415, "not_text", f"{target} is not UTF-8 text; apply_patch edits text files only"
        ) from None
    # Universal newlines, as a text-mode read: "\r\n" and "\r" are read as "\n".
    return text.replace("\r\n", "\n").replace("\r", "\n"), stat.S_IMODE(info.st_mode)


def _replace(folder_fd: int, name: str, text: str, mode: int | None) -> None:
    """Write `text` to a fresh temporary file beside `name` and rename it over `name`, so a
    reader never sees half a file. The temporary file is created exclusively (O_EXCL, so a
    file or link already at its random name is never opened) and removed on any failure;
    a patched file keeps its mode, a new one gets the usual 0o666 less the umask."""
    temporary = f".gambit-{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600 if mode is not None else 0o666, dir_fd=folder_fd)
    try:
        with open(fd, "wb") as file:
            file.write(text.encode("utf-8"))
            if mode is not None:
                os.fchmod(fd, mode)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder_fd)
        raise


def _argv(args: dict[str, Any]) -> list[str]:
    """The program's arguments: an array; entries that are not strings are dropped (as the
    TypeScript Gambit does), a string no argument can hold is refused."""
    value = args.get("args")
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Refused(
            400, "invalid_input", f"args must be an array of strings, not {kind_words(value)}"
        )
    return [
        _checked_text(item, f"args[{index}]")
        for index, item in enumerate(value)
        if isinstance(item, str)
    ]


async def _exec(
    args: dict[str, Any],
    perms: PermissionSet,
    host_env: Mapping[str, str],
    remaining_seconds: float | None,
) -> dict[str, Any]:
    command = _string_arg(args, "command", required=True) or ""
    is_path = "/" in command
    if is_path:
        command = _path_arg({"command": command}, "command") or ""
        target = perms.resolve(command)
        if not perms.can_run_path(target):
            why = off_limits(target) or "not in [permissions.run] paths"
            return _error(403, "permission_denied", f"exec denied for command {command}: {why}")
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
    given_cwd = _path_arg(args, "cwd", required=False)
    if given_cwd is not None:
        cwd = perms.resolve(given_cwd)
        if not perms.can_read(cwd):  # an explicit folder must be one the deck may read
            return _denied("exec", "read", cwd)
    if not cwd.is_dir():
        return _error(404, "not_found", f"directory not found: {cwd}")
    argv = _argv(args)
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
        exc.filename = command  # the message names the command, as the deck gave it
        return _os_error("exec", exc, "exec_failed")
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
