"""Deck code fails in one line naming the deck, and the command ends (docs/decks.md, "Trust and
limits"): through the console script, on small compute decks written for each test.

Each command runs with a generous subprocess timeout: that is the guard against a process that
never exits (what a busy deck used to cause), not a measure of how fast it ends.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply

GAMBIT = str(Path(sys.executable).parent / "gambit")
GUARD_SECONDS = 20


def gambit(
    *args: str, cwd: Path, env: dict[str, str] | None = None, memory: int | None = None
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}

    def limit_memory() -> None:  # in the child, before it runs gambit
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [GAMBIT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=base | (env or {}),
        timeout=GUARD_SECONDS,
        preexec_fn=limit_memory,
    )


def compute_deck(root: Path, rel: str, body: str, *, schemas: bool = False) -> Path:
    """A compute deck whose module is `body` plus `deck = gambit.define_deck(run=run)`."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = (
        ', context_schema={"type": "object"}, response_schema={"type": "string"}' if schemas else ""
    )
    path.write_text(
        "import gambit\n"
        + textwrap.dedent(body).strip()
        + f"\n\ndeck = gambit.define_deck(run=run{extra})\n"
    )
    return path


def timed_root(root: Path, action: Path, timeout_ms: int = 300) -> Path:
    """A model deck with `[guardrails] timeoutMs` whose one action is `action`; the offline
    demo model calls it at once (the timeout is a deck's guardrail, and a compute deck
    declares none of its own)."""
    path = root / "PROMPT.md"
    path.write_text(
        "+++\n"
        'label = "root"\n'
        'modelParams.model = "offline/demo"\n'
        f"guardrails.timeoutMs = {timeout_ms}\n"
        "[[actions]]\n"
        'name = "work"\n'
        'description = "Do the work."\n'
        f'execute = "./{action.name}"\n'
        "+++\n\nCall work.\n"
    )
    return path


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# ---- exceptions that are not errors of the process -------------------------------------------


@pytest.mark.parametrize(
    ("body", "raised"),
    [
        ("import sys\ndef run(ctx):\n    sys.exit(3)", "SystemExit: 3"),
        ("def run(ctx):\n    raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("async def run(ctx):\n    raise SystemExit(3)", "SystemExit: 3"),
        ("def run(ctx):\n    raise GeneratorExit('closed')", "GeneratorExit: closed"),
        (
            "class Abort(BaseException):\n    pass\ndef run(ctx):\n    raise Abort('no')",
            "Abort: no",
        ),
    ],
)
def test_a_base_exception_from_run_is_one_line_naming_the_deck_exit_1(
    tmp_path: Path, body: str, raised: str
):
    deck = compute_deck(tmp_path, "deck.py", body)
    result = gambit("run", str(deck), cwd=tmp_path)
    assert result.returncode == 1
    line = one_error_line(result)
    assert line.startswith(f"error: {deck} raised {raised}")
    assert "run canceled" not in line
    if raised.startswith(("SystemExit", "KeyboardInterrupt")):
        assert "ctx.fail" in line  # how to end a deck instead


def test_a_real_interrupt_still_cancels_the_run(tmp_path: Path):
    """Ctrl-C (SIGINT to the process) cancels, even while the deck's code is busy."""
    deck = compute_deck(tmp_path, "deck.py", "def run(ctx):\n    while True:\n        pass")
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [GAMBIT, "run", str(deck), "--trace", str(trace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + GUARD_SECONDS
        while not (trace.exists() and "run.start" in trace.read_text()):
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=GUARD_SECONDS)
    finally:
        process.kill()
    assert process.returncode == 1
    assert stderr.strip().splitlines() == ["error: run canceled"]
    end = json.loads(trace.read_text().splitlines()[-1])
    assert (end["type"], end["status"]) == ("run.end", "canceled")


# ---- deadlines: the command ends, whatever the deck does ---------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "def run(ctx):\n    while True:\n        pass",
        "async def run(ctx):\n    while True:\n        pass",
        "import time\ndef run(ctx):\n    time.sleep(600)",  # stuck in one C call: abandoned
        "import asyncio, time\nasync def run(ctx):\n    await asyncio.to_thread(time.sleep, 600)",
    ],
    ids=["sync busy loop", "async busy loop", "blocking call", "blocking call in to_thread"],
)
def test_a_deck_past_its_timeout_ends_the_command_with_one_line(tmp_path: Path, body: str):
    action = compute_deck(tmp_path, "work.py", body, schemas=True)
    root = timed_root(tmp_path, action, timeout_ms=300)
    trace = tmp_path / "t.jsonl"
    result = gambit("run", str(root), "--message", "go", "--trace", str(trace), cwd=tmp_path)
    assert result.returncode == 1  # and it exited at all: the guard did not fire
    assert one_error_line(result) == (
        f"error: Timeout exceeded: {action} was still running after 300 ms "
        "(guardrails.timeoutMs; fix: raise it, or make the deck finish sooner)"
    )
    end = json.loads(trace.read_text().splitlines()[-1])
    assert (end["type"], end["status"]) == ("run.end", "failed")
    assert end["error"].startswith("Timeout exceeded")


# ---- output JSON cannot represent --------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "what"),
    [
        ('{"x": float("nan")}', "NaN at output.x"),
        ('[1, float("inf")]', "Infinity at output[1]"),
        ('{"tags": {"a"}}', "a value of type set ({'a'}) at output.tags"),
        ('{"raw": b"x"}', "a value of type bytes (b'x') at output.raw"),
    ],
)
def test_output_json_cannot_represent_is_one_line_naming_the_deck(
    tmp_path: Path, returned: str, what: str
):
    deck = compute_deck(tmp_path, "deck.py", f"def run(ctx):\n    return {returned}")
    result = gambit("run", str(deck), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""  # nothing half printed, no invalid JSON
    assert one_error_line(result).startswith(
        f"error: {deck} returned {what}, which JSON cannot represent (fix: "
    )


def test_a_model_deck_output_with_nan_is_not_printed_as_invalid_json(
    tmp_path: Path, fake_server: FakeModelServer
):
    """The printer is strict too: a model's JSON may hold NaN (Python's parser accepts it)."""
    (tmp_path / "PROMPT.md").write_text(
        "+++\n"
        'modelParams.model = "openresponses/fake"\n'
        "respond = true\n"
        'responseSchema = "./out.json"\n'
        "+++\n\nAnswer.\n"
    )
    (tmp_path / "out.json").write_text('{"type": "object"}')
    nan_payload = FunctionCall("gambit_respond", '{"payload": {"x": NaN}}')
    fake_server.queue(Reply(function_calls=[nan_payload]))
    result = gambit(
        "run", str(tmp_path / "PROMPT.md"), "--message", "hi", cwd=tmp_path, env=fake_server.env()
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert one_error_line(result).startswith(
        f"error: {tmp_path / 'PROMPT.md'}: its output is not valid JSON ("
    )


# ---- memory ------------------------------------------------------------------------------------

HOARD = """
def run(ctx):
    hoard = []
    while True:
        hoard.append(bytearray(1_000_000))
"""
MEMORY_LIMIT = 400_000_000  # bytes of address space for the whole process (RLIMIT_AS)


def test_a_deck_out_of_memory_reports_the_memory_error(tmp_path: Path):
    deck = compute_deck(tmp_path, "deck.py", HOARD)
    result = gambit("run", str(deck), cwd=tmp_path, memory=MEMORY_LIMIT)
    assert result.returncode == 1
    assert one_error_line(result) == f"error: {deck} raised MemoryError: out of memory"


def test_what_a_deck_held_when_memory_ran_out_is_released_for_the_rest_of_the_run(
    tmp_path: Path,
):
    """The onError handler of the action that ran out of memory runs (in a thread of its own,
    which needs memory): the failed deck's locals are not kept alive by its error."""
    action = compute_deck(tmp_path, "work.py", HOARD, schemas=True)
    root = timed_root(tmp_path, action, timeout_ms=60_000)
    root.write_text(
        root.read_text().replace(
            "[[actions]]", '[handlers.onError]\npath = "./on_error.py"\n[[actions]]'
        )
    )
    (tmp_path / "on_error.py").write_text(
        "import gambit\n"
        "deck = gambit.define_deck(\n"
        "    run=lambda ctx: {'message': 'handled the failure'},\n"
        "    context_schema={'type': 'object'}, response_schema={'type': 'object'},\n"
        ")\n"
    )
    trace = tmp_path / "t.jsonl"
    result = gambit(
        "run",
        str(root),
        "--message",
        "go",
        "--trace",
        str(trace),
        cwd=tmp_path,
        memory=MEMORY_LIMIT,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    [work] = [e for e in events if e["type"] == "tool.result" and e["name"] == "work"]
    assert "handled the failure" in work["result"]
    assert "HANDLER_FALLBACK" not in work["result"]
