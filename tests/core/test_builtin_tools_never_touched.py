"""Paths no grant reaches (docs/decks.md, "What the built-in tools never touch"; docs/decisions.md,
"Permissions and built-in tools"): the built-in tools never read or write under /proc, /sys
or /dev, nor inside a `.gambit` folder, however wide the deck's `[permissions]`, and whether
the path names them or a link leads there. Each refusal is a 403 naming the rule.

Before: `read = true` (or `read = ["/proc/self"]`) read /proc/self/environ, the process's
environment with every provider key; `read = ["./"]` on a served deck's folder read the
simulator's `.gambit/secret_key`. Real files, real links, the real /proc of this process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gambit.core._builtin_tools import call_builtin_tool
from gambit.core._permissions import PermissionSet, grants

PYTHON = os.path.realpath(sys.executable)
SECRET = "django-insecure-do-not-leak"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A deck folder that is also the served workspace: the simulator's state inside it."""
    (tmp_path / "PROMPT.md").write_text("+++\n+++\nHi.\n")
    (tmp_path / "notes.md").write_text("public notes\n")
    (tmp_path / ".gambit").mkdir()
    (tmp_path / ".gambit" / "secret_key").write_text(SECRET + "\n")
    (tmp_path / "sub").mkdir()
    return tmp_path


def everything(ws: Path) -> PermissionSet:
    return PermissionSet.allow_all(ws)


def refused(result: dict, rule: str) -> bool:
    return (
        result["status"] == 403
        and result["code"] == "permission_denied"
        and rule in result["message"]
        and "whatever the deck's [permissions] grant" in result["message"]
    )


PROC_RULE = "never read or write under /proc, /sys or /dev"
STATE_RULE = "never read or write inside a .gambit folder"


# ---- /proc, /sys, /dev ----------------------------------------------------------------------


@pytest.mark.parametrize("read", [True, ["/proc/self"], ["/proc"]])
async def test_the_process_environment_is_never_read_whatever_the_grant(ws: Path, read):
    perms = grants(ws, read=read)
    result = await call_builtin_tool("read_file", {"path": "/proc/self/environ"}, perms)
    assert refused(result, PROC_RULE), result


async def test_dev_fd_is_refused_though_it_links_into_proc(ws: Path):
    with (ws / "notes.md").open() as handle:  # an open file inside the grant
        path = f"/dev/fd/{handle.fileno()}"
        result = await call_builtin_tool("read_file", {"path": path}, everything(ws))
    assert refused(result, PROC_RULE), result


async def test_a_link_in_the_workspace_to_proc_is_refused(ws: Path):
    (ws / "me").symlink_to("/proc/self")
    perms = grants(ws, read=["./"])
    result = await call_builtin_tool("read_file", {"path": "me/environ"}, perms)
    assert refused(result, PROC_RULE), result


async def test_a_link_to_proc_fd_cannot_reach_a_deleted_file(ws: Path, tmp_path_factory):
    # /proc/<pid>/fd/N resolves to where the open file was; deleted, it has no other name.
    outside = tmp_path_factory.mktemp("outside") / "held.txt"
    outside.write_text("held open, then deleted\n")
    (ws / "fds").symlink_to("/proc/self/fd")
    with outside.open() as handle:
        outside.unlink()
        result = await call_builtin_tool(
            "read_file", {"path": f"fds/{handle.fileno()}"}, everything(ws)
        )
    assert refused(result, PROC_RULE), result


@pytest.mark.parametrize("path", ["/sys/kernel/hostname", "/proc/self/status", "/dev/null"])
async def test_sys_proc_and_dev_are_refused_for_reading(ws: Path, path: str):
    result = await call_builtin_tool("read_file", {"path": path}, everything(ws))
    assert refused(result, PROC_RULE), result


async def test_listing_and_grep_skip_them(ws: Path):
    listed = await call_builtin_tool("list_dir", {"path": "/"}, everything(ws))
    names = {entry["path"] for entry in listed["payload"]["entries"]}
    assert names and not names & {"/proc", "/sys", "/dev"}, names
    for tool, args in (
        ("list_dir", {"path": "/proc/self"}),
        ("grep_files", {"path": "/proc/self", "query": "API_KEY"}),
    ):
        assert refused(await call_builtin_tool(tool, args, everything(ws)), PROC_RULE)


async def test_nothing_is_written_under_them(ws: Path):
    target = Path(f"/dev/shm/gambit-test-{ws.name}.txt")  # a folder anyone may write to
    patch = {
        "path": str(target),
        "edits": [{"old_text": "", "new_text": "x"}],
        "create_if_missing": True,
    }
    try:
        result = await call_builtin_tool("apply_patch", patch, everything(ws))
        assert refused(result, PROC_RULE), result
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


async def test_exec_takes_no_program_or_folder_from_them(ws: Path):
    perms = grants(ws, read=True, run=True)
    program = await call_builtin_tool("exec", {"command": "/proc/self/exe"}, perms)
    assert refused(program, PROC_RULE), program
    folder = await call_builtin_tool("exec", {"command": PYTHON, "cwd": "/proc/self"}, perms)
    assert refused(folder, PROC_RULE), folder


# ---- .gambit folders ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [".gambit/secret_key", "sub/../.gambit/secret_key", ".gambit", "/.gambit/x"]
)
async def test_the_simulators_state_is_never_read(ws: Path, path: str):
    perms = grants(ws, read=["./"])
    tool = "list_dir" if path == ".gambit" else "read_file"
    result = await call_builtin_tool(tool, {"path": path}, perms)
    assert refused(result, STATE_RULE), result
    assert SECRET not in str(result)


async def test_a_link_to_the_state_folder_is_refused(ws: Path):
    (ws / "state").symlink_to(ws / ".gambit")
    (ws / "key.txt").symlink_to(ws / ".gambit" / "secret_key")
    perms = grants(ws, read=["./"])
    for path in ("state/secret_key", "key.txt"):
        result = await call_builtin_tool("read_file", {"path": path}, perms)
        assert refused(result, STATE_RULE), result


async def test_listing_and_grep_of_the_deck_folder_leave_it_out(ws: Path):
    perms = grants(ws, read=["./"])
    listed = await call_builtin_tool("list_dir", {"path": ".", "recursive": True}, perms)
    paths = [entry["path"] for entry in listed["payload"]["entries"]]
    assert str(ws / "notes.md") in paths and not any(".gambit" in p for p in paths), paths
    found = await call_builtin_tool("grep_files", {"path": ".", "query": "insecure"}, perms)
    assert found["status"] == 200 and found["payload"]["matches"] == [], found


async def test_nothing_is_written_into_it(ws: Path):
    perms = grants(ws, read=["./"], write=["./"])
    patch = {"edits": [{"old_text": "django", "new_text": "chosen"}]}
    result = await call_builtin_tool("apply_patch", {"path": ".gambit/secret_key", **patch}, perms)
    assert refused(result, STATE_RULE), result
    created = await call_builtin_tool(
        "apply_patch",
        {"path": "sub/.gambit/new.txt", "create_if_missing": True, **patch},
        perms,
    )
    assert refused(created, STATE_RULE), created
    assert (ws / ".gambit" / "secret_key").read_text() == SECRET + "\n"
    assert not (ws / "sub" / ".gambit").exists()


async def test_the_rest_of_the_deck_folder_is_still_readable(ws: Path):
    perms = grants(ws, read=["./"])
    result = await call_builtin_tool("read_file", {"path": "notes.md"}, perms)
    assert result["status"] == 200 and result["payload"]["content"] == "public notes\n"
