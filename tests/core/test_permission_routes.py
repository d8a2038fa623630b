"""Permissions hold for every deck a run starts (docs/decisions.md, "Permissions and built-in
tools"; docs/decks.md, "Permissions hold for every deck a run starts").

Every route by which a run starts a deck is taken once: an action (`path` and `execute`),
`ctx.spawn_and_wait` from an async and from a sync compute deck, each handler (onError,
onBusy, onIdle), and the root runs of a scenario and of a grader under workspace grants. In
each, a parent allowed to read only `./A` starts a reader deck that declares `read = true`;
the reader's read inside A succeeds (the grant is inherited, not dropped) and its read of a
file outside A is a 403, whose content never reaches the model.

The decks are real files and the model is the scripted fake model (`ScriptedProvider`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gambit.core import Guardrails, RunError, grade_state, run_deck, run_scenario
from gambit.core._permissions import grants
from gambit.core._runtime import _execute
from gambit.providers.offline import Call, Reply, ScriptedProvider

from .conftest import ACTION_SCHEMAS, GRADER_SCHEMAS, MODEL, DeckFolder, Recorder

SECRET = "top secret: do not leak"
READ_A_ONLY = '[permissions]\nread = ["./A"]\n'
READ_ALL = "[permissions]\nread = true\n"
# A handler's input is the event payload, an object.
HANDLER_SCHEMAS = """
contextSchema = "../object.json"
responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
"""
SCRIPT_SCHEMAS = (
    'context_schema="gambit://schemas/scenarios/plain_chat_input_optional.zod.ts", '
    'response_schema="gambit://schemas/scenarios/plain_chat_output.zod.ts"'
)
# A bound on every run: a route that never fires fails its test instead of hanging it.
BOUNDED = Guardrails(timeout_ms=20_000)


@pytest.fixture
def decks(tmp_path: Path) -> DeckFolder:
    """The workspace: `A/inside.txt` (granted), `outside/secret.txt` (not), decks under it."""
    (tmp_path / "A").mkdir()
    (tmp_path / "A" / "inside.txt").write_text("inside text\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET + "\n")
    folder = DeckFolder(tmp_path)
    folder.write("decks/object.json", '{"type": "object"}')
    return folder


def reads(root: Path) -> Reply:
    """The reader's model turn: read a file inside A, then the secret outside it."""
    return Reply(
        calls=[
            Call("read_file", {"path": str(root / "A" / "inside.txt")}),
            Call("read_file", {"path": str(root / "outside" / "secret.txt")}),
        ]
    )


def read_results(rec: Recorder) -> list[dict[str, Any]]:
    return [json.loads(e["result"]) for e in rec.of("tool.result") if e["name"] == "read_file"]


def assert_narrowed(rec: Recorder, provider: ScriptedProvider) -> None:
    """The reader read inside A (200) and was refused outside it (403); the secret never
    reached the model."""
    results = read_results(rec)
    assert [r["status"] for r in results] == [200, 403], results
    assert "inside text" in results[0]["payload"]["content"]
    assert results[1]["code"] == "permission_denied"
    for recorded in provider.requests:
        assert SECRET not in recorded.model_dump_json()


def reader(decks: DeckFolder, rel: str, schemas: str = ACTION_SCHEMAS) -> Path:
    """An LLM deck that declares `read = true`: it asks for more than its parent has."""
    return decks.deck(rel, MODEL + schemas + READ_ALL, "Read what you are asked to.")


def parent(decks: DeckFolder, extra: str) -> Path:
    """The parent, at the workspace root, allowed to read `./A` only."""
    return decks.deck("PROMPT.md", MODEL + READ_A_ONLY + extra, "Delegate.")


async def run(path: Path, provider: ScriptedProvider, rec: Recorder, **options: Any) -> Any:
    return await run_deck(path, provider=provider, guardrails=BOUNDED, **rec.kwargs(), **options)


# ---- actions ----------------------------------------------------------------------------------


async def test_an_action_deck_cannot_widen_its_parent(decks: DeckFolder):
    reader(decks, "decks/reader/PROMPT.md")
    path = parent(
        decks, '[[actions]]\nname = "reader"\ndescription = "d"\npath = "./decks/reader/PROMPT.md"'
    )
    provider = ScriptedProvider().enqueue(
        Call("reader", {}), reads(decks.root), "reader done", "root done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "root done"
    assert_narrowed(rec, provider)


SPAWNER_ASYNC = f"""
import gambit
async def run(ctx):
    return await ctx.spawn_and_wait("./reader/PROMPT.md", "")
deck = gambit.define_deck(run=run, {SCRIPT_SCHEMAS})
"""
SPAWNER_SYNC = f"""
import gambit
def run(ctx):
    return ctx.spawn_and_wait("./reader/PROMPT.md", "")
deck = gambit.define_deck(run=run, {SCRIPT_SCHEMAS})
"""


@pytest.mark.parametrize("module", [SPAWNER_ASYNC, SPAWNER_SYNC], ids=["async", "sync"])
async def test_a_deck_spawned_by_an_execute_action_cannot_widen_its_parent(
    decks: DeckFolder, module: str
):
    """The `execute` action route and `ctx.spawn_and_wait` (the reproducer of issue 24: the
    spawned deck was run as a root and read the secret)."""
    reader(decks, "decks/reader/PROMPT.md")
    decks.write("decks/spawner.py", module)
    path = parent(
        decks, '[[actions]]\nname = "spawner"\ndescription = "d"\nexecute = "./decks/spawner.py"'
    )
    provider = ScriptedProvider().enqueue(
        Call("spawner", {}), reads(decks.root), "reader done", "root done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "root done"
    assert_narrowed(rec, provider)


async def test_an_action_entry_narrows_what_a_compute_action_spawns(decks: DeckFolder):
    """A compute deck passes on what it was given, narrowed by the `[[actions]]` entry's own
    `permissions`: here the entry grants no read, so the spawned reader is offered no read
    tool and its calls of one are unknown tools (404)."""
    reader(decks, "decks/reader/PROMPT.md")
    decks.write("decks/spawner.py", SPAWNER_ASYNC)
    path = parent(
        decks,
        '[[actions]]\nname = "spawner"\ndescription = "d"\nexecute = "./decks/spawner.py"\n'
        "permissions.read = false\n",
    )
    provider = ScriptedProvider().enqueue(
        Call("spawner", {}), reads(decks.root), "reader done", "root done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "root done"
    assert [r["status"] for r in read_results(rec)] == [404, 404]
    assert not provider.requests[1].tools  # the reader: no built-in tool offered
    for recorded in provider.requests:
        assert SECRET not in recorded.model_dump_json()


async def test_a_compute_root_passes_the_workspace_grant_to_what_it_spawns(decks: DeckFolder):
    reader(decks, "decks/reader/PROMPT.md")
    path = decks.write("decks/spawner.py", SPAWNER_ASYNC)
    provider = ScriptedProvider().enqueue(reads(decks.root), "reader done")
    rec = Recorder()
    workspace = grants(decks.root, read=["./A"])
    result = await run(path, provider, rec, workspace_permissions=workspace)
    assert result.output == "reader done"
    assert_narrowed(rec, provider)


# ---- handlers ---------------------------------------------------------------------------------


async def test_an_on_error_handler_cannot_widen_the_deck_that_declares_it(decks: DeckFolder):
    reader(decks, "decks/handler/PROMPT.md", HANDLER_SCHEMAS)
    decks.write(
        "decks/boom.py",
        "import gambit\ndef run(ctx):\n    raise ValueError('kaput')\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    path = parent(
        decks,
        '[handlers.onError]\npath = "./decks/handler/PROMPT.md"\n'
        '[[actions]]\nname = "boom"\ndescription = "d"\nexecute = "./decks/boom.py"',
    )
    provider = ScriptedProvider().enqueue(
        Call("boom", {}), reads(decks.root), "handled", "root done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "root done"
    assert_narrowed(rec, provider)


def gate_pair() -> tuple[Any, Any]:
    """Two scripted replies: one that waits until the other has been used. The waiting one
    keeps a model call (or an action) running until the handler has done its reads."""
    done = asyncio.Event()

    async def wait_for_handler(request: Any) -> str:
        await done.wait()
        return "slow done"

    def handler_finished(request: Any) -> str:
        done.set()
        return "handler note"

    return wait_for_handler, handler_finished


async def test_an_on_busy_handler_cannot_widen_the_deck_that_declares_it(decks: DeckFolder):
    reader(decks, "decks/handler/PROMPT.md", HANDLER_SCHEMAS)
    decks.deck("decks/slow/PROMPT.md", MODEL + ACTION_SCHEMAS, "Take your time.")
    path = parent(
        decks,
        '[handlers.onBusy]\npath = "./decks/handler/PROMPT.md"\ndelayMs = 5\n'
        '[[actions]]\nname = "slow"\ndescription = "d"\npath = "./decks/slow/PROMPT.md"',
    )
    wait_for_handler, handler_finished = gate_pair()
    provider = ScriptedProvider().enqueue(
        Call("slow", {}), wait_for_handler, reads(decks.root), handler_finished, "root done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "root done"
    assert "handler note\n" in rec.text  # the busy handler ran
    assert_narrowed(rec, provider)


async def test_an_on_idle_handler_cannot_widen_the_deck_that_declares_it(decks: DeckFolder):
    reader(decks, "decks/handler/PROMPT.md", HANDLER_SCHEMAS)
    path = parent(decks, '[handlers.onIdle]\npath = "./decks/handler/PROMPT.md"\ndelayMs = 5\n')
    wait_for_handler, handler_finished = gate_pair()
    provider = ScriptedProvider().enqueue(wait_for_handler, reads(decks.root), handler_finished)
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "slow done"
    assert "handler note\n" in rec.text  # the idle handler ran
    assert_narrowed(rec, provider)


async def test_a_handler_of_an_action_deck_inherits_that_deck_not_the_root(decks: DeckFolder):
    """Handlers are children of the deck that declares them: the root may read A and
    `outside`, the middle deck only A, so the middle deck's onError handler cannot read
    `outside` either."""
    reader(decks, "decks/handler/PROMPT.md", HANDLER_SCHEMAS)
    decks.write(
        "decks/boom.py",
        "import gambit\ndef run(ctx):\n    raise ValueError('kaput')\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.deck(
        "decks/middle/PROMPT.md",
        MODEL
        + ACTION_SCHEMAS
        + '[permissions]\nread = ["../../A"]\n'
        + '[handlers.onError]\npath = "../handler/PROMPT.md"\n'
        + '[[actions]]\nname = "boom"\ndescription = "d"\nexecute = "../boom.py"',
    )
    path = decks.deck(
        "PROMPT.md",
        MODEL
        + '[permissions]\nread = ["./A", "./outside"]\n'
        + '[[actions]]\nname = "middle"\ndescription = "d"\npath = "./decks/middle/PROMPT.md"',
    )
    provider = ScriptedProvider().enqueue(
        Call("middle", {}), Call("boom", {}), reads(decks.root), "handled", "middle done", "done"
    )
    rec = Recorder()
    assert (await run(path, provider, rec)).output == "done"
    assert_narrowed(rec, provider)


# ---- root runs: scenarios and graders under workspace grants ----------------------------------


async def test_scenario_roots_hold_to_the_workspace_grant(decks: DeckFolder):
    root = reader(decks, "decks/root/PROMPT.md", "")
    persona = reader(decks, "decks/persona/PROMPT.md", "")
    provider = ScriptedProvider().enqueue(
        reads(decks.root),  # the root deck speaks first
        "hello",
        reads(decks.root),  # then the persona
        "thanks, bye",
        "goodbye",  # the root answers the persona
    )
    rec = Recorder()
    result = await run_scenario(
        root,
        persona,
        provider=provider,
        max_turns=1,
        workspace_permissions=grants(decks.root, read=["./A"]),
        guardrails=BOUNDED,
        on_trace=rec.events.append,
    )
    assert result.turns == 1
    statuses = [r["status"] for r in read_results(rec)]
    assert statuses == [200, 403, 200, 403]
    for recorded in provider.requests:
        assert SECRET not in recorded.model_dump_json()


async def test_a_grader_root_holds_to_the_workspace_grant(decks: DeckFolder):
    from gambit.core import state_from_dict

    grader = reader(decks, "decks/grader/PROMPT.md", GRADER_SCHEMAS)
    state = state_from_dict(
        {
            "runId": "r",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        }
    )
    provider = ScriptedProvider().enqueue(reads(decks.root), '{"score": 1, "reason": "fine"}')
    rec = Recorder()
    grading, _ = await grade_state(
        grader,
        state,
        provider=provider,
        workspace_permissions=grants(decks.root, read=["./A"]),
        guardrails=BOUNDED,
        on_trace=rec.events.append,
    )
    assert grading.status == "completed", grading.error
    assert_narrowed(rec, provider)


async def test_a_scenario_entry_narrows_its_persona(decks: DeckFolder):
    """A persona started as the root's `[[scenarios]]` entry is narrowed by the entry's
    `permissions`, as an action is by its `[[actions]]` entry, however much the persona
    declares and the host grants."""
    reader(decks, "decks/persona/PROMPT.md", "")
    root = decks.deck(
        "PROMPT.md",
        MODEL
        + '[[scenarios]]\npath = "./decks/persona/PROMPT.md"\n'
        + '[scenarios.permissions]\nread = ["./A"]\n',
        "Answer.",
    )
    provider = ScriptedProvider().enqueue(
        "hello",  # the root speaks first (no permissions: no tools)
        reads(decks.root),  # the persona reads inside A, then outside it
        "thanks, bye",
        "goodbye",
    )
    rec = Recorder()
    result = await run_scenario(
        root,
        decks.root / "decks/persona/PROMPT.md",
        provider=provider,
        max_turns=1,
        workspace_permissions=grants(decks.root, read=True),
        guardrails=BOUNDED,
        on_trace=rec.events.append,
    )
    assert result.turns == 1
    assert_narrowed(rec, provider)
    layers = [e for e in rec.of("deck.start") if "persona" in e["deckPath"]][0]["permissions"]
    assert [layer["name"] for layer in layers["layers"]][-2:] == ["declaration", "reference"]


async def test_a_grader_entry_narrows_its_grader_in_verify(decks: DeckFolder):
    from gambit.core._verify_run import run_verify

    reader(decks, "decks/grader/PROMPT.md", GRADER_SCHEMAS)
    decks.deck("decks/persona/PROMPT.md", MODEL, "Say bye.")
    root = decks.deck(
        "PROMPT.md",
        MODEL
        + '[[scenarios]]\npath = "./decks/persona/PROMPT.md"\n'
        + '[[graders]]\npath = "./decks/grader/PROMPT.md"\n'
        + '[graders.permissions]\nread = ["./A"]\n',
        "Answer.",
    )
    provider = ScriptedProvider().enqueue(
        "hello", "", reads(decks.root), '{"score": 1, "reason": "fine"}'
    )
    rec = Recorder()
    report = await run_verify(
        root,
        provider=provider,
        runs=1,
        repeats=1,
        max_turns=1,
        workspace_permissions=grants(decks.root, read=True),
        guardrails=BOUNDED,
        on_trace=rec.events.append,
    )
    grades = [g for g in report.grades]
    assert grades and grades[0].error is None, grades
    assert_narrowed(rec, provider)


# ---- the engine refuses a child without its parent's permissions ------------------------------


async def test_a_child_without_its_parents_permissions_is_an_internal_error(decks: DeckFolder):
    """No caller can start a child as if it were a root: a deck below the root that is given
    no parent permission set fails instead of starting from the host's grants."""
    from gambit.core import load_deck
    from gambit.core._runtime._limits import SYSTEM_CLOCK, _root_limits
    from gambit.core._runtime._run import _Run

    path = reader(decks, "decks/reader/PROMPT.md")
    provider = ScriptedProvider().enqueue(reads(decks.root), "reader done")
    deck = load_deck(path)
    run_ = _Run(
        run_id="r",
        provider=provider,
        resolver=None,
        default_model=None,
        model_override=None,
        mode="responses",
        stream=False,
        on_stream_text=None,
        on_trace=None,
        on_tool=None,
        decks={deck.path: deck},
        strict=False,
    )
    with pytest.raises(RunError, match="parent's permissions") as info:
        await _execute.execute_deck(
            run_,
            deck,
            "",
            depth=1,
            parent_action_call_id="call",
            limits=_root_limits(Guardrails(), SYSTEM_CLOCK),
        )
    assert info.value.code == "internal_error"
    assert provider.requests == []  # refused before any model call
