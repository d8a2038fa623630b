"""A compute deck's code runs in a daemon thread of its own (docs/decks.md, "Trust and
limits"): a busy loop cannot block the run, the deadline or a cancel stops it, whatever it
raises is the deck's error, and its output must be JSON.

The busy decks count their turns in a probe module the test puts in `sys.modules`, so the test
sees whether the deck's code still runs; each also stops by itself once the probe says so (or
after a long guard), so a failing test never leaves a thread spinning in the test process.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types
import weakref
from pathlib import Path
from typing import Any

import pytest

from gambit.core import Guardrails, RunError, run_deck
from gambit.providers.offline import ScriptedProvider, Stream

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder, Recorder, wait_until

GUARD_SECONDS = 10.0


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Any:
    """What busy decks count in (`turns`) and stop on (`done`); a timer sets `done` after
    GUARD_SECONDS, so that a deck the engine fails to stop ends anyway."""
    probe = types.SimpleNamespace(turns=0, done=False)
    monkeypatch.setitem(sys.modules, "deck_probe_isolation", probe)
    guard = threading.Timer(GUARD_SECONDS, lambda: setattr(probe, "done", True))
    guard.daemon = True
    guard.start()
    yield probe
    probe.done = True
    guard.cancel()


SYNC_SPIN = """
import deck_probe_isolation as probe, gambit
def run(ctx):
    while not probe.done:
        probe.turns += 1
    return "gave up"
deck = gambit.define_deck(run=run)
"""
ASYNC_SPIN = SYNC_SPIN.replace("def run(ctx)", "async def run(ctx)")


async def turns_stop(probe: Any) -> None:
    """Wait until the deck's loop no longer turns (its thread was stopped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while True:
        before = probe.turns
        await asyncio.sleep(0.05)
        if probe.turns == before:
            return
        assert loop.time() < deadline, "the deck's code still runs"


def running_code_of(module: Path) -> list[int]:
    """The threads of this process whose stack is in `module`'s code now."""
    found = []
    for ident, frame in sys._current_frames().items():
        current: types.FrameType | None = frame
        while current is not None:
            if current.f_code.co_filename == str(module):
                found.append(ident)
                break
            current = current.f_back
    return found


@pytest.mark.parametrize("module", [SYNC_SPIN, ASYNC_SPIN], ids=["sync", "async"])
async def test_a_busy_run_is_stopped_at_the_deadline(decks: DeckFolder, probe: Any, module: str):
    path = decks.write("d/spin.py", module)
    run = run_deck(path, provider=ScriptedProvider(), guardrails=Guardrails(timeout_ms=300))
    with pytest.raises(RunError) as info:
        # An async busy loop used to block this very loop: the guard timer ended it.
        await asyncio.wait_for(run, GUARD_SECONDS * 2)
    assert info.value.code == "timeout"
    assert str(info.value) == (
        f"Timeout exceeded: {path} was still running after 300 ms "
        "(guardrails.timeoutMs; fix: raise it, or make the deck finish sooner)"
    )
    assert not probe.done  # stopped by the engine, not by the guard
    await turns_stop(probe)
    await wait_until(lambda: not running_code_of(path))


async def test_cancelling_the_run_stops_the_deck_code(decks: DeckFolder, probe: Any):
    path = decks.write("d/spin.py", SYNC_SPIN)
    rec = Recorder()
    task = asyncio.create_task(run_deck(path, provider=ScriptedProvider(), **rec.kwargs()))
    await wait_until(lambda: probe.turns > 0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await turns_stop(probe)
    assert rec.events[-1]["type"] == "run.end" and rec.events[-1]["status"] == "canceled"


async def test_a_timed_out_async_deck_cancels_the_child_it_awaits(decks: DeckFolder):
    """spawn_and_wait from an async run (on its thread's own loop) runs the child on the
    run's loop, and the child is cancelled with its parent."""
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.write(
        "d/deck.py",
        "import gambit\nasync def run(ctx):\n"
        "    return await ctx.spawn_and_wait('./child/PROMPT.md', '')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    provider = ScriptedProvider()
    provider.enqueue(Stream(["child ", "answer"], delay=1.0))
    rec = Recorder()
    with pytest.raises(RunError, match="Timeout exceeded"):
        await run_deck(
            path,
            provider=provider,
            stream=True,
            guardrails=Guardrails(timeout_ms=300),
            **rec.kwargs(),
        )
    await asyncio.sleep(1.5)  # the child's reply would have finished by now
    assert rec.events[-1]["type"] == "run.end"
    assert rec.of("model.result") == []


async def test_an_async_run_can_spawn_log_and_set_meta_from_its_thread(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.write(
        "d/deck.py",
        "import asyncio, gambit\nasync def run(ctx):\n"
        "    ctx.log('starting')\n"
        "    ctx.set_session_meta('k', 'v')\n"
        "    first, second = await asyncio.gather(\n"
        "        ctx.spawn_and_wait('./child/PROMPT.md', ''),\n"
        "        ctx.spawn_and_wait('./child/PROMPT.md', ''),\n"
        "    )\n"
        "    return first + ' ' + second\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    provider = ScriptedProvider()
    provider.enqueue("one", "two")
    rec = Recorder()
    result = await run_deck(path, provider=provider, **rec.kwargs())
    assert sorted(result.output.split()) == ["one", "two"]
    assert [e["message"] for e in rec.of("log")] == ["starting"]
    assert rec.states[-1].meta == {"k": "v"}


@pytest.mark.parametrize("kind", ["def", "async def"])
async def test_the_session_state_changes_on_the_run_loop_only(decks: DeckFolder, kind: str):
    """A deck's meta and messages are changed on the run's loop (where its children change
    the same state), not in the deck's thread: on_state is called from the run's thread."""
    path = decks.write(
        "d/deck.py",
        f"import gambit\n{kind} run(ctx):\n"
        "    ctx.set_session_meta('k', 'v')\n"
        "    ctx.append_message('assistant', 'noted')\n"
        "    return ctx.get_session_meta('k')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    published: list[tuple[int, Any]] = []
    result = await run_deck(
        path,
        provider=ScriptedProvider(),
        on_state=lambda state: published.append((threading.get_ident(), state)),
    )
    assert result.output == "v"
    assert {ident for ident, _ in published} == {threading.get_ident()}
    assert published[-1][1].meta == {"k": "v"}


async def test_an_async_run_can_hand_blocking_calls_to_threads(decks: DeckFolder):
    path = decks.write(
        "d/deck.py",
        "import asyncio, gambit\nasync def run(ctx):\n"
        "    loop = asyncio.get_running_loop()\n"
        "    first = await asyncio.to_thread(sum, [1, 2])\n"
        "    second = await loop.run_in_executor(None, max, [3, 4])\n"
        "    return first + second\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    assert (await run_deck(path, provider=ScriptedProvider())).output == "7"


@pytest.mark.parametrize(
    ("raising", "name"),
    [
        ("import sys\ndef run(ctx):\n    sys.exit(3)", "SystemExit: 3"),
        ("def run(ctx):\n    raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("async def run(ctx):\n    raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("def run(ctx):\n    raise GeneratorExit", "GeneratorExit"),
    ],
)
async def test_an_exit_or_interrupt_raised_by_the_deck_is_the_deck_error(
    decks: DeckFolder, raising: str, name: str
):
    path = decks.write("d/deck.py", f"import gambit\n{raising}\ndeck = gambit.define_deck(run=run)")
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=ScriptedProvider())
    assert info.value.code == "deck_failed"
    assert str(info.value).startswith(f"{path} raised {name}")
    assert type(info.value.__cause__).__name__ == name.split(":")[0]


@pytest.mark.parametrize(
    ("returned", "schema", "problem"),
    [
        ('{"x": float("nan")}', None, "NaN at output.x"),
        ('{"x": float("-inf")}', None, "-Infinity at output.x"),
        ('{"x": float("nan")}', {"type": "object"}, "NaN at output.x"),
        ('{"ids": {1, 2}}', None, "a value of type set ({1, 2}) at output.ids"),
        ('{"ids": {1, 2}}', {"type": "object"}, "a value of type set ({1, 2}) at output.ids"),
        ("[object()]", None, "a value of type object (<object object at"),
        ("{(1, 2): 'pair'}", None, "a key of type tuple ((1, 2)) at output"),
    ],
)
async def test_output_json_cannot_represent_fails_the_deck_naming_where(
    decks: DeckFolder, returned: str, schema: dict[str, Any] | None, problem: str
):
    path = decks.write(
        "d/deck.py",
        f"import gambit\ndef run(ctx):\n    return {returned}\n"
        f"deck = gambit.define_deck(run=run, response_schema={schema!r})\n",
    )
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=ScriptedProvider())
    assert info.value.code == "invalid_output"
    message = str(info.value)
    assert message.startswith(f"{path} returned {problem}")
    assert "which JSON cannot represent (fix: " in message


async def test_a_memory_error_does_not_keep_what_the_deck_held(
    decks: DeckFolder, monkeypatch: pytest.MonkeyPatch
):
    """The deck's frames are cleared: what filled the memory goes with them, even while the
    error (and its cause) is kept."""
    held = types.SimpleNamespace(ref=None)
    monkeypatch.setitem(sys.modules, "deck_probe_memory", held)
    path = decks.write(
        "d/deck.py",
        "import deck_probe_memory as held, gambit, weakref\n"
        "class Hoard:\n    pass\n"
        "def run(ctx):\n"
        "    hoard = Hoard()\n"
        "    held.ref = weakref.ref(hoard)\n"
        "    raise MemoryError\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=ScriptedProvider())
    assert str(info.value) == f"{path} raised MemoryError: out of memory"
    assert isinstance(info.value.__cause__, MemoryError)
    assert isinstance(held.ref, weakref.ref) and held.ref() is None
