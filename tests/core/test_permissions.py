"""The permission matrix: layering, path checks, every escape, and the built-in tools under them.

Each test is one rule of a deck's `[permissions]` and how they layer (docs/decks.md,
"Permissions hold for every deck a run starts"; docs/decisions.md, "Permissions and built-in
tools"), run against a real folder (real symlinks, real subprocesses)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gambit.core import Permissions
from gambit.core._builtin_tools import call_builtin_tool, offered_tools
from gambit.core._permissions import PermissionSet, grants, resolve_effective

PYTHON = os.path.realpath(sys.executable)  # run.paths grants never match a symlink


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "allowed" / "sub").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "allowed" / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (tmp_path / "allowed" / "sub" / "deep.txt").write_text("beta again\n")
    (tmp_path / "other" / "secret.txt").write_text("top secret\n")
    (tmp_path / "allowed-sibling.txt").write_text("not yours\n")
    return tmp_path


def rw(ws: Path, **extra) -> PermissionSet:
    return grants(ws, read=["./allowed"], write=["./allowed"], **extra)


async def call(name, args, perms, **kw):
    return await call_builtin_tool(name, args, perms, **kw)


# ---- layering -------------------------------------------------------------------------------


def test_root_layers_workspace_declaration_session_and_a_missing_run_denies():
    ws = "/workspace"
    effective = resolve_effective(
        "/workspace/decks/root",
        workspace=grants(ws, read=["./decks", "./shared"], run={"commands": ["deno", "bash"]}),
        declaration=Permissions(
            read=["/workspace/shared"], run={"paths": [], "commands": ["deno"]}
        ),
        session=grants(ws, read=["./shared"]),
    )
    assert effective.permissions.read.to_json() == ["/workspace/shared"]
    assert effective.permissions.run.to_json() is False
    assert [layer.name for layer in effective.layers] == [
        "host",
        "workspace",
        "declaration",
        "session",
    ]
    assert effective.to_json()["effective"]["read"] == ["/workspace/shared"]


def test_a_child_can_only_narrow_its_parent():
    parent = grants("/w", read=["/w/shared"], run={"commands": ["deno"]})
    child = resolve_effective(
        "/w/decks/child",
        parent=parent,
        declaration=Permissions(read=True, write=True, run=True),
        reference=Permissions(read=True, run={"paths": [], "commands": ["deno", "rm"]}),
    )
    perms = child.permissions
    assert perms.read.to_json() == ["/w/shared"]
    assert perms.write.to_json() is False  # the parent had none
    assert perms.run.to_json() == {"paths": [], "commands": ["deno"]}
    assert [layer.name for layer in child.layers] == ["parent", "declaration", "reference"]


def test_a_relative_grant_stays_where_it_was_declared(tmp_path: Path):
    parent = grants(tmp_path / "parent", read=["./local.txt"])
    child = resolve_effective(
        tmp_path / "child", parent=parent, declaration=Permissions(read=True)
    ).permissions
    assert child.can_read(tmp_path / "parent" / "local.txt")
    assert not child.can_read("./local.txt")  # relative to the child's folder: not granted


def test_no_declaration_means_no_builtin_tool(ws: Path):
    effective = resolve_effective(ws, declaration=None)
    assert offered_tools(effective.permissions) == []


def test_intersection_is_exact_not_by_prefix():
    a = grants("/", read=["/a"])
    b = grants("/", read=["/a/b"])
    assert a.intersect(b).read.to_json() is False


# ---- path checks ----------------------------------------------------------------------------


def test_a_folder_grant_covers_descendants_but_not_siblings(ws: Path):
    perms = grants(ws, read=["./allowed"])
    assert perms.can_read(ws / "allowed" / "sub" / "deep.txt")
    assert not perms.can_read(ws / "allowed-sibling.txt")
    file_only = grants(ws, read=["./allowed/notes.txt"])
    assert file_only.can_read(ws / "allowed" / "notes.txt")
    assert not file_only.can_read(ws / "allowed" / "notes.txt.bak")


async def test_dot_dot_cannot_leave_a_grant(ws: Path):
    result = await call("read_file", {"path": "allowed/../other/secret.txt"}, rw(ws))
    assert result["status"] == 403 and result["code"] == "permission_denied"
    assert "do not grant read" in result["message"]


async def test_an_absolute_path_outside_is_denied(ws: Path):
    result = await call("read_file", {"path": str(ws / "other" / "secret.txt")}, rw(ws))
    assert result["status"] == 403
    result = await call("read_file", {"path": "/etc/hostname"}, rw(ws))
    assert result["status"] == 403


async def test_a_symlink_out_of_the_grant_is_denied_for_read_and_write(ws: Path):
    (ws / "allowed" / "link.txt").symlink_to(ws / "other" / "secret.txt")
    (ws / "allowed" / "linkdir").symlink_to(ws / "other")
    perms = rw(ws)
    assert (await call("read_file", {"path": "allowed/link.txt"}, perms))["status"] == 403
    listed = await call("grep_files", {"path": "allowed", "query": "secret"}, perms)
    assert listed["payload"]["matches"] == []  # followed links are skipped, not read
    patch = {"path": "allowed/linkdir/secret.txt", "edits": [{"old_text": "top", "new_text": "x"}]}
    assert (await call("apply_patch", patch, perms))["status"] == 403
    assert (ws / "other" / "secret.txt").read_text() == "top secret\n"


async def test_a_dangling_symlink_out_cannot_create_a_file(ws: Path):
    (ws / "allowed" / "new.txt").symlink_to(ws / "other" / "created.txt")
    patch = {
        "path": "allowed/new.txt",
        "edits": [{"old_text": "x", "new_text": "y"}],
        "create_if_missing": True,
    }
    assert (await call("apply_patch", patch, rw(ws)))["status"] == 403
    assert not (ws / "other" / "created.txt").exists()


# ---- offered tools --------------------------------------------------------------------------


def test_read_only_offers_the_three_read_tools(ws: Path):
    assert offered_tools(grants(ws, read=True)) == ["read_file", "list_dir", "grep_files"]


def test_run_commands_only_offers_exec_only(ws: Path):
    assert offered_tools(grants(ws, run={"commands": ["echo"]})) == ["exec"]


async def test_a_tool_that_is_not_offered_is_denied_by_name(ws: Path):
    result = await call("apply_patch", {"path": "x", "edits": []}, grants(ws, read=True))
    assert result["status"] == 403 and "grant no write access" in result["message"]


# ---- the tools ------------------------------------------------------------------------------


async def test_read_file_lines_and_missing_file(ws: Path):
    result = await call("read_file", {"path": "allowed/notes.txt", "start_line": 2}, rw(ws))
    assert result["status"] == 200
    assert result["payload"]["content"] == "beta\ngamma\n".rstrip("\n") + "\n"
    assert result["payload"]["total_lines"] == 4 and result["payload"]["start_line"] == 2
    missing = await call("read_file", {"path": "allowed/nope.txt"}, rw(ws))
    assert missing["status"] == 404 and missing["code"] == "not_found"
    assert (await call("read_file", {}, rw(ws)))["status"] == 400


async def test_list_dir_recursive_and_truncated(ws: Path):
    result = await call("list_dir", {"path": "allowed", "recursive": True}, rw(ws))
    paths = {Path(e["path"]).name for e in result["payload"]["entries"]}
    assert paths == {"notes.txt", "sub", "deep.txt"}
    small = await call("list_dir", {"path": "allowed", "max_entries": 1}, rw(ws))
    assert len(small["payload"]["entries"]) == 1 and small["payload"]["truncated"] is True


async def test_grep_files_and_a_bad_regex(ws: Path):
    result = await call("grep_files", {"path": "allowed", "query": "^beta"}, rw(ws))
    assert [(Path(m["path"]).name, m["line"]) for m in result["payload"]["matches"]] == [
        ("notes.txt", 2),
        ("deep.txt", 1),
    ]
    bad = await call("grep_files", {"path": "allowed", "query": "("}, rw(ws))
    assert bad["status"] == 400 and bad["code"] == "invalid_regex"


async def test_apply_patch_rules(ws: Path):
    perms = rw(ws)
    target = {"path": "allowed/notes.txt"}
    ok = await call(
        "apply_patch",
        {**target, "edits": [{"old_text": "a", "new_text": "A", "replace_all": True}]},
        perms,
    )
    assert ok["payload"] == {"path": str(ws / "allowed/notes.txt"), "applied": 1, "created": False}
    assert (ws / "allowed/notes.txt").read_text() == "AlphA\nbetA\ngAmmA\n"
    none = await call(
        "apply_patch", {**target, "edits": [{"old_text": "zz", "new_text": "y"}]}, perms
    )
    assert none["status"] == 409 and none["code"] == "no_changes"
    created = await call(
        "apply_patch",
        {
            "path": "allowed/new/deep/file.md",
            "edits": [{"old_text": "placeholder", "new_text": "x"}],
            "create_if_missing": True,
        },
        perms,
    )
    assert created["payload"]["created"] is True
    assert (ws / "allowed/new/deep/file.md").read_text() == ""
    write_only = grants(ws, write=["./allowed"])
    denied = await call(
        "apply_patch", {**target, "edits": [{"old_text": "A", "new_text": "a"}]}, write_only
    )
    assert denied["status"] == 403 and "apply_patch read denied" in denied["message"]
    assert (await call("apply_patch", {**target, "edits": []}, perms))["status"] == 400


async def test_exec_runs_only_listed_commands(ws: Path):
    perms = grants(ws, read=["./allowed"], run={"commands": ["echo"]}, env=["PATH"])
    host = {"PATH": os.environ["PATH"]}
    ok = await call("exec", {"command": "echo", "args": ["hi", 3]}, perms, host_env=host)
    assert ok["payload"]["stdout"] == "hi\n" and ok["payload"]["args"] == ["hi"]
    assert ok["payload"]["success"] is True
    denied = await call("exec", {"command": "ls"}, perms, host_env=host)
    assert denied["status"] == 403 and "not in [permissions.run] commands" in denied["message"]
    by_path = await call("exec", {"command": "/bin/echo"}, perms, host_env=host)
    assert by_path["status"] == 403  # a command name does not grant a path


async def test_exec_by_path_must_be_exact_and_not_a_symlink(ws: Path):
    script = ws / "allowed" / "tool.sh"
    script.write_text("#!/bin/sh\necho tool ran\n")
    script.chmod(0o755)
    (ws / "allowed" / "alias.sh").symlink_to(script)
    perms = grants(
        ws, read=["./allowed"], run={"paths": [str(script), str(ws / "allowed/alias.sh")]}
    )
    ok = await call("exec", {"command": str(script)}, perms)
    assert ok["payload"]["stdout"] == "tool ran\n"
    linked = await call("exec", {"command": "./allowed/alias.sh"}, perms)
    assert linked["status"] == 403
    assert (await call("exec", {"command": "bin/tool"}, grants(ws, run={"commands": ["tool"]})))[
        "status"
    ] == 403


async def test_exec_sees_only_the_environment_it_is_granted(ws: Path):
    perms = grants(ws, run={"paths": [PYTHON]}, env=["VISIBLE"])
    host = {"VISIBLE": "yes", "SECRET_TOKEN": "sk-do-not-leak"}
    code = "import os, json; print(json.dumps(sorted(k for k in os.environ if k in ('VISIBLE','SECRET_TOKEN'))))"
    result = await call("exec", {"command": PYTHON, "args": ["-c", code]}, perms, host_env=host)
    assert result["payload"]["stdout"].strip() == '["VISIBLE"]'


async def test_exec_times_out_and_is_killed(ws: Path):
    perms = grants(ws, run={"paths": [PYTHON]})
    result = await call(
        "exec",
        {
            "command": PYTHON,
            "args": ["-c", "import time; time.sleep(5)"],
            "timeout_ms": 200,
        },
        perms,
    )
    assert result["status"] == 500 and "timed out after 200 ms" in result["message"]


async def test_exec_cwd_outside_the_read_grant_is_denied(ws: Path):
    perms = grants(ws, read=["./allowed"], run={"commands": ["pwd"]})
    result = await call(
        "exec", {"command": "pwd", "cwd": "other"}, perms, host_env=dict(os.environ)
    )
    assert result["status"] == 403


# ---- in a run: offered by [permissions], dispatched, denied calls do not stop the run -------


async def test_a_deck_with_read_permission_reads_and_a_denied_read_goes_on(tmp_path: Path):
    import json

    from gambit.core import run_deck
    from gambit.providers.offline import Call, ScriptedProvider

    deck = tmp_path / "deck" / "PROMPT.md"
    (tmp_path / "deck" / "docs").mkdir(parents=True)
    (tmp_path / "deck" / "docs" / "policy.md").write_text("Refunds within 30 days.\n")
    (tmp_path / "secret.txt").write_text("do not read\n")
    deck.write_text('+++\nmodelParams.model = "m"\n[permissions]\nread = ["./docs"]\n+++\nHelp.\n')
    provider = ScriptedProvider().enqueue(
        Call("read_file", {"path": "docs/policy.md"}),
        Call("read_file", {"path": "../secret.txt"}),
        "Refunds are possible within 30 days.",
    )
    result = await run_deck(deck, provider=provider, message="refunds?")
    assert result.output == "Refunds are possible within 30 days."
    names = [t.function.name for t in provider.requests[0].tools or []]
    assert names[:3] == ["read_file", "list_dir", "grep_files"] and "exec" not in names
    outputs = [
        json.loads(i.output) for i in provider.requests[2].input if i.type == "function_call_output"
    ]
    assert outputs[0]["status"] == 200 and "30 days" in outputs[0]["payload"]["content"]
    assert outputs[1]["status"] == 403 and outputs[1]["code"] == "permission_denied"


async def test_without_permissions_no_builtin_tool_is_offered(tmp_path: Path):
    from gambit.core import run_deck
    from gambit.providers.offline import ScriptedProvider

    deck = tmp_path / "PROMPT.md"
    deck.write_text('+++\nmodelParams.model = "m"\n+++\nHelp.\n')
    provider = ScriptedProvider().enqueue("hi")
    await run_deck(deck, provider=provider, message="x")
    assert not provider.requests[0].tools


async def test_an_action_cannot_widen_what_its_parent_allows(tmp_path: Path):
    import json

    from gambit.core import run_deck
    from gambit.providers.offline import Call, ScriptedProvider

    root = tmp_path / "root"
    (root / "shared").mkdir(parents=True)
    (root / "shared" / "a.txt").write_text("shared text\n")
    (root / "private.txt").write_text("private\n")
    (root / "child").mkdir()
    (root / "child" / "PROMPT.md").write_text(
        "+++\n"
        'contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"\n'
        'responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"\n'
        'modelParams.model = "m"\n[permissions]\nread = true\n+++\nRead.\n'
    )
    (root / "PROMPT.md").write_text(
        '+++\nmodelParams.model = "m"\n[permissions]\nread = ["./shared"]\n'
        '[[actions]]\nname = "reader"\ndescription = "reads"\npath = "./child/PROMPT.md"\n'
        "+++\nDelegate.\n"
    )
    provider = ScriptedProvider().enqueue(
        Call("reader", {}),
        Call("read_file", {"path": "../shared/a.txt"}),
        Call("read_file", {"path": "../private.txt"}),
        "child done",
        "root done",
    )
    result = await run_deck(root / "PROMPT.md", provider=provider, message="go")
    assert result.output == "root done"
    child_outputs = [
        json.loads(i.output) for i in provider.requests[3].input if i.type == "function_call_output"
    ]
    statuses = [o["status"] for o in child_outputs if isinstance(o, dict) and "status" in o]
    assert statuses == [200, 403]  # the shared file, then the private one
