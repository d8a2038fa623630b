"""The run loop (docs/decks.md, "How a deck runs"): compute and LLM decks, context injection,
streaming, actions and their envelopes, handlers, synthetic tools, guardrails, usage,
cancellation and the trace."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import types
from typing import Any

import pytest

from gambit.core import (
    FunctionCallItem,
    Guardrails,
    ProviderError,
    ResolvedModel,
    ResponseUsage,
    RunError,
    SavedState,
    is_end_signal,
    items_to_messages,
    load_deck_tree,
    run_deck,
)
from gambit.providers.offline import Call, Fail, Reply, ScriptedProvider, Stream

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder, Recorder, wait_until

OBJECT_IO = """
contextSchema = "./in.json"
responseSchema = "./out.json"
"""


def input_items(provider: ScriptedProvider, index: int = -1) -> list[Any]:
    return list(provider.requests[index].input)


def user_texts(items: list[Any]) -> list[str]:
    return [
        "".join(p.text for p in item.content)
        for item in items
        if getattr(item, "type", None) == "message" and item.role == "user"
    ]


def calls_named(items: list[Any], name: str) -> list[FunctionCallItem]:
    return [i for i in items if isinstance(i, FunctionCallItem) and i.name == name]


# ---- compute decks ----------------------------------------------------------------------------


async def test_compute_deck_with_string_schemas(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        deck = gambit.define_deck(
            run=lambda ctx: "ok:" + ctx.input,
            context_schema={"type": "string"},
            response_schema={"type": "string"},
        )
        """,
    )
    result = await run_deck(path, provider=ScriptedProvider(), context="hello")
    assert result.output == "ok:hello"


async def test_compute_deck_with_builtin_plain_chat_schemas(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        deck = gambit.define_deck(
            run=lambda ctx: "ok",
            context_schema="gambit://schemas/scenarios/plain_chat_input_optional.zod.ts",
            response_schema="gambit://schemas/scenarios/plain_chat_output.zod.ts",
        )
        """,
    )
    assert (await run_deck(path, provider=ScriptedProvider())).output == "ok"


async def test_compute_log_traces(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        def run(ctx):
            ctx.log({"message": "child log", "level": "debug", "meta": {"step": 1}})
            ctx.log({"title": "summary", "message": "details", "body": {"ok": True}})
            return "done"
        deck = gambit.define_deck(run=run)
        """,
    )
    rec = Recorder()
    await run_deck(path, provider=ScriptedProvider(), **rec.kwargs())
    first, second = rec.of("log")
    assert (first["title"], first["message"], first["body"], first["level"]) == (
        "child log",
        "child log",
        "child log",
        "debug",
    )
    assert first["deckPath"] == str(path.resolve()) and first["meta"] == {"step": 1}
    assert (second["title"], second["message"], second["body"]) == (
        "summary",
        "details",
        {"ok": True},
    )
    assert rec.types() == ["run.start", "log", "log", "run.end"]


async def test_compute_root_object_without_schema_is_json(decks: DeckFolder):
    path = decks.write(
        "c/deck.py", "import gambit\ndeck = gambit.define_deck(run=lambda ctx: {'a': 1})\n"
    )
    assert (await run_deck(path, provider=ScriptedProvider())).output == '{"a": 1}'


async def test_async_compute_deck(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        "import asyncio, gambit\nasync def run(ctx):\n    await asyncio.sleep(0)\n    return 'async ok'\ndeck = gambit.define_deck(run=run)\n",
    )
    assert (await run_deck(path, provider=ScriptedProvider())).output == "async ok"


async def test_ctx_fail_fails_the_run_with_its_code(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        "import gambit\ndef run(ctx):\n    ctx.fail('nope', code='E1')\ndeck = gambit.define_deck(run=run)\n",
    )
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=ScriptedProvider())
    assert str(info.value) == "nope" and info.value.code == "E1"


@pytest.mark.parametrize(
    ("deck_timeout", "inherited", "sleep", "fails"),
    [(5, 1000, 0.2, True), (0, 1000, 0.05, False), (0, 10, 0.2, True)],
    ids=["deck-timeout", "zero-disables-local", "inherited-deadline"],
)
async def test_timeouts(
    decks: DeckFolder, deck_timeout: int, inherited: int, sleep: float, fails: bool
):  # 63-65
    decks.write(
        "c/child.py",
        f"import time, gambit\ndef run(ctx):\n    time.sleep({sleep})\n    return 'late'\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={'type': 'string'})\n",
    )
    root = decks.deck(
        "c/PROMPT.md",
        MODEL
        + f'[guardrails]\ntimeoutMs = {inherited}\n[[actions]]\nname = "slow"\ndescription = "d"\nexecute = "./child.py"',
    )
    tree = load_deck_tree(root)
    tree.decks[str((root.parent / "child.py").resolve())].guardrails = Guardrails(
        timeout_ms=deck_timeout
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("slow", {}), "finished")
    if fails:
        with pytest.raises(RunError, match="Timeout exceeded"):
            await run_deck(tree, provider=provider)
    else:
        assert (await run_deck(tree, provider=provider)).output == "finished"


async def test_session_meta_and_append_message_across_runs(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        def run(ctx):
            thread = ctx.get_session_meta("codex.threadId") or "thread-1"
            ctx.set_session_meta("codex.threadId", thread)
            ctx.append_message("user", ctx.input or "hi")
            ctx.append_message("assistant", "reply to " + (ctx.input or "hi"))
            return thread
        deck = gambit.define_deck(run=run)
        """,
    )
    first = await run_deck(path, provider=ScriptedProvider(), context="one")
    assert [m.role for m in first.state.messages] == ["user", "assistant"]
    second = await run_deck(path, provider=ScriptedProvider(), context="two", state=first.state)
    assert first.output == second.output == "thread-1"
    assert [m.role for m in second.state.messages] == ["user", "assistant", "user", "assistant"]
    assert second.state.run_id == first.state.run_id


async def test_spawn_and_wait_inherits_the_user_message(decks: DeckFolder):
    decks.deck("c/echo/PROMPT.md", MODEL + ACTION_SCHEMAS, "Echo the last user message.")
    path = decks.write(
        "c/deck.py",
        "import gambit\nasync def run(ctx):\n    return await ctx.spawn_and_wait('./echo/PROMPT.md', '')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    provider = ScriptedProvider()
    provider.enqueue(lambda request: user_texts(list(request.input))[-1])
    result = await run_deck(path, provider=provider, message="forward-this-message")
    assert result.output == "forward-this-message"


async def test_sync_compute_can_spawn_and_wait(decks: DeckFolder):
    decks.write(
        "c/child.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'child:' + ctx.input, context_schema={'type':'string'}, response_schema={'type':'string'})\n",
    )
    path = decks.write(
        "c/deck.py",
        "import gambit\ndef run(ctx):\n    return ctx.spawn_and_wait('./child.py', 'hi')\ndeck = gambit.define_deck(run=run)\n",
    )
    assert (await run_deck(path, provider=ScriptedProvider())).output == "child:hi"


# ---- LLM decks: input, messages, state ---------------------------------------------------------


async def test_context_injection_and_user_message(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL, "Be brief.")
    provider = ScriptedProvider()
    provider.enqueue("ok", "ok")
    rec = Recorder()
    await run_deck(path, provider=provider, context="hello", **rec.kwargs())
    items = input_items(provider, 0)
    assert items[0].role == "system" and user_texts(items) == []
    (context_call,) = calls_named(items, "gambit_context")
    assert context_call.arguments == "{}"
    assert items[2].output == '"hello"'
    await run_deck(path, provider=provider, context="hello", message="first turn")
    assert user_texts(input_items(provider, 1))[-1] == "first turn"
    call, result = rec.of("tool.call")[0], rec.of("tool.result")[0]
    assert call["args"] == {} and call["toolKind"] == "internal" and result["result"] == "hello"


async def test_message_without_context_injects_nothing(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue("hi")
    await run_deck(path, provider=provider, message="hello")
    items = input_items(provider)
    assert calls_named(items, "gambit_context") == [] and user_texts(items) == ["hello"]


async def test_optional_object_context_resolves_to_empty(decks: DeckFolder):
    decks.write(
        "d/in.json", json.dumps({"type": "object", "properties": {"q": {"type": "string"}}})
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./in.json"')
    provider = ScriptedProvider()
    provider.enqueue("ok")
    assert (await run_deck(path, provider=provider, message="pipeline recap")).output == "ok"
    assert input_items(provider)[2].output == "{}"


async def test_resume_does_not_reinject(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue("first answer", "second answer")
    first = await run_deck(path, provider=provider, context={"topic": "first"}, message="hi")
    assert first.state.format == "responses" and first.state.items and first.state.messages
    second = await run_deck(path, provider=provider, state=first.state, message="again")
    assert len(provider.requests) == 2
    items = input_items(provider, 1)
    assert len(calls_named(items, "gambit_context")) == 1
    assert sum(1 for i in items if getattr(i, "role", None) == "system") == 1
    assert user_texts(items) == ["hi", "again"]
    assert second.run_id == first.run_id


async def test_resuming_leaves_the_callers_state_as_it_was(decks: DeckFolder):
    """The run copies the state shallowly: the caller's object and what it holds must not
    change, and the resumed state's messages and refs match a conversion from scratch."""
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue("first answer", "second answer", "third answer")
    first = await run_deck(path, provider=provider, context={"topic": "first"}, message="hi")
    before = first.state.model_dump(mode="json")
    second = await run_deck(path, provider=provider, state=first.state, message="again")
    assert first.state.model_dump(mode="json") == before
    assert second.state.messages == items_to_messages(second.state.items)
    refs = second.state.message_refs
    assert [r.role for r in refs] == [m.role for m in second.state.messages]
    assert refs[: len(first.state.message_refs)] == first.state.message_refs  # ids kept
    # A state read back from JSON (no in-memory memo) resumes to the same conversation.
    reloaded = SavedState.model_validate(second.state.model_dump(mode="json", by_alias=True))
    third = await run_deck(path, provider=provider, state=reloaded, message="more")
    assert third.state.messages == items_to_messages(third.state.items)
    assert user_texts(input_items(provider, 2)) == ["hi", "again", "more"]


async def test_state_is_published_after_every_pass(decks: DeckFolder):
    decks.write(
        "d/act.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'x', context_schema={}, response_schema={'type':'string'})\n",
    )
    path = decks.deck(
        "d/PROMPT.md", MODEL + '[[actions]]\nname = "a"\ndescription = "d"\nexecute = "./act.py"'
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("a", {}), "done")
    rec = Recorder()
    await run_deck(path, provider=provider, message="go", **rec.kwargs())
    counts = [len(s.items or []) for s in rec.states]
    assert counts == sorted(counts) and len(set(counts)) >= 3


async def test_empty_output_with_one_pass(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "[guardrails]\nmaxPasses = 1")
    provider = ScriptedProvider()
    provider.enqueue(Reply(text=None))
    assert (await run_deck(path, provider=provider)).output == ""
    assert len(provider.requests) == 1


async def test_structured_output(decks: DeckFolder):
    decks.write(
        "d/out.json",
        json.dumps(
            {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        ),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'responseSchema = "./out.json"')
    provider = ScriptedProvider()
    provider.enqueue('{"answer":"ok"}')
    assert (await run_deck(path, provider=provider)).output == {"answer": "ok"}
    fmt = provider.requests[0].text.format
    assert (fmt.type, fmt.strict, fmt.schema_["type"]) == ("json_schema", True, "object")
    plain = decks.deck(
        "e/PROMPT.md",
        MODEL + 'responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"',
    )
    provider.enqueue("ok")
    assert (await run_deck(plain, provider=provider)).output == "ok"
    assert provider.requests[1].text is None


async def test_invalid_output_fails_with_the_schema_message(decks: DeckFolder):
    decks.write(
        "d/out.json",
        json.dumps(
            {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        ),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'responseSchema = "./out.json"')
    provider = ScriptedProvider()
    provider.enqueue("not json")
    with pytest.raises(RunError, match="Schema validation failed") as info:
        await run_deck(path, provider=provider)
    assert info.value.code == "invalid_output"


# ---- streaming --------------------------------------------------------------------------------


async def test_streaming_text_reaches_the_callback(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Stream(["a", "b"]))
    rec = Recorder()
    result = await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    assert rec.text == ["a", "b"] and result.output == "ab"
    assert provider.requests[0].stream is True
    sequence = [e["sequence_number"] for e in rec.events if e["type"].startswith("response.")]
    assert sequence == list(range(1, len(sequence) + 1))
    assert all(
        e["_gambit"]["model"] == "test-model"
        for e in rec.events
        if e["type"].startswith("response.")
    )


async def test_parent_and_child_both_stream(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Call("child", {"input": "x"}), Stream(["child ", "text"]), Stream(["parent ", "done"])
    )
    rec = Recorder()
    result = await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    assert result.output == "parent done"
    assert all(r.stream for r in provider.requests)
    assert "".join(rec.text) == "child textparent done"


async def test_events_after_a_terminal_event_are_dropped(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)

    class LateEvents(ScriptedProvider):
        async def responses(self, request, *, state=None, deck_path=None, on_stream_event=None):
            result = await super().responses(
                request, state=state, deck_path=deck_path, on_stream_event=on_stream_event
            )
            on_stream_event(
                {"type": "response.output_text.delta", "output_index": 0, "delta": "LATE"}
            )
            on_stream_event({"type": "response.failed", "error": {"message": "late"}})
            return result

    provider = LateEvents()
    provider.enqueue(Stream(["he", "llo"]))
    rec = Recorder()
    result = await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    assert result.output == "hello" and rec.text == ["he", "llo"]
    assert rec.types("response.")[-1] == "response.completed"


async def test_provider_failure_mid_stream_keeps_what_arrived(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Fail("connection cut", after_deltas=["partial ", "answer"]))
    rec = Recorder()
    with pytest.raises(ProviderError) as info:
        await run_deck(path, provider=provider, stream=True, message="hi", **rec.kwargs())
    assert rec.text == ["partial ", "answer"]
    assert "connection cut" in str(info.value) and info.value.partial_text == "partial answer"
    end = rec.of("run.end")[0]
    assert end["status"] == "failed" and "connection cut" in end["error"]
    assert [d["delta"] for d in rec.of("response.output_text.delta")] == ["partial ", "answer"]
    assert rec.states and user_texts(rec.states[-1].items) == ["hi"]


# ---- actions and tools ------------------------------------------------------------------------

COMPUTE_ROLLUP = """
import gambit
def run(ctx):
    return {"status": 201, "message": "computed", "payload": {"total": ctx.input["count"] + 1}}
deck = gambit.define_deck(
    run=run,
    context_schema={"type": "object", "properties": {"count": {"type": "number"}}, "required": ["count"]},
    response_schema={"type": "object"},
)
"""


async def test_execute_action_envelope(decks: DeckFolder):
    decks.write("d/rollup.py", COMPUTE_ROLLUP)
    decks.write(
        "d/out.json", json.dumps({"type": "object", "properties": {"total": {"type": "number"}}})
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "compute_rollup"\ndescription = "d"\nexecute = "./rollup.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("compute_rollup", {"count": 2}), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    tool = provider.requests[0].tools[0].function
    assert (
        tool.parameters["required"] == ["count"]
        and tool.parameters["properties"]["count"]["type"] == "number"
    )
    items = input_items(provider, 1)
    outputs = [i for i in items if i.type == "function_call_output"]
    envelope = json.loads(outputs[0].output)
    assert (envelope["status"], envelope["message"], envelope["payload"]["total"]) == (
        201,
        "computed",
        3,
    )
    (complete,) = calls_named(items, "gambit_complete")
    assert json.loads(complete.arguments) == envelope
    assert outputs[1].call_id == complete.call_id and json.loads(outputs[1].output) == envelope


async def test_invalid_action_arguments_give_400(decks: DeckFolder):
    decks.write("d/rollup.py", COMPUTE_ROLLUP)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "compute_rollup"\ndescription = "d"\nexecute = "./rollup.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("compute_rollup", {"count": "bad"}), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    envelope = json.loads(
        [i for i in input_items(provider, 1) if i.type == "function_call_output"][0].output
    )
    assert (envelope["status"], envelope["code"]) == (400, "invalid_input")


async def test_action_arguments_nested_past_the_limit_give_400_not_a_recursion_error(
    decks: DeckFolder,
):
    decks.write("d/rollup.py", COMPUTE_ROLLUP)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "compute_rollup"\ndescription = "d"\nexecute = "./rollup.py"',
    )
    provider = ScriptedProvider()
    deep = '{"count": ' + "[" * 5000 + "]" * 5000 + "}"
    provider.enqueue(Call("compute_rollup", deep), "done")
    rec = Recorder()  # the trace walks the arguments too
    assert (await run_deck(path, provider=provider, **rec.kwargs())).output == "done"
    envelope = json.loads(
        [i for i in input_items(provider, 1) if i.type == "function_call_output"][0].output
    )
    assert (envelope["status"], envelope["code"]) == (400, "invalid_input")


async def test_a_context_nested_past_the_limit_is_a_run_error_naming_it(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    with pytest.raises(RunError, match="context of .*PROMPT.md is nested more than 256 levels"):
        await run_deck(path, provider=provider, context=json.loads("[" * 5000 + "]" * 5000))
    assert provider.requests == []


async def test_llm_action_runs_as_a_nested_deck(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Call("child", {"input": "task"}, call_id="call-child"), "child-internal", "parent done"
    )
    rec = Recorder()
    assert (await run_deck(path, provider=provider, **rec.kwargs())).output == "parent done"
    child_items = input_items(provider, 1)
    assert child_items[0].role == "system"
    assert json.loads(child_items[2].output) == "task"
    root_start, child_start = rec.of("deck.start")
    assert "parentActionCallId" not in root_start
    action_start = rec.of("action.start")[0]
    assert action_start["parentActionCallId"] == root_start["actionCallId"]
    assert child_start["parentActionCallId"] == "call-child"
    (monolog,) = rec.of("monolog")
    assert monolog["content"] == "child-internal" and monolog["parentActionCallId"] == "call-child"
    assert monolog["deckPath"].endswith("child/PROMPT.md")


async def test_canonical_trace_order(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    decks.write("d/calc.py", COMPUTE_ROLLUP)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL
        + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"\n'
        + '[[actions]]\nname = "calc"\ndescription = "d"\nexecute = "./calc.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Call("child", {"input": "x"}), "child says", Call("calc", {"count": 1}), "final"
    )
    rec = Recorder()
    await run_deck(path, provider=provider, context={"k": 1}, message="hi", **rec.kwargs())
    types = [t for t in rec.types() if not t.startswith("response.")]
    assert types == [
        "run.start",
        "tool.call", "tool.result",  # gambit_context
        "message.user",
        "deck.start",
        "model.call", "model.result",
        "action.start", "tool.call",
        "tool.call", "tool.result", "deck.start", "model.call", "model.result", "monolog", "deck.end",  # child deck
        "tool.result", "action.end",
        "model.call", "model.result",
        "action.start", "tool.call", "tool.result", "action.end",  # compute action
        "model.call", "model.result",
        "deck.end",
        "run.end",
    ]  # fmt: skip
    assert {e["mode"] for e in rec.of("model.call")} == {"responses"}
    assert rec.of("run.end")[0]["status"] == "completed"


async def test_child_failure_without_on_error_fails_the_parent(decks: DeckFolder):
    decks.write(
        "d/boom.py",
        "import gambit\ndef run(ctx):\n    raise ValueError('kaput')\ndeck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "boom"\ndescription = "d"\nexecute = "./boom.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("boom", {}))
    # Issue 8 §2: deck code that raises fails the run with a RunError naming the deck.
    with pytest.raises(RunError, match=r"boom\.py raised ValueError: kaput") as info:
        await run_deck(path, provider=provider)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("handler_fails", [False, True])
async def test_on_error_handler(decks: DeckFolder, handler_fails: bool):
    decks.write(
        "d/boom.py",
        "import gambit\ndef run(ctx):\n    raise ValueError('kaput')\ndeck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    body = (
        "raise RuntimeError('handler down')"
        if handler_fails
        else "return {'status': 200, 'code': 'HANDLED', 'payload': {'notice': 'fallback'}}"
    )
    decks.write(
        "d/handler.py",
        f"import gambit\ndef run(ctx):\n    {body}\ndeck = gambit.define_deck(run=run, context_schema={{}}, response_schema={{}})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL
        + '[handlers.onError]\npath = "./handler.py"\n[[actions]]\nname = "boom"\ndescription = "d"\nexecute = "./boom.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("boom", {"x": 1}), "done")
    rec = Recorder()
    assert (await run_deck(path, provider=provider, **rec.kwargs())).output == "done"
    result = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "boom")["result"])
    if handler_fails:
        assert (result["status"], result["code"], result["message"]) == (
            500,
            "HANDLER_FALLBACK",
            "Handled error: kaput",
        )
        assert result["meta"] == {"handlerFailed": True} and result["payload"]["kind"] == "error"
    else:
        assert (result["status"], result["code"], result["payload"]) == (
            200,
            "HANDLED",
            {"notice": "fallback"},
        )


async def test_external_tools(decks: DeckFolder):
    decks.write(
        "d/lookup.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: {'value': 'action'}, context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL
        + '[[actions]]\nname = "lookup"\ndescription = "d"\nexecute = "./lookup.py"\n'
        + '[[tools]]\nname = "lookup"\n[[tools]]\nname = "search"\ndescription = "Search"\n',
    )
    seen: list[dict] = []

    def on_tool(request):
        seen.append(request)
        return {
            "status": 207,
            "message": "handled",
            "payload": {"echo": request["args"]["query"]},
            "meta": {"source": "hook"},
        }

    provider = ScriptedProvider()
    provider.enqueue(
        Call("search", {"query": "hello"}, call_id="call-1"), Call("lookup", {}), "done"
    )
    rec = Recorder()
    await run_deck(path, provider=provider, on_tool=on_tool, **rec.kwargs())
    assert [t.function.name for t in provider.requests[0].tools] == ["lookup", "search"]
    (request,) = seen
    assert (
        request["name"] == "search"
        and request["args"] == {"query": "hello"}
        and request["actionCallId"] == "call-1"
    )
    assert request["deckPath"] == str(path.resolve()) and request["runId"].startswith("run-")
    results = {
        e["name"]: json.loads(e["result"])
        for e in rec.of("tool.result")
        if e["name"] in ("search", "lookup")
    }
    assert {k: results["search"][k] for k in ("status", "message", "payload", "meta")} == {
        "status": 207, "message": "handled", "payload": {"echo": "hello"}, "meta": {"source": "hook"},
    }  # fmt: skip
    assert results["lookup"]["payload"] == {"value": "action"}


@pytest.mark.parametrize(
    ("on_tool", "code"), [(None, "missing_on_tool"), ("raise", "tool_handler_error")]
)
async def test_external_tool_failures(decks: DeckFolder, on_tool, code):
    path = decks.deck("d/PROMPT.md", MODEL + '[[tools]]\nname = "search"')

    def boom(request):
        raise RuntimeError("boom")

    provider = ScriptedProvider()
    provider.enqueue(Call("search", {}), "done")
    rec = Recorder()
    await run_deck(path, provider=provider, on_tool=boom if on_tool else None, **rec.kwargs())
    result = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "search")["result"])
    assert (result["status"], result["code"]) == (500, code)
    if on_tool:
        assert result["message"] == "boom"


async def test_unknown_tool_gives_404_and_continues(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Call("nope", {}), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    output = json.loads(
        [i for i in input_items(provider, 1) if i.type == "function_call_output"][0].output
    )
    assert (output["status"], output["message"]) == (404, "unknown action") and "code" not in output


async def test_text_with_tool_calls_is_kept_first(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Reply(text="Let me check.", calls=[Call("nope", {})]), "done")
    await run_deck(path, provider=provider)
    items = input_items(provider, 1)
    kinds = [(i.type, getattr(i, "role", None)) for i in items]
    assert kinds.index(("message", "assistant")) < kinds.index(("function_call", None))


# ---- synthetic tools: gambit_respond, gambit_end, gambit_complete ------------------------------


async def test_respond_returns_the_envelope(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "respond = true")
    provider = ScriptedProvider()
    provider.enqueue(Call("gambit_respond", {"payload": "ok"}))
    assert (await run_deck(path, provider=provider)).output == {"payload": "ok"}
    provider.enqueue(
        Call("gambit_respond", {"payload": "fail", "status": 503, "message": "nope", "code": "X"})
    )
    assert (await run_deck(path, provider=provider)).output == {
        "payload": "fail",
        "status": 503,
        "message": "nope",
        "code": "X",
    }


async def test_respond_payload_carries_the_response_schema(decks: DeckFolder):
    decks.write(
        "d/out.json",
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'respond = true\nresponseSchema = "./out.json"')
    provider = ScriptedProvider()
    provider.enqueue(
        Call("gambit_respond", {"payload": {"n": "x"}}),
        Call("gambit_respond", {"payload": {"n": 3}}),
    )
    assert (await run_deck(path, provider=provider)).output == {"payload": {"n": 3}}
    respond = provider.requests[0].tools[0].function
    assert respond.name == "gambit_respond" and respond.parameters["properties"]["payload"][
        "required"
    ] == ["n"]
    retry = json.loads(
        [i for i in input_items(provider, 1) if i.type == "function_call_output"][0].output
    )
    assert (retry["status"], retry["code"]) == (400, "invalid_payload")


async def test_respond_deck_never_completes_with_text(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "respond = true\n[guardrails]\nmaxPasses = 3")
    provider = ScriptedProvider()
    provider.enqueue("a", "b", "c")
    with pytest.raises(RunError, match="Model did not complete within guardrails"):
        await run_deck(path, provider=provider)
    assert len(provider.requests) == 3


async def test_end_signal(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "respond = true\nallowEnd = true")
    provider = ScriptedProvider()
    provider.enqueue(Call("gambit_end", {"message": "bye"}))
    result = await run_deck(path, provider=provider)
    assert (
        result.output == {"__gambitEnd": True, "message": "bye"}
        and is_end_signal(result.output)
        and result.ended
    )
    assert [t.function.name for t in provider.requests[0].tools] == ["gambit_end", "gambit_respond"]


async def test_end_from_a_child_ends_the_session(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS + "allowEnd = true")
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("child", {"input": "x"}), Call("gambit_end", {"message": "stop"}))
    result = await run_deck(path, provider=provider)
    assert result.ended and result.output["message"] == "stop"
    assert len(provider.requests) == 2


# ---- guardrails, models, usage ----------------------------------------------------------------


async def test_max_depth(decks: DeckFolder):
    for name, child in (("a", "b"), ("b", "c")):
        decks.deck(
            f"d/{name}/PROMPT.md",
            MODEL
            + ACTION_SCHEMAS
            + f'[[actions]]\nname = "{child}"\ndescription = "d"\npath = "../{child}/PROMPT.md"',
        )
    decks.deck("d/c/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md", MODEL + '[[actions]]\nname = "a"\ndescription = "d"\npath = "./a/PROMPT.md"'
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("a", {"input": ""}), Call("b", {"input": ""}), Call("c", {"input": ""}))
    with pytest.raises(RunError, match="Max depth 3 exceeded"):
        await run_deck(path, provider=provider)


async def test_max_passes(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "[guardrails]\nmaxPasses = 2")
    provider = ScriptedProvider()
    provider.enqueue(Call("x", {}), Call("x", {}))
    with pytest.raises(RunError, match="Model did not complete within guardrails") as info:
        await run_deck(path, provider=provider)
    assert info.value.code == "max_passes" and len(provider.requests) == 2


async def test_model_resolver_gets_the_fallback_list(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md",
        '[modelParams]\nmodel = ["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]\ntemperature = 0.2\n'
        'reasoning = { effort = "high", summary = "detailed" }\n[modelParams.additionalParams]\ncodex = { a = 1 }\ntemperature = 1',
    )
    seen = []

    class Resolver:
        def resolve_model(self, model, *, params, deck_path):
            seen.append(model)
            return ResolvedModel(model=model[1], params={**params, "temp": 1})

    provider = ScriptedProvider()
    provider.enqueue("ok")
    await run_deck(path, provider=provider, model_resolver=Resolver())
    assert seen == [["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]]
    request = provider.requests[0]
    assert request.model == "openrouter/openai/gpt-4o-mini"
    assert request.params == {
        "codex": {"a": 1},
        "temperature": 0.2,
        "reasoning": {"effort": "high", "summary": "detailed"},
        "temp": 1,
    }


async def test_model_override_and_default(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "")
    provider = ScriptedProvider()
    with pytest.raises(RunError, match="No model configured"):
        await run_deck(path, provider=provider)
    provider.enqueue("a", "b")
    await run_deck(path, provider=provider, default_model="m-default")
    await run_deck(decks.deck("e/PROMPT.md", MODEL), provider=provider, model_override="m-forced")
    assert [r.model for r in provider.requests] == ["m-default", "m-forced"]


async def test_usage_is_traced_and_summed(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    usage = ResponseUsage(
        prompt_tokens=11, completion_tokens=7, total_tokens=18, reasoning_tokens=4
    )
    provider.enqueue(Reply(calls=[Call("x", {})], usage=usage), Reply(text="ok", usage=usage))
    rec = Recorder()
    result = await run_deck(path, provider=provider, **rec.kwargs())
    assert rec.of("model.result")[0]["usage"] == {
        "promptTokens": 11,
        "completionTokens": 7,
        "totalTokens": 18,
        "reasoningTokens": 4,
    }
    assert (
        result.usage.prompt_tokens,
        result.usage.total_tokens,
        result.usage.reasoning_tokens,
    ) == (22, 36, 8)
    assert rec.of("run.end")[0]["usage"]["totalTokens"] == 36


async def test_costs_are_summed_into_the_run_usage(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(
        Reply(
            calls=[Call("x", {})],
            usage=ResponseUsage.model_validate(
                {"promptTokens": 5, "completionTokens": 1, "totalTokens": 6, "costUsd": 0.001}
            ),
        ),
        Reply(
            text="ok",
            usage=ResponseUsage.model_validate(
                {"promptTokens": 7, "completionTokens": 2, "totalTokens": 9, "costUsd": 0.0002}
            ),
        ),
    )
    rec = Recorder()
    result = await run_deck(path, provider=provider, **rec.kwargs())
    assert result.usage.model_extra == {"costUsd": 0.0012}
    assert rec.of("run.end")[0]["usage"] == {
        "promptTokens": 12,
        "completionTokens": 3,
        "totalTokens": 15,
        "costUsd": 0.0012,
    }
    assert result.usage == ResponseUsage.model_validate(rec.of("run.end")[0]["usage"])


async def test_non_root_deck_without_schemas_is_rejected(decks: DeckFolder):
    child = decks.deck("d/child/PROMPT.md", MODEL)
    path = decks.deck("d/PROMPT.md", MODEL)
    tree = load_deck_tree(path)
    tree.root.actions = load_deck_tree(
        decks.deck(
            "e/PROMPT.md",
            MODEL + '[[actions]]\nname = "c"\ndescription = "d"\npath = "./c/PROMPT.md"'
            if False
            else MODEL,
        )
    ).root.actions
    from gambit.core import ActionDecl

    tree.root.actions = [ActionDecl(name="c", description="d", path=str(child.resolve()))]
    provider = ScriptedProvider()
    provider.enqueue(Call("c", {}))
    with pytest.raises(RunError, match="must declare contextSchema and responseSchema"):
        await run_deck(tree.root, provider=provider)


# ---- handlers ---------------------------------------------------------------------------------


class FakeClock:
    """A clock that moves only when the runtime sleeps on it: a handler's timer fires at once,
    and the elapsed time it reports is exactly its delay."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


async def test_busy_handler_fires_while_an_action_runs(decks: DeckFolder, monkeypatch):
    # The action runs until the busy handler's reply has reached the run (a gate the slow
    # deck's module imports, opened when the reply streams), so the test waits on no
    # wall-clock time. Deck code runs in a thread of its own, so the gate is a threading.Event.
    gate = threading.Event()
    monkeypatch.setitem(sys.modules, "busy_gate", types.SimpleNamespace(fired=gate))
    decks.write(
        "d/slow.py",
        "import busy_gate, gambit\ndef run(ctx):\n    busy_gate.fired.wait(10)\n    return 'ok'\ndeck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.write(
        "d/busy.py",
        "import gambit\nasync def run(ctx):\n    return 'alias busy fired'\ndeck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL
        + '[handlers.onInterval]\npath = "./busy.py"\ndelayMs = 250\n[[actions]]\nname = "slow"\ndescription = "d"\nexecute = "./slow.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("slow", {}), "ok")
    rec = Recorder()

    def on_stream_text(text: str) -> None:
        rec.text.append(text)
        if "alias busy fired" in text:
            gate.set()

    # A guardrail timeout makes a busy handler that never fires fail the test, not hang it.
    result = await run_deck(
        path,
        provider=provider,
        clock=FakeClock(),
        guardrails=Guardrails(timeout_ms=5_000),
        **(rec.kwargs() | {"on_stream_text": on_stream_text}),
    )
    assert result.output == "ok"
    assert "alias busy fired\n" in rec.text
    texts = [
        "".join(p.text for p in i.content) for i in input_items(provider, 1) if i.type == "message"
    ]
    assert "alias busy fired (elapsed 250ms)" in texts


async def test_idle_handler_fires_while_the_model_is_slow(decks: DeckFolder):
    decks.write(
        "d/idle.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'idle ping', context_schema={}, response_schema={})\n",
    )
    path = decks.deck("d/PROMPT.md", MODEL + '[handlers.onIdle]\npath = "./idle.py"\ndelayMs = 5')
    provider = ScriptedProvider()
    provider.enqueue(Stream(["do", "ne"], delay=0.1))
    rec = Recorder()
    assert (await run_deck(path, provider=provider, stream=True, **rec.kwargs())).output == "done"
    assert "idle ping\n" in rec.text


# ---- cancellation -----------------------------------------------------------------------------


async def test_cancel_during_a_model_call(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Stream(["a", "b", "c"], delay=0.2))
    rec = Recorder()
    task = asyncio.create_task(
        run_deck(path, provider=provider, stream=True, message="hi", **rec.kwargs())
    )
    await wait_until(lambda: rec.text)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.5)
    assert rec.text == ["a"]
    end = rec.of("run.end")[0]
    assert end["status"] == "canceled" and end["type"] == "run.end"
    assert user_texts(rec.states[-1].items) == ["hi"]


async def test_cancel_inside_a_nested_deck(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("child", {"input": ""}), Stream(["x", "y"], delay=0.3))
    rec = Recorder()
    task = asyncio.create_task(run_deck(path, provider=provider, stream=True, **rec.kwargs()))
    await wait_until(lambda: len(provider.requests) >= 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(provider.requests) == 2
    assert rec.of("run.end")[0]["status"] == "canceled"


# ---- chat mode (GAMBIT_CHAT_FALLBACK) ----------------------------------------------------------


async def test_chat_mode_uses_chat_and_saves_chat_state(decks: DeckFolder):
    decks.write("d/rollup.py", COMPUTE_ROLLUP)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "compute_rollup"\ndescription = "d"\nexecute = "./rollup.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("compute_rollup", {"count": 1}), Stream(["fi", "ne"]))
    rec = Recorder()
    result = await run_deck(
        path,
        provider=provider,
        mode="chat",
        stream=True,
        context={"a": 1},
        message="hi",
        **rec.kwargs(),
    )
    assert result.output == "fine" and rec.text == ["fi", "ne"]
    assert result.state.format == "chat" and result.state.items is None
    roles = [m.role for m in result.state.messages]
    assert roles[:4] == ["system", "assistant", "tool", "user"] and roles[-1] == "assistant"
    assert {e["mode"] for e in rec.of("model.call")} == {"chat"}
    assert any(
        tc.function.name == "gambit_complete"
        for m in result.state.messages
        for tc in (m.tool_calls or [])
    )
