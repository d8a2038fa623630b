"""Review of the run loop against docs/decks.md "How a deck runs" and docs/decisions.md "Running".

Each test pins a behaviour a review of the run loop found wrong (and that was then fixed) or
found subtle enough to deserve a guard.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gambit.core import RunError, load_deck_tree, run_deck
from gambit.core._runtime import _limits
from gambit.providers.offline import Call, Reply, ScriptedProvider, Stream

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder, Recorder, wait_until


def slow(reply: Any, seconds: float):
    async def answer(request):
        await asyncio.sleep(seconds)
        return reply

    return answer


# ---- guardrails: timeouts -----------------------------------------------------------------------


async def test_root_deck_timeout_can_exceed_the_default(decks: DeckFolder, monkeypatch):
    monkeypatch.setattr(_limits, "DEFAULT_TIMEOUT_MS", 50)
    path = decks.deck("d/PROMPT.md", MODEL + "[guardrails]\ntimeoutMs = 5000")
    provider = ScriptedProvider()
    provider.enqueue(slow("ok", 0.2))
    assert (await run_deck(path, provider=provider)).output == "ok"


async def test_root_deck_timeout_zero_means_no_deadline(decks: DeckFolder, monkeypatch):
    monkeypatch.setattr(_limits, "DEFAULT_TIMEOUT_MS", 50)
    path = decks.deck("d/PROMPT.md", MODEL + "[guardrails]\ntimeoutMs = 0")
    provider = ScriptedProvider()
    provider.enqueue(slow("ok", 0.2))
    assert (await run_deck(path, provider=provider)).output == "ok"


async def test_timeout_error_raised_by_compute_code_is_not_a_guardrail_timeout(
    decks: DeckFolder,
):
    path = decks.write(
        "c/deck.py",
        "import gambit\ndef run(ctx):\n    raise TimeoutError('database timed out')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    # The deck's own TimeoutError, named as the deck's failure (not the guardrail's timeout).
    with pytest.raises(RunError, match="raised TimeoutError: database timed out") as info:
        await run_deck(path, provider=ScriptedProvider())
    assert info.value.code == "deck_failed" and isinstance(info.value.__cause__, TimeoutError)


async def test_async_on_tool_raising_timeout_error_gives_an_error_envelope(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + '[[tools]]\nname = "search"')

    async def on_tool(request):
        raise TimeoutError("upstream search timed out")

    provider = ScriptedProvider()
    provider.enqueue(Call("search", {}), "done")
    rec = Recorder()
    assert (await run_deck(path, provider=provider, on_tool=on_tool, **rec.kwargs())).output == (
        "done"
    )
    result = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "search")["result"])
    assert (result["status"], result["code"]) == (500, "tool_handler_error")


async def test_on_tool_raising_a_gambit_run_error_gives_an_error_envelope(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + '[[tools]]\nname = "search"')

    def on_tool(request):  # e.g. a hook that runs another deck, which failed
        raise RunError("nested deck failed", code="invalid_output")

    provider = ScriptedProvider()
    provider.enqueue(Call("search", {}), "done")
    rec = Recorder()
    assert (await run_deck(path, provider=provider, on_tool=on_tool, **rec.kwargs())).output == (
        "done"
    )
    result = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "search")["result"])
    assert (result["status"], result["code"], result["message"]) == (
        500,
        "tool_handler_error",
        "nested deck failed",
    )


# ---- cancellation ---------------------------------------------------------------------------------


async def test_cancel_while_an_action_runs_stops_the_busy_handler(decks: DeckFolder):
    decks.write(
        "d/slow.py",
        "import asyncio, gambit\nasync def run(ctx):\n    await asyncio.sleep(2)\n    return 'ok'\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.write(
        "d/busy.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'still working', "
        "context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[handlers.onBusy]\npath = "./busy.py"\ndelayMs = 100\nrepeatMs = 50\n'
        '[[actions]]\nname = "slow"\ndescription = "d"\nexecute = "./slow.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("slow", {}), "ok")
    rec = Recorder()
    task = asyncio.create_task(run_deck(path, provider=provider, **rec.kwargs()))
    await wait_until(lambda: rec.of("action.start"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.4)
    assert rec.events[-1]["type"] == "run.end"
    assert rec.text == []


async def test_cancel_stops_a_child_spawned_from_a_sync_compute_deck(decks: DeckFolder):
    decks.deck("c/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.write(
        "c/deck.py",
        "import gambit\ndef run(ctx):\n    return ctx.spawn_and_wait('./child/PROMPT.md', '')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    provider = ScriptedProvider()
    provider.enqueue(slow("child answer", 0.3))
    rec = Recorder()
    task = asyncio.create_task(run_deck(path, provider=provider, **rec.kwargs()))
    await wait_until(lambda: rec.of("model.call"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.6)
    assert rec.events[-1]["type"] == "run.end"
    assert rec.of("model.result") == []


# ---- run.start and input validation -------------------------------------------------------------


async def test_run_start_carries_the_validated_input(decks: DeckFolder):
    decks.write(
        "d/in.json",
        json.dumps(
            {
                "type": "object",
                "properties": {"q": {"type": "string"}, "n": {"type": "integer", "default": 3}},
                "required": ["q"],
                "additionalProperties": False,
            }
        ),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./in.json"')
    provider = ScriptedProvider()
    provider.enqueue("ok")
    rec = Recorder()
    await run_deck(path, provider=provider, context={"q": "x", "junk": 1}, **rec.kwargs())
    injected = json.loads(provider.requests[0].input[2].output)
    assert rec.of("run.start")[0]["input"] == injected == {"q": "x", "n": 3}


async def test_invalid_root_input_fails_before_run_start(decks: DeckFolder):
    decks.write(
        "d/in.json",
        json.dumps({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./in.json"')
    rec = Recorder()
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=ScriptedProvider(), context={"q": 1}, **rec.kwargs())
    assert info.value.code == "invalid_input"
    assert [e["type"] for e in rec.events] == ["run.end"]
    assert rec.events[0]["status"] == "failed"


async def test_missing_required_root_context_is_an_input_error(decks: DeckFolder):
    decks.write(
        "d/in.json",
        json.dumps({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    )
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./in.json"')
    provider = ScriptedProvider()
    provider.enqueue("ok")
    with pytest.raises(RunError) as info:
        await run_deck(path, provider=provider, message="hello")
    assert info.value.code == "invalid_input"
    assert provider.requests == []


# ---- compute ctx helpers --------------------------------------------------------------------------


async def test_spawn_and_wait_child_receives_the_working_state(decks: DeckFolder):
    decks.deck("c/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.write(
        "c/deck.py",
        "import gambit\nasync def run(ctx):\n    ctx.set_session_meta('thread', 't-1')\n"
        "    return await ctx.spawn_and_wait('./child/PROMPT.md', '')\n"
        "deck = gambit.define_deck(run=run)\n",
    )
    provider = ScriptedProvider()
    provider.enqueue("child answer")
    result = await run_deck(path, provider=provider, message="hi")
    assert result.output == "child answer"
    seen = provider.records[0].state
    assert seen is not None and (seen.meta or {}).get("thread") == "t-1"


async def test_intermediate_output_events_share_their_metadata(decks: DeckFolder):
    decks.write(
        "d/emit.py",
        "import gambit\ndef run(ctx):\n    ctx.emit_output_item({'type': 'ns:progress', 'data': {'step': 1}})\n"
        "    return 'ok'\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "emit"\ndescription = "d"\nexecute = "./emit.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("emit", {}, call_id="call-emit"), "done")
    rec = Recorder()
    await run_deck(path, provider=provider, **rec.kwargs())
    events = [
        e for e in rec.events if e["type"].startswith("response.") and "model" not in e["_gambit"]
    ]
    assert [e["type"] for e in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert {e["_gambit"].get("parent_action_call_id") for e in events} == {"call-emit"}


async def test_intermediate_output_envelope_names_its_policy(decks: DeckFolder):
    decks.write(
        "d/emit.py",
        "import gambit\ndef run(ctx):\n    ctx.emit_output_item({'type': 'ns:progress', 'data': {'step': 1}})\n"
        "    return 'ok'\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "emit"\ndescription = "d"\nexecute = "./emit.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("emit", {}, call_id="call-emit"), "done")
    rec = Recorder()
    await run_deck(path, provider=provider, **rec.kwargs())
    envelope = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "emit")["result"])
    assert envelope["intermediateOutput"]["policy"] == "allow"
    (entry,) = envelope["intermediateOutput"]["items"]
    assert entry["item"] == {"type": "ns:progress", "data": {"step": 1}}
    assert (entry["parentActionCallId"], entry["outputIndex"]) == ("call-emit", 0)


# ---- streaming ------------------------------------------------------------------------------------


def _provider_with_events(events: list[dict[str, Any]], text: str) -> ScriptedProvider:
    class Events(ScriptedProvider):
        async def responses(self, request, *, state=None, deck_path=None, on_stream_event=None):
            result = await super().responses(request, state=state, deck_path=deck_path)
            if on_stream_event is not None:
                for event in events:
                    on_stream_event(event)
            return result

    provider = Events()
    provider.enqueue(text)
    return provider


async def test_provider_tool_events_are_projected_as_tool_traces(decks: DeckFolder):  # 75
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = _provider_with_events(
        [
            {"type": "response.created", "response": {"id": "r", "output": []}},
            {
                "type": "tool.call",
                "actionCallId": "tool_1",
                "name": "lookup",
                "args": {"query": "hello"},
            },
            {"type": "tool.result", "actionCallId": "tool_1", "result": {"ok": True}},
            {"type": "response.completed", "response": {"id": "r", "output": []}},
        ],
        "hello",
    )
    rec = Recorder()
    await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    deck_id = rec.of("deck.start")[0]["actionCallId"]
    (call,) = rec.of("tool.call")
    (result,) = rec.of("tool.result")
    assert (call["actionCallId"], call["name"], call["args"], call["toolKind"]) == (
        "tool_1",
        "lookup",
        {"query": "hello"},
        "mcp_bridge",
    )
    assert (result["name"], result["result"]) == ("lookup", {"ok": True})
    assert call["parentActionCallId"] == result["parentActionCallId"] == deck_id


async def test_non_response_events_after_a_terminal_event_still_pass(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = _provider_with_events(
        [
            {"type": "response.completed", "response": {"id": "r", "output": []}},
            {"type": "codex.event", "detail": "thread saved"},
        ],
        "hello",
    )
    rec = Recorder()
    await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    assert [e["event"]["type"] for e in rec.of("model.stream.event")] == ["codex.event"]


async def test_response_sequence_numbers_restart_per_provider_call(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Call("nope", {}), Stream(["a", "b"]))
    rec = Recorder()
    await run_deck(path, provider=provider, stream=True, **rec.kwargs())
    firsts = [e["sequence_number"] for e in rec.of("response.created")]
    assert firsts == [1, 1]


# ---- chat mode ------------------------------------------------------------------------------------


async def test_chat_mode_length_with_no_content_fails(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Reply(text=None, finish_reason="length"))
    with pytest.raises(RunError, match="stopped early"):
        await run_deck(path, provider=provider, mode="chat", message="hi")


async def test_chat_mode_tool_calls_without_calls_fails(decks: DeckFolder):
    from gambit.core._messages import ChatMessage
    from gambit.core._provider import ChatResult

    path = decks.deck("d/PROMPT.md", MODEL)

    class NoCalls(ScriptedProvider):
        async def chat(self, **kwargs):
            message = ChatMessage(role="assistant", content=None)
            return ChatResult(message=message, finish_reason="tool_calls", tool_calls=[])

    with pytest.raises(RunError, match="tool_calls but provided none"):
        await run_deck(path, provider=NoCalls(), mode="chat", message="hi")


# ---- handlers -------------------------------------------------------------------------------------


async def test_idle_timer_restarts_after_tool_results(decks: DeckFolder):
    decks.write(
        "d/slow.py",
        "import asyncio, gambit\nasync def run(ctx):\n    await asyncio.sleep(0.4)\n    return 'ok'\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.write(
        "d/idle.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'idle ping', "
        "context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[handlers.onIdle]\npath = "./idle.py"\ndelayMs = 250\n'
        '[[actions]]\nname = "slow"\ndescription = "d"\nexecute = "./slow.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("slow", {}), slow("done", 0.05))
    rec = Recorder()
    assert (await run_deck(path, provider=provider, **rec.kwargs())).output == "done"
    assert "idle ping\n" not in rec.text


async def test_failed_response_status_is_not_a_silent_empty_answer(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)

    class Failing(ScriptedProvider):
        async def responses(self, request, *, state=None, deck_path=None, on_stream_event=None):
            result = await super().responses(request, state=state, deck_path=deck_path)
            result.response.status = "failed"
            result.response.output = []
            result.response.error = {"code": "server_error", "message": "upstream exploded"}
            return result

    provider = Failing()
    provider.enqueue("ignored")
    with pytest.raises(Exception, match="upstream exploded"):
        await run_deck(path, provider=provider)


# ---- confirmed-correct subtle behaviour -------------------------------------------------------


async def test_child_respond_envelope_fields_reach_the_parent(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS + "respond = true")
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Call("child", {"input": "x"}),
        Call(
            "gambit_respond",
            {"payload": "p", "status": 503, "message": "nope", "code": "X", "meta": {"k": 1}},
        ),
        "parent done",
    )
    rec = Recorder()
    assert (await run_deck(path, provider=provider, **rec.kwargs())).output == "parent done"
    envelope = json.loads(next(e for e in rec.of("tool.result") if e["name"] == "child")["result"])
    assert {k: envelope[k] for k in ("payload", "status", "message", "code", "meta")} == {
        "payload": "p", "status": 503, "message": "nope", "code": "X", "meta": {"k": 1},
    }  # fmt: skip
    complete = [
        i for i in provider.requests[2].input if getattr(i, "name", None) == "gambit_complete"
    ]
    assert len(complete) == 1 and json.loads(complete[0].arguments) == envelope
    kinds = [(e["type"], e.get("name")) for e in rec.events if e["type"].startswith("action.")]
    assert kinds == [("action.start", "child"), ("action.end", "child")]  # none for respond


@pytest.mark.parametrize("name", ["gambit_context", "gambit_init", "gambit_respond", "gambit_end"])
async def test_synthetic_names_the_deck_does_not_offer_get_404(decks: DeckFolder, name: str):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue(Call(name, {"payload": "x"}), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    output = json.loads(
        [i for i in provider.requests[1].input if i.type == "function_call_output"][0].output
    )
    assert (output["status"], output["message"]) == (404, "unknown action")


async def test_on_error_handled_failure_is_followed_by_gambit_complete(decks: DeckFolder):
    decks.write(
        "d/boom.py",
        "import gambit\ndef run(ctx):\n    raise ValueError('kaput')\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.write(
        "d/handler.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: {'payload': 'handled'}, "
        "context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[handlers.onError]\npath = "./handler.py"\n'
        '[[actions]]\nname = "boom"\ndescription = "d"\nexecute = "./boom.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("boom", {}), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    items = provider.requests[1].input
    (complete,) = [i for i in items if getattr(i, "name", None) == "gambit_complete"]
    assert json.loads(complete.arguments)["payload"] == "handled"
    assert json.loads(complete.arguments)["status"] == 500


async def test_end_from_a_grandchild_ends_the_session_after_the_batch(decks: DeckFolder):
    decks.deck("d/b/PROMPT.md", MODEL + ACTION_SCHEMAS + "allowEnd = true")
    decks.deck(
        "d/a/PROMPT.md",
        MODEL
        + ACTION_SCHEMAS
        + '[[actions]]\nname = "b"\ndescription = "d"\npath = "../b/PROMPT.md"',
    )
    decks.write(
        "d/note.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'noted', "
        "context_schema={}, response_schema={})\n",
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL
        + '[[actions]]\nname = "a"\ndescription = "d"\npath = "./a/PROMPT.md"\n'
        + '[[actions]]\nname = "note"\ndescription = "d"\nexecute = "./note.py"',
    )
    provider = ScriptedProvider()
    provider.enqueue(
        Reply(calls=[Call("a", {"input": ""}), Call("note", {})]),
        Call("b", {"input": ""}),
        Call("gambit_end", {"message": "stop"}),
    )
    rec = Recorder()
    result = await run_deck(path, provider=provider, **rec.kwargs())
    assert result.ended and result.output == {"__gambitEnd": True, "message": "stop"}
    assert len(provider.requests) == 3  # no further model call in any deck
    assert [e["name"] for e in rec.of("action.end")] == ["b", "a", "note"]  # batch completes
    assert rec.of("run.end")[0]["status"] == "ended"


async def test_resume_validates_the_recovered_context_against_the_current_schema(
    decks: DeckFolder,
):
    decks.write("d/in.json", json.dumps({"type": "object"}))
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./in.json"')
    provider = ScriptedProvider()
    provider.enqueue("first", "second")
    first = await run_deck(path, provider=provider, context={"topic": "a"}, message="hi")
    decks.write(
        "d/in.json",
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    )
    with pytest.raises(RunError) as info:
        await run_deck(load_deck_tree(path), provider=provider, state=first.state, message="x")
    assert info.value.code == "invalid_input"


async def test_child_usage_is_included_in_the_run_usage(decks: DeckFolder):
    from gambit.core import ResponseUsage

    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"',
    )
    usage = ResponseUsage(prompt_tokens=2, completion_tokens=1, total_tokens=3)
    provider = ScriptedProvider()
    provider.enqueue(
        Reply(calls=[Call("child", {"input": "x"})], usage=usage),
        Reply(text="c", usage=usage),
        Reply(text="p", usage=usage),
    )
    result = await run_deck(path, provider=provider)
    assert result.usage.total_tokens == 9
