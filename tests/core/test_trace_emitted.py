"""The events the runtime emits are the `_trace` models: each reads back into its own model,
with every field it carries declared, and writes back to the very same dict."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gambit.core._runtime as runtime_package
from gambit.core import _trace, grade_state, load_deck_tree, run_deck, state_from_dict
from gambit.core._openresponses import item_to_dict, message_item
from gambit.core._runtime._run import _TracedItems
from gambit.core._trace import (
    ModelCallEvent,
    ResponseTraceEvent,
    RunEndEvent,
    ToolCallEvent,
    UnknownTraceEvent,
    trace_event_from_dict,
    trace_event_to_dict,
    trace_event_view,
)
from gambit.providers.offline import Call, Reply, ScriptedProvider, Stream

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder, Recorder

CATALOGUE = set(_trace._TRACE_MODELS)  # every event type docs/decks.md "Traces" lists


class StreamExtras(ScriptedProvider):
    """Adds stream events that are not `response.*`: one unknown, one tool call the provider
    ran itself (projected as `tool.call`/`tool.result`)."""

    async def responses(self, request, *, state=None, deck_path=None, on_stream_event=None):
        if on_stream_event is not None:
            on_stream_event({"type": "codex.event", "detail": {"n": 1}})
            on_stream_event(
                {"type": "tool.call", "actionCallId": "call-mcp", "name": "search", "args": {}}
            )
            on_stream_event({"type": "gambit:tool.result", "actionCallId": "call-mcp", "result": 3})
        return await super().responses(
            request, state=state, deck_path=deck_path, on_stream_event=on_stream_event
        )


async def emitted_events(decks: DeckFolder) -> list[dict]:
    """One run that emits every event type: a root LLM deck with context and a user message,
    a compute action that logs and emits an intermediate item, a child LLM deck (monolog)
    and provider stream events of every kind."""
    decks.write("d/in.json", '{"type": "object", "properties": {"q": {"type": "string"}}}')
    decks.write(
        "d/work.py",
        "import gambit\n"
        "def run(ctx):\n"
        "    ctx.log({'message': 'working', 'level': 'debug', 'meta': {'n': 1}})\n"
        "    ctx.emit_output_item({'type': 'ns:progress', 'data': {'step': 1}})\n"
        "    return {'done': True}\n"
        "deck = gambit.define_deck(run=run, context_schema={}, response_schema={})\n",
    )
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + 'contextSchema = "./in.json"\n'
        '[[actions]]\nname = "work"\ndescription = "d"\nexecute = "./work.py"\n'
        '[[actions]]\nname = "child"\ndescription = "d"\npath = "./child/PROMPT.md"\n'
        '[[tools]]\nname = "lookup"\ndescription = "d"\n',
    )
    provider = StreamExtras()
    provider.enqueue(
        Reply(
            text="let me see",
            calls=[Call("work", {}), Call("child", {"input": "x"}), Call("lookup", {"k": 1})],
        ),
        Stream(["child ", "says"]),
        Reply(text=Stream(["all ", "done"]), reasoning="because"),
    )
    rec = Recorder()
    await run_deck(
        load_deck_tree(path),
        provider=provider,
        context={"q": "x"},
        message="hi",
        stream=True,
        on_tool=lambda request: {"found": request["args"]},
        **rec.kwargs(),
    )
    # A conversation past its deck's compaction limit (context.compacted), in a run before.
    small = decks.deck(
        "small/PROMPT.md",
        MODEL + "modelParams.contextWindow = 256\nmodelParams.compactRatio = 0.25\n",
    )
    compacting = ScriptedProvider()
    compacting.enqueue(Reply(text="the summary"), Reply(text="the answer"))
    before = Recorder()
    await run_deck(
        load_deck_tree(small), provider=compacting, message="hi " * 200, **before.kwargs()
    )
    # A grade (grade.start, the grader's run, grade.end).
    decks.write(
        "grader.py",
        "import gambit\n"
        "deck = gambit.define_deck(\n"
        "    run=lambda ctx: {'score': 2, 'reason': 'kind'},\n"
        "    context_schema='gambit://schemas/graders/contexts/conversation.zod.ts',\n"
        "    response_schema='gambit://schemas/graders/grader_output.zod.ts',\n"
        ")\n",
    )
    graded = Recorder()
    state = state_from_dict({"runId": "run-graded", "messages": [{"role": "user", "content": "x"}]})
    await grade_state(
        decks.root / "grader.py", state, provider=ScriptedProvider(), threshold=1, **graded.kwargs()
    )
    return graded.events + before.events + rec.events


async def test_every_emitted_event_reads_back_into_its_own_model(decks: DeckFolder):
    events = await emitted_events(decks)
    types = {e["type"] for e in events}
    assert types >= CATALOGUE
    assert any(t.startswith("response.") for t in types)
    for event in events:
        model = trace_event_from_dict(event)
        assert not isinstance(model, UnknownTraceEvent), event["type"]
        expected = (
            ResponseTraceEvent
            if event["type"].startswith("response.")
            else _trace._TRACE_MODELS[event["type"]]
        )
        assert type(model) is expected
        # Every field the runtime writes is declared on the model (an attribute for readers);
        # only a response.* event carries undeclared keys: the provider event's own fields.
        if expected is not ResponseTraceEvent:
            assert not model.model_extra, (event["type"], model.model_extra)
        # ... and the model writes back the very dict the sink received.
        assert trace_event_to_dict(model) == event


async def test_read_back_fields_are_attributes(decks: DeckFolder):
    events = await emitted_events(decks)
    call = trace_event_from_dict(next(e for e in events if e["type"] == "model.call"))
    assert isinstance(call, ModelCallEvent)
    assert call.provider == "offline" and call.offline is True and call.mode == "responses"
    assert call.message_count == len(call.items) and call.tool_count == len(call.tools)
    end = trace_event_from_dict(events[-1])
    assert isinstance(end, RunEndEvent)
    assert end.status == "completed" and end.error is None
    assert end.usage is not None and end.usage.total_tokens > 0
    assert isinstance(end.duration_ms, int)
    delta = trace_event_from_dict(
        next(
            e
            for e in events
            if e["type"] == "response.output_text.delta" and e["runId"] == end.run_id
        )
    )
    assert delta.run_id == end.run_id and delta.gambit.run_id == end.run_id


async def test_stored_events_read_as_their_models_without_validation(decks: DeckFolder):
    """`trace_event_view` gives each stored event its own class (readers switch on it) with
    the same field values `trace_event_from_dict` validates; nested values stay JSON."""
    events = await emitted_events(decks)
    for data in events:
        view, checked = trace_event_view(data), trace_event_from_dict(data)
        assert type(view) is type(checked), data["type"]
        assert view.ts == checked.ts and getattr(view, "run_id", None) == getattr(
            checked, "run_id", None
        )
    call = trace_event_view(next(e for e in events if e["type"] == "model.call"))
    assert isinstance(call.items, list) and isinstance(call.items[0], dict)
    assert trace_event_view({"type": "x.custom", "n": 1}).model_extra == {"n": 1}
    tool = trace_event_view({"type": "tool.call", "name": "t"})  # a required field missing
    assert isinstance(tool, ToolCallEvent) and tool.action_call_id is None


async def test_model_call_carries_the_model_parameters(decks: DeckFolder):
    deck = decks.deck("p/PROMPT.md", MODEL + "modelParams.temperature = 0.3\n")
    sink: list[dict] = []
    provider = ScriptedProvider()
    provider.enqueue("hi")
    await run_deck(
        load_deck_tree(deck),
        provider=provider,
        message="x",
        on_trace=sink.append,
    )
    [call] = [e for e in sink if e["type"] == "model.call"]
    assert call["params"]["temperature"] == 0.3
    assert trace_event_view(call).params["temperature"] == 0.3


def test_a_misspelt_field_is_a_type_error():
    with pytest.raises(TypeError, match="ModelCallEvent has no field 'actoin_call_id'"):
        ModelCallEvent.wire(1, "run-1", {"actoin_call_id": "action-1"})


def test_wire_uses_json_keys_and_leaves_out_none():
    assert ModelCallEvent.wire(
        5, "run-1", {"action_call_id": "a", "deck_path": None, "message_count": 2}
    ) == {"type": "model.call", "ts": 5, "runId": "run-1", "actionCallId": "a", "messageCount": 2}
    assert ResponseTraceEvent.wire(
        5,
        "run-1",
        {"gambit": {"run_id": "run-1"}},
        {"delta": "x", "obfuscation": None},
        type="response.output_text.delta",
    ) == {
        "type": "response.output_text.delta",
        "ts": 5,
        "runId": "run-1",
        "_gambit": {"run_id": "run-1"},
        "delta": "x",
    }


def test_every_trace_call_in_the_runtime_names_fields_of_its_model():
    """Statically, so a misspelt field fails here even on a path no other test runs."""
    checked = 0
    for path in Path(runtime_package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            # trace(EventModel, ...), and trace_model_event(...) which adds the deck's fields;
            # a helper passing its caller's model on (a variable) is checked at its callers
            if (
                node.func.attr in ("trace", "trace_model_event")
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id != "event"
            ):
                model = getattr(_trace, node.args[0].id)
                names = [k.arg for k in node.keywords if k.arg is not None]
            elif node.func.attr == "trace_response" and isinstance(node.args[1], ast.Dict):
                model = ResponseTraceEvent
                names = [k.value for k in node.args[1].keys if isinstance(k, ast.Constant)]
            else:
                continue
            unknown = set(names) - set(model.model_fields)
            assert not unknown, f"{path.name}:{node.lineno}: {model.__name__} has no {unknown}"
            checked += 1
    assert checked >= 20


async def test_model_call_items_stay_exact_across_resumes_and_branches(decks: DeckFolder):
    """Traced items are kept from one call (and one resumed run) to the next; what a
    model.call carries is still exactly the request's input, also when a run resumes from
    an earlier state than the last one (the kept prefix no longer matches)."""
    path = decks.deck("d/PROMPT.md", MODEL)
    states = []
    state = None
    for turn in range(3):
        provider = ScriptedProvider()
        provider.enqueue(f"answer {turn}")
        state = (await run_deck(path, provider=provider, message=f"m{turn}", state=state)).state
        states.append(state)
    for start in (states[2], states[0], states[0], states[1], states[2]):
        provider = ScriptedProvider()
        provider.enqueue("again")
        rec = Recorder()
        await run_deck(path, provider=provider, message="branch", state=start, **rec.kwargs())
        [call] = rec.of("model.call")
        assert call["items"] == [item_to_dict(i) for i in provider.requests[0].input]


def test_traced_items_keep_the_matching_prefix():
    items = [message_item("user", str(n)) for n in range(5)]
    traced = _TracedItems()
    first = traced.of(items[:3])
    assert first == [item_to_dict(i) for i in items[:3]]
    assert traced.of(items) == [item_to_dict(i) for i in items]
    assert first == [item_to_dict(i) for i in items[:3]]  # what a sink was given stays as is
    other = [items[0], message_item("user", "x"), items[2]]
    assert traced.of(other) == [item_to_dict(i) for i in other]
    assert traced.of(items[:2]) == [item_to_dict(i) for i in items[:2]]
    assert traced.of([]) == []


async def test_a_grade_is_traced_around_its_graders_run(decks: DeckFolder):
    """grade.start, then the grader's own run (its runId), then grade.end with the score
    and whether it passes the threshold."""
    events = await emitted_events(decks)
    types = [e["type"] for e in events]
    first, last = types.index("grade.start"), types.index("grade.end")
    start, end = events[first], events[last]
    assert types[first + 1] == "run.start" and types[last - 1] == "run.end"
    assert start["runId"] == end["runId"] == events[first + 1]["runId"]
    assert start["gradedRunId"] == "run-graded" and start["gradingMode"] == "conversation"
    assert (end["score"], end["passed"], end["threshold"], end["reason"]) == (2, True, 1, "kind")
