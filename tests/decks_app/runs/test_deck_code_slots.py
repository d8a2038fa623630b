"""A compute deck past its timeout frees its worker's slot (docs/decks.md, "Trust and limits"):
its run fails with the timeout, and the process's run loop is free for the next run, even when
the deck's code is an async busy loop (which used to block the run loop itself).

The run loop runs in a thread of its own, as in `gambit worker`, and each delivered task waits
in another thread with a generous timeout: a blocked loop fails the test, it does not hang it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decks_app.models import Run
from decks_app.runs import worker
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace

pytestmark = pytest.mark.django_db(transaction=True)

GUARD_SECONDS = 20.0

SPIN = """
import gambit
{kind} run(ctx):
    while True:
        pass
deck = gambit.define_deck(
    run=run, context_schema={{"type": "object"}}, response_schema={{"type": "string"}}
)
"""
ROOT = """+++
label = "spinner"
modelParams.model = "offline/demo"
guardrails.timeoutMs = 300
[[actions]]
name = "spin"
description = "Spin."
execute = "./spin.py"
+++

Call spin.
"""
HELLO = """
import gambit
def run(ctx):
    return "hello " + (ctx.input or "")
deck = gambit.define_deck(run=run)
"""


@pytest.fixture
def run_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[asyncio.AbstractEventLoop]:
    """This process's run loop, in a daemon thread (a loop a deck blocks stays blocked)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="run-loop", daemon=True)
    thread.start()
    monkeypatch.setattr(worker, "_loop", None)
    worker.attach(loop)
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(GUARD_SECONDS)
    if not thread.is_alive():
        loop.close()


def deliver(run_id: str) -> Any:
    """`worker.execute(run_id)` as a backend thread would run it: its status, or a timeout."""
    outcome: list[Any] = []
    task = threading.Thread(target=lambda: outcome.append(worker.execute(run_id)), daemon=True)
    task.start()
    task.join(GUARD_SECONDS)
    return outcome[0] if outcome else "still running"


@pytest.mark.parametrize("kind", ["def", "async def"], ids=["sync", "async"])
def test_a_timed_out_compute_deck_frees_the_slot_for_the_next_run(
    tmp_path: Path, settings: Any, run_loop: asyncio.AbstractEventLoop, kind: str
):
    folder = tmp_path / "spinner"
    folder.mkdir()
    (folder / "PROMPT.md").write_text(ROOT)
    (folder / "spin.py").write_text(SPIN.format(kind=kind))
    (tmp_path / "hello").mkdir()
    (tmp_path / "hello" / "deck.py").write_text(HELLO)
    settings.GAMBIT_WORKSPACE = str(tmp_path)
    workspace = current_workspace()

    spinning = send_message(create_session(workspace, "spinner/PROMPT.md"), "go")
    assert deliver(spinning.id) == "failed"
    spinning.refresh_from_db()
    assert spinning.status == "failed" and spinning.error.startswith("Timeout exceeded: ")
    assert "spin.py was still running after 300 ms" in spinning.error

    following = send_message(create_session(workspace, "hello/deck.py"), "Ada")
    assert deliver(following.id) == "completed"
    assert Run.objects.get(pk=following.id).result == {"output": "hello Ada"}
    # Nothing of the stopped deck keeps running in this process (no thread is in its code).
    deadline = time.monotonic() + 5.0
    while running_code_of(folder / "spin.py"):
        assert time.monotonic() < deadline, "the deck's code still runs"
        time.sleep(0.05)


def running_code_of(module: Path) -> list[int]:
    """The threads of this process whose stack is in `module`'s code now."""
    found = []
    for ident, frame in sys._current_frames().items():
        while frame is not None:
            if frame.f_code.co_filename == str(module):
                found.append(ident)
                break
            frame = frame.f_back
    return found
