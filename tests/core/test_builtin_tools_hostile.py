"""The built-in tools against hostile workspaces and hostile arguments (docs/decisions.md,
"Permissions and built-in tools").

- `apply_patch` never writes through a symbolic link: not through a link planted where a
  temporary file might go, not through a target that is a link, and it leaves no temporary
  file behind when a write fails. Real files and links in `tmp_path`.
- Every bad argument of every tool (NUL bytes, unpaired surrogates, over-long paths, numbers
  where strings are expected, NaN and infinity where numbers are, files that are not text)
  is a 4xx tool result; `call_builtin_tool` never raises, and a run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gambit.core._builtin_tools import call_builtin_tool
from gambit.core._permissions import PermissionSet, grants

PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "target.txt").write_text("hello world\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text("victim text\n")
    return tmp_path


def rw(ws: Path, **extra: Any) -> PermissionSet:
    return grants(ws, read=["./out"], write=["./out"], **extra)


def patch(path: str, old: str = "hello", new: str = "bye", **extra: Any) -> dict[str, Any]:
    return {"path": path, "edits": [{"old_text": old, "new_text": new}], **extra}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if "gambit" in p.name)


# ---- apply_patch and links ----------------------------------------------------------------------


async def test_a_link_planted_at_the_temporary_name_is_not_written_through(ws: Path):
    """The reproducer: the fixed temporary name `.target.txt.gambit-tmp` was opened with a
    call that follows links, so the patch overwrote the outside file and the target became a
    link to it."""
    planted = ws / "out" / ".target.txt.gambit-tmp"
    planted.symlink_to(Path("..") / "outside" / "victim.txt")
    result = await call_builtin_tool("apply_patch", patch("out/target.txt"), rw(ws))
    assert result["status"] == 200, result
    assert (ws / "outside" / "victim.txt").read_text() == "victim text\n"
    target = ws / "out" / "target.txt"
    assert not target.is_symlink() and target.read_text() == "bye world\n"
    assert planted.is_symlink()  # left as it was: not ours to remove


async def test_create_if_missing_does_not_create_through_a_planted_link(ws: Path):
    planted = ws / "out" / ".new.txt.gambit-tmp"
    planted.symlink_to(ws / "outside" / "created.txt")
    result = await call_builtin_tool(
        "apply_patch", patch("out/new.txt", create_if_missing=True), rw(ws)
    )
    assert result["status"] == 200 and result["payload"]["created"] is True, result
    assert not (ws / "outside" / "created.txt").exists()
    new = ws / "out" / "new.txt"
    assert new.is_file() and not new.is_symlink() and new.read_text() == ""


async def test_a_target_that_is_a_link_is_refused_even_inside_the_grant(ws: Path):
    alias = ws / "out" / "alias.txt"
    alias.symlink_to(ws / "out" / "target.txt")
    result = await call_builtin_tool("apply_patch", patch("out/alias.txt"), rw(ws))
    assert (result["status"], result["code"]) == (409, "symlink"), result
    assert "patch the file it points to" in result["message"]
    assert alias.is_symlink()  # not replaced by a regular file
    assert (ws / "out" / "target.txt").read_text() == "hello world\n"
    assert leftovers(ws / "out") == []


async def test_a_dangling_link_target_is_refused_with_create_if_missing(ws: Path):
    alias = ws / "out" / "dangling.txt"
    alias.symlink_to(ws / "out" / "not-yet.txt")
    result = await call_builtin_tool(
        "apply_patch", patch("out/dangling.txt", create_if_missing=True), rw(ws)
    )
    assert (result["status"], result["code"]) == (409, "symlink"), result
    assert not (ws / "out" / "not-yet.txt").exists() and alias.is_symlink()


async def test_missing_folders_are_created_inside_the_grant(ws: Path):
    result = await call_builtin_tool(
        "apply_patch", patch("out/a/b/new.md", create_if_missing=True), rw(ws)
    )
    assert result["status"] == 200, result
    assert (ws / "out" / "a" / "b" / "new.md").read_text() == ""
    assert leftovers(ws / "out" / "a" / "b") == []


async def test_a_patch_keeps_the_files_mode(ws: Path):
    script = ws / "out" / "run.sh"
    script.write_text("echo hello\n")
    script.chmod(0o750)
    result = await call_builtin_tool("apply_patch", patch("out/run.sh"), rw(ws))
    assert result["status"] == 200, result
    assert script.stat().st_mode & 0o777 == 0o750 and script.read_text() == "echo bye\n"


FAILING_WRITE = """
import asyncio, json, resource, signal, sys
from gambit.core._builtin_tools import call_builtin_tool
from gambit.core._permissions import grants
ws = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
args = {"path": "out/target.txt", "edits": [{"old_text": "hello", "new_text": "x" * 64}]}
perms = grants(ws, read=["./out"], write=["./out"])
print(json.dumps(asyncio.run(call_builtin_tool("apply_patch", args, perms))))
"""


def test_a_failed_write_leaves_the_target_and_no_temporary_file(ws: Path):
    """A real failure in the middle of the write (a file size limit, set in a child process),
    not a mock: the target is unchanged and the temporary file is removed."""
    ran = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(ws)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == 500 and result["code"] == "io_error", result
    assert (ws / "out" / "target.txt").read_text() == "hello world\n"
    assert leftovers(ws / "out") == []


# ---- every bad argument is a 4xx --------------------------------------------------------------

NUL = "out/tar\x00get.txt"
SURROGATE = "out/\ud800.txt"
TOO_LONG = "out/" + "a" * 5000
NAME_TOO_LONG = "out/" + "a" * 300 + ".txt"


def bad_calls(ws: Path) -> list[tuple[str, str, dict[str, Any], int, str]]:
    """(id, tool, arguments, status, code) for each bad shape of each argument."""
    run = {"command": "echo"}
    cases: list[tuple[str, str, dict[str, Any], int, str]] = []
    for label, path in (
        ("nul", NUL),
        ("surrogate", SURROGATE),
        ("too-long", TOO_LONG),
        ("name-too-long", NAME_TOO_LONG),
        ("number", 5),
        ("list", ["out"]),
    ):
        cases += [
            (f"read_file-path-{label}", "read_file", {"path": path}, 400, "invalid_input"),
            (f"list_dir-path-{label}", "list_dir", {"path": path}, 400, "invalid_input"),
            (
                f"grep_files-path-{label}",
                "grep_files",
                {"path": path, "query": "x"},
                400,
                "invalid_input",
            ),
            (f"apply_patch-path-{label}", "apply_patch", patch(path), 400, "invalid_input"),
            (
                f"apply_patch-create-path-{label}",
                "apply_patch",
                patch(path, create_if_missing=True),
                400,
                "invalid_input",
            ),
            (f"exec-cwd-{label}", "exec", {**run, "cwd": path}, 400, "invalid_input"),
        ]
    cases += [
        ("exec-command-nul", "exec", {"command": "ec\x00ho"}, 400, "invalid_input"),
        ("exec-command-path-nul", "exec", {"command": "./out/x\x00"}, 400, "invalid_input"),
        ("exec-command-surrogate", "exec", {"command": "\udcff\ud800"}, 400, "invalid_input"),
        ("exec-command-number", "exec", {"command": 7}, 400, "invalid_input"),
        ("exec-arg-nul", "exec", {**run, "args": ["a\x00b"]}, 400, "invalid_input"),
        ("exec-arg-surrogate", "exec", {**run, "args": ["\ud800"]}, 400, "invalid_input"),
        ("exec-args-string", "exec", {**run, "args": "abc"}, 400, "invalid_input"),
        ("exec-arg-too-big", "exec", {**run, "args": ["x" * 200_000]}, 400, "invalid_input"),
        ("grep-query-number", "grep_files", {"path": "out", "query": 5}, 400, "invalid_input"),
        ("grep-query-regex", "grep_files", {"path": "out", "query": "("}, 400, "invalid_regex"),
        (
            "grep-query-nested-regex",  # compiling it overflows the recursion limit
            "grep_files",
            {"path": "out", "query": "(" * 5000 + ")" * 5000},
            400,
            "invalid_regex",
        ),
        (
            "read_file-resolved-path-too-long",  # within the argument's limit, not the system's
            "read_file",
            {"path": "out/" + "/".join(["a" * 200] * 20)},
            404,
            "not_found",
        ),
        (
            "edits-number",
            "apply_patch",
            {"path": "out/target.txt", "edits": 5},
            400,
            "invalid_input",
        ),
        (
            "edits-string",
            "apply_patch",
            {"path": "out/target.txt", "edits": "hello"},
            400,
            "invalid_input",
        ),
        (
            "edits-number-text",
            "apply_patch",
            {"path": "out/target.txt", "edits": [{"old_text": 1, "new_text": "x"}]},
            400,
            "invalid_input",
        ),
        (
            "new-text-surrogate",
            "apply_patch",
            patch("out/target.txt", new="\ud800"),
            400,
            "invalid_input",
        ),
        (
            "replace-all-too-large",
            "apply_patch",
            {
                "path": "out/target.txt",
                "edits": [{"old_text": "l", "new_text": "L" * 6_000_000, "replace_all": True}],
            },
            413,
            "too_large",
        ),
        ("patch-a-folder", "apply_patch", patch("out"), 400, "invalid_input"),
        (
            "create-over-a-folder",
            "apply_patch",
            patch("out/sub", create_if_missing=True),
            400,
            "invalid_input",
        ),
        ("patch-binary", "apply_patch", patch("out/binary.bin"), 415, "not_text"),
        (
            "patch-fifo",
            "apply_patch",
            patch("out/pipe", create_if_missing=True),
            400,
            "invalid_input",
        ),
    ]
    for key, tool, base in (
        ("start_line", "read_file", {"path": "out/target.txt"}),
        ("end_line", "read_file", {"path": "out/target.txt"}),
        ("max_entries", "list_dir", {"path": "out"}),
        ("max_matches", "grep_files", {"path": "out", "query": "h"}),
        ("timeout_ms", "exec", run),
    ):
        for label, number in (("nan", float("nan")), ("inf", float("inf"))):
            cases.append((f"{tool}-{key}-{label}", tool, {**base, key: number}, 200, ""))
    return cases


CASE_IDS = [case[0] for case in bad_calls(Path("/"))]


@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
async def test_a_bad_argument_is_a_tool_result_not_an_exception(ws: Path, index: int):
    (ws / "out" / "sub").mkdir()
    (ws / "out" / "binary.bin").write_bytes(b"hello \xff\xfe\n")
    os.mkfifo(ws / "out" / "pipe")
    _, tool, args, status, code = bad_calls(ws)[index]
    perms = rw(ws, run={"commands": ["echo"]}, env=["PATH"])
    result = await call_builtin_tool(tool, args, perms, host_env={"PATH": os.environ["PATH"]})
    assert result["status"] == status, result
    if code:
        assert result["code"] == code and result["message"], result
        assert "invalid arguments (" not in result["message"]  # handled, not the last resort
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # a result is always valid text
    assert (ws / "out" / "target.txt").read_text() == "hello world\n"
    assert (ws / "out" / "binary.bin").read_bytes() == b"hello \xff\xfe\n"
    assert leftovers(ws / "out") == []


async def test_a_name_that_is_not_utf8_is_listed_as_valid_text(ws: Path):
    """A file name that is not UTF-8 (possible on Linux) comes back escaped, so the result
    can be sent to a model and saved (a lone surrogate cannot be encoded)."""
    os.mkdir(os.fsencode(ws / "out") + b"/bad\xff")
    for tool, args in (
        ("list_dir", {"path": "out"}),
        ("grep_files", {"path": "out", "query": "hello"}),
    ):
        result = await call_builtin_tool(tool, args, rw(ws))
        assert result["status"] == 200, result
        text = json.dumps(result, ensure_ascii=False)
        text.encode("utf-8")
    listed = await call_builtin_tool("list_dir", {"path": "out"}, rw(ws))
    assert any(e["path"].endswith("bad\\xff") for e in listed["payload"]["entries"])


async def test_exec_of_a_file_that_is_not_executable_is_a_403(ws: Path):
    script = ws / "out" / "plain.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    result = await call_builtin_tool(
        "exec", {"command": str(script)}, grants(ws, read=["./out"], run={"paths": [str(script)]})
    )
    assert (result["status"], result["code"]) == (403, "access_denied"), result


async def test_a_bad_argument_in_a_run_does_not_stop_it(tmp_path: Path):
    """The reproducer of issue 24: a NUL byte in grep_files's path raised ValueError and
    failed the whole run."""
    from gambit.core import run_deck
    from gambit.providers.offline import Call, Reply, ScriptedProvider

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("first\nsecond\n")
    deck = tmp_path / "PROMPT.md"
    deck.write_text(
        '+++\nmodelParams.model = "m"\n[permissions]\nread = ["./docs"]\nwrite = ["./docs"]\n+++\nHelp.\n'
    )
    provider = ScriptedProvider().enqueue(
        Reply(
            calls=[
                Call("grep_files", {"path": "docs/\x00", "query": "x"}),
                Call("apply_patch", patch("docs/\x00new", create_if_missing=True)),
                Call("read_file", {"path": "docs/a.txt", "start_line": float("nan")}),
            ]
        ),
        "still here",
    )
    result = await run_deck(deck, provider=provider, message="go")
    assert result.output == "still here"
    outputs = [
        json.loads(i.output) for i in provider.requests[1].input if i.type == "function_call_output"
    ]
    assert [o["status"] for o in outputs] == [400, 400, 200]
    assert outputs[2]["payload"]["start_line"] == 1  # NaN: the default
