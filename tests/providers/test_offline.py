"""The offline providers: scripted replies, built-in demo models, and trace replay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gambit.core._ids import is_valid_id
from gambit.core._messages import ChatMessage, ToolCall, ToolCallFunction
from gambit.core._openresponses import (
    CreateResponseRequest,
    FunctionCallItem,
    MessageItem,
    ResponseUsage,
    UnknownItem,
    event_from_dict,
    function_call_item,
    function_call_output_item,
    message_item,
    output_text,
)
from gambit.core._provider import ChatProvider, ModelProvider, ProviderError
from gambit.core._state import SavedState
from gambit.core._trace import (
    ActionStartEvent,
    ModelCallEvent,
    ModelResultEvent,
    RunStartEvent,
    TraceToolCall,
    TraceWriter,
)
from gambit.providers.offline import (
    BUILTIN_MODELS,
    Call,
    Fail,
    RecordedResult,
    ReplayProvider,
    Reply,
    ScriptedProvider,
    Stream,
    echo_reply,
    word_chunks,
)
from tests.providers.helpers import Sleeps

RUN = "run-0123456789abcdef01234567"
ROOT = "/decks/root/PROMPT.md"
CHILD = "/decks/root/actions/child/PROMPT.md"


def request(text: str | None = "hi there", model: str = "test-model", **kw: Any):
    items = [message_item("system", "Be helpful.")]
    if text is not None:
        items.append(message_item("user", text))
    return CreateResponseRequest(model=model, input=items, **kw)


class Events:
    """Collects stream events (validating each one). With `log` (a list shared with a
    `Sleeps` recorder), each event's type is also appended to it, so a test sees the order
    of events and pauses."""

    def __init__(self, log: list | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.log = log

    def __call__(self, event: dict[str, Any]) -> None:
        assert isinstance(event, dict)
        event_from_dict(event)  # every event is a valid Open Responses event
        self.events.append(event)
        if self.log is not None:
            self.log.append(event["type"])

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def deltas(self) -> list[str]:
        return [e["delta"] for e in self.events if e["type"] == "response.output_text.delta"]

    @property
    def seqs(self) -> list[int]:
        return [e["sequence_number"] for e in self.events]


# --------------------------------------------------------------------------- scripted


def test_scripted_provider_satisfies_the_protocols():
    provider = ScriptedProvider()
    assert isinstance(provider, ModelProvider)
    assert isinstance(provider, ChatProvider)
    assert provider.name == "offline"
    assert provider.offline is True
    assert ScriptedProvider("fake").name == "fake"


async def test_scripted_text_reply():
    provider = ScriptedProvider().enqueue("Hello there friend")
    result = await provider.responses(request("one two three"))
    response = result.response
    assert response.output == [message_item("assistant", "Hello there friend")]
    assert output_text(response) == "Hello there friend"
    assert response.status == "completed"
    assert response.model == "test-model"
    assert is_valid_id(response.id, "resp")
    # Rough usage: words of the input (system + user) and of the output.
    assert response.usage == ResponseUsage(prompt_tokens=5, completion_tokens=3, total_tokens=8)
    assert result.updated_state is None
    assert provider.pending == 0


async def test_replies_are_consumed_in_order():
    provider = ScriptedProvider(replies=["first"]).enqueue("second", "third")
    assert provider.pending == 3
    texts = [output_text((await provider.responses(request())).response) for _ in range(3)]
    assert texts == ["first", "second", "third"]


async def test_stream_deltas_arrive_in_order_with_sequence_numbers():
    timeline: list[Any] = []
    provider = ScriptedProvider(sleep=Sleeps(timeline)).enqueue(
        Stream(["he", "llo", " world"], delay=0.02)
    )
    events = Events(timeline)
    result = await provider.responses(request(stream=True), on_stream_event=events)
    assert events.types == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events.seqs == list(range(1, 9))
    assert events.deltas == ["he", "llo", " world"]
    assert all(e["output_index"] == 0 for e in events.events[1:-1])
    assert events.events[5]["text"] == "hello world"
    assert events.events[0]["response"]["status"] == "in_progress"
    assert events.events[1]["item"]["content"] == []
    assert events.events[6]["item"] == message_item("assistant", "hello world").to_dict()
    completed = events.events[-1]["response"]
    assert completed == result.response.to_dict()
    assert completed["id"] == events.events[0]["response"]["id"]
    # The stream's delay is taken before each delta (so deltas are spread out in time), and
    # only there.
    delta = "response.output_text.delta"
    assert timeline == [
        "response.created",
        "response.output_item.added",
        *[("sleep", 0.02), delta] * 3,
        "response.output_text.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert output_text(result.response) == "hello world"


async def test_stream_from_string_splits_into_words_and_uses_the_chunk_delay():
    sleeps = Sleeps()
    provider = ScriptedProvider(chunk_delay=0.01, sleep=sleeps).enqueue(Stream("one two  three"))
    events = Events()
    await provider.responses(request(), on_stream_event=events)
    assert events.deltas == ["one ", "two  ", "three"]
    assert sleeps == [0.01, 0.01, 0.01]  # the provider's chunk_delay, once per delta
    # Not streamed: no pause at all.
    provider.enqueue(Stream("one two  three"))
    await provider.responses(request())
    assert sleeps == [0.01, 0.01, 0.01]


async def test_plain_text_streams_as_a_single_delta_and_no_stream_means_no_events():
    provider = ScriptedProvider().enqueue("whole text", "quiet")
    events = Events()
    await provider.responses(request(), on_stream_event=events)
    assert events.deltas == ["whole text"]
    result = await provider.responses(request())
    assert output_text(result.response) == "quiet"
    assert len(events.events) == 6  # nothing more was emitted for the second call


async def test_calls_with_dict_and_json_string_args():
    provider = ScriptedProvider().enqueue(
        Call("lookup", {"id": 7, "name": "Zoë"}),
        Call("raw", '{"b":2,  "a":1}', call_id="call-fixed"),
        Call("noargs"),
    )
    first = (await provider.responses(request())).response.output
    assert len(first) == 1 and isinstance(first[0], FunctionCallItem)
    assert first[0].name == "lookup"
    assert json.loads(first[0].arguments) == {"id": 7, "name": "Zoë"}
    assert is_valid_id(first[0].call_id, "call")
    second = (await provider.responses(request())).response.output
    assert second == [function_call_item("call-fixed", "raw", '{"b":2,  "a":1}')]
    third = (await provider.responses(request())).response.output
    assert third[0].arguments == "{}"


async def test_function_calls_stream_as_item_events():
    provider = ScriptedProvider().enqueue(Call("lookup", {"id": 1}, call_id="call-1"))
    events = Events()
    result = await provider.responses(request(), on_stream_event=events)
    assert events.types == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = function_call_item("call-1", "lookup", '{"id": 1}').to_dict()
    assert events.events[1]["item"] == item
    assert events.events[2]["item"] == item
    assert events.seqs == [1, 2, 3, 4]
    assert result.response.output[0].to_dict() == item


async def test_mixed_reply():
    usage = ResponseUsage(
        prompt_tokens=11, completion_tokens=7, total_tokens=18, reasoning_tokens=4
    )
    provider = ScriptedProvider().enqueue(
        Reply(
            text=Stream(["Let me ", "check."]),
            calls=[Call("a", {"x": 1}, call_id="call-a"), Call("b", "{}", call_id="call-b")],
            usage=usage,
            reasoning="thinking hard",
            extra_items=[{"type": "acme:note", "data": {"k": "v"}}],
        )
    )
    events = Events()
    response = (await provider.responses(request(), on_stream_event=events)).response
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message", "function_call", "function_call", "acme:note"]
    assert isinstance(response.output[0], UnknownItem)
    assert response.output[0].to_dict()["summary"] == [
        {"type": "summary_text", "text": "thinking hard"}
    ]
    assert output_text(response) == "Let me check."
    assert [i.call_id for i in response.output if isinstance(i, FunctionCallItem)] == [
        "call-a",
        "call-b",
    ]
    assert response.output[4].to_dict() == {"type": "acme:note", "data": {"k": "v"}}
    assert response.usage == usage
    assert events.deltas == ["Let me ", "check."]
    assert {e["output_index"] for e in events.events if "delta" in e} == {1}
    added = [e["output_index"] for e in events.events if e["type"].endswith("item.added")]
    assert added == [0, 1, 2, 3, 4]
    assert events.seqs == list(range(1, len(events.events) + 1))


async def test_length_finish_reason_marks_the_response_incomplete():
    provider = ScriptedProvider().enqueue(Reply(text="cut sh", finish_reason="length"))
    response = (await provider.responses(request())).response
    assert response.status == "incomplete"
    assert response.to_dict()["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_fail_before_any_delta():
    provider = ScriptedProvider().enqueue(Fail("rate limited", status=429, code="rate_limit"))
    events = Events()
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(), on_stream_event=events)
    err = info.value
    assert str(err) == "offline: rate limited"
    assert (err.provider, err.status, err.code) == ("offline", 429, "rate_limit")
    assert err.retryable is True
    assert err.partial_text == ""
    assert events.events == []
    assert len(provider.requests) == 1


async def test_fail_retryable_defaults_and_override():
    assert Fail("x", status=400).error("offline").retryable is False
    assert Fail("x", status=503).error("offline").retryable is True
    assert Fail("x").error("offline").retryable is False
    assert Fail("x", status=400, retryable=True).error("offline").retryable is True


async def test_fail_after_deltas_streams_partial_text_then_fails():
    provider = ScriptedProvider().enqueue(
        Fail("connection reset", status=502, after_deltas=["par", "tial"])
    )
    events = Events()
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(), on_stream_event=events)
    assert info.value.partial_text == "partial"
    assert info.value.status == 502
    assert events.types == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.failed",
    ]
    assert events.deltas == ["par", "tial"]
    assert events.seqs == [1, 2, 3, 4, 5]
    assert events.events[-1]["error"]["message"] == "connection reset"
    assert events.events[-1]["response"]["status"] == "failed"


async def test_fail_after_deltas_without_streaming_still_carries_partial_text():
    provider = ScriptedProvider().enqueue(Fail("boom", after_deltas=["a", "b"]))
    with pytest.raises(ProviderError) as info:
        await provider.responses(request())
    assert info.value.partial_text == "ab"


async def test_empty_queue_error_names_model_and_deck():
    provider = ScriptedProvider()
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(model="openrouter/x"), deck_path="/d/PROMPT.md")
    assert str(info.value) == (
        "offline: no scripted reply left for model openrouter/x (deck /d/PROMPT.md); "
        "enqueue more replies"
    )
    assert info.value.provider == "offline"
    assert info.value.code == "no_scripted_reply"
    # The failed call is still recorded.
    assert provider.records[0].deck_path == "/d/PROMPT.md"


async def test_callable_replies_see_the_request():
    def reply(req: CreateResponseRequest):
        last = req.input[-1]
        return f"echo {output_text([message_item('assistant', last.content[0].text)])}"

    async def async_reply(req: CreateResponseRequest):
        return Reply(text="async", calls=[Call("t", {"model": req.model}, call_id="call-t")])

    def failing(req: CreateResponseRequest):
        return Fail("nope", code="bad")

    provider = ScriptedProvider().enqueue(reply, async_reply, failing, lambda r: 42)
    assert output_text((await provider.responses(request("ping"))).response) == "echo ping"
    out = (await provider.responses(request(model="m2"))).response.output
    assert out[1] == function_call_item("call-t", "t", '{"model": "m2"}')
    with pytest.raises(ProviderError, match="nope"):
        await provider.responses(request())
    with pytest.raises(TypeError, match="got int"):
        await provider.responses(request())


def test_enqueue_rejects_unknown_reply_types():
    with pytest.raises(TypeError, match="got int"):
        ScriptedProvider().enqueue(3)  # type: ignore[arg-type]


async def test_requests_are_recorded_with_state_and_deck_path():
    state = SavedState(run_id=RUN, meta={"thread": "t-1"})
    provider = ScriptedProvider().enqueue("a", "b", "c")
    first = request("first")
    await provider.responses(first, state=state, deck_path=ROOT)
    await provider.responses({"model": "dict-model", "input": "as a dict"})
    await provider.responses(request("third"), deck_path=CHILD, on_stream_event=lambda e: None)
    assert provider.requests[0] is first
    assert provider.requests[1].model == "dict-model"
    assert provider.requests[1].input == [message_item("user", "as a dict")]
    assert provider.last_request is provider.requests[2]
    assert [r.deck_path for r in provider.records] == [ROOT, None, CHILD]
    assert provider.records[0].state is state
    assert [r.streamed for r in provider.records] == [False, False, True]
    assert {r.mode for r in provider.records} == {"responses"}
    provider.clear()
    assert provider.requests == [] and provider.pending == 0


async def test_async_stream_callback_is_awaited():
    seen: list[str] = []

    async def on_event(event: dict[str, Any]) -> None:
        seen.append(event["type"])

    provider = ScriptedProvider().enqueue("hi")
    await provider.responses(request(), on_stream_event=on_event)
    assert seen[0] == "response.created" and seen[-1] == "response.completed"


# --------------------------------------------------------------------------- chat mode


async def test_chat_mode_text_and_streaming():
    provider = ScriptedProvider().enqueue(Stream(["Hi", " there"]), "plain")
    chunks: list[str] = []
    messages = [ChatMessage(role="system", content="sys"), ChatMessage(role="user", content="yo")]
    result = await provider.chat(
        model="m", messages=messages, stream=True, deck_path=ROOT, on_stream_text=chunks.append
    )
    assert chunks == ["Hi", " there"]
    assert result.message == ChatMessage(role="assistant", content="Hi there")
    assert result.finish_reason == "stop"
    assert result.tool_calls == []
    assert result.usage == ResponseUsage(prompt_tokens=2, completion_tokens=2, total_tokens=4)
    record = provider.records[0]
    assert record.mode == "chat" and record.deck_path == ROOT and record.streamed
    assert record.request.input == [message_item("system", "sys"), message_item("user", "yo")]
    second = await provider.chat(model="m", messages=messages)
    assert second.message.content == "plain"


async def test_chat_mode_tool_calls():
    provider = ScriptedProvider().enqueue(
        Reply(
            text="checking",
            calls=[
                Call("lookup", {"id": 3}, call_id="call-1"),
                Call("raw", "not json", call_id="call-2"),
            ],
        ),
        Call("only", '{"q": "x"}', call_id="call-3"),
    )
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    result = await provider.chat(
        model="m", messages=[ChatMessage(role="user", content="hi")], tools=tools
    )
    assert result.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.args) for c in result.tool_calls] == [
        ("call-1", "lookup", {"id": 3}),
        ("call-2", "raw", {}),
    ]
    assert result.tool_calls[1].arguments == "not json"
    assert result.message.content == "checking"
    assert result.message.tool_calls == [
        ToolCall(id="call-1", function=ToolCallFunction(name="lookup", arguments='{"id": 3}')),
        ToolCall(id="call-2", function=ToolCallFunction(name="raw", arguments="not json")),
    ]
    assert provider.requests[0].tools[0].function.name == "lookup"
    only = await provider.chat(model="m", messages=[])
    assert only.message.content is None
    assert only.tool_calls[0].args == {"q": "x"}


async def test_chat_mode_failure_and_length():
    provider = ScriptedProvider().enqueue(
        Fail("dropped", after_deltas=["par"]), Reply(text="trunc", finish_reason="length")
    )
    chunks: list[str] = []
    with pytest.raises(ProviderError) as info:
        await provider.chat(model="m", messages=[], on_stream_text=chunks.append)
    assert chunks == ["par"] and info.value.partial_text == "par"
    result = await provider.chat(model="m", messages=[])
    assert result.finish_reason == "length"


# --------------------------------------------------------------------------- built-in models


async def test_echo_model():
    provider = ScriptedProvider(fallback_models=True)
    events = Events()
    result = await provider.responses(
        request("what time is it", model="offline/echo"), on_stream_event=events
    )
    assert output_text(result.response) == "You said: what time is it"
    assert "".join(events.deltas) == "You said: what time is it"
    assert len(events.deltas) > 1  # streamed word by word
    bare = await provider.responses(request("x", model="echo"))
    assert output_text(bare.response) == "You said: x"
    greeting = await provider.responses(request(None, model="offline/echo"))
    assert "echo" in output_text(greeting.response)
    chat = await provider.chat(
        model="offline/echo", messages=[ChatMessage(role="user", content="hey")]
    )
    assert chat.message.content == "You said: hey"
    assert "echo" in BUILTIN_MODELS and BUILTIN_MODELS["echo"] is echo_reply


async def test_echo_uses_the_last_user_message():
    req = CreateResponseRequest(
        model="offline/echo",
        input=[
            message_item("user", "first"),
            message_item("assistant", "You said: first"),
            message_item("user", "second"),
            function_call_item("call-1", "gambit_context", "{}"),
            function_call_output_item("call-1", "{}"),
        ],
    )
    assert echo_reply(req).text == "You said: second"


async def test_queue_wins_over_fallback_models_and_unknown_models_still_fail():
    provider = ScriptedProvider(fallback_models=True).enqueue("scripted")
    assert output_text((await provider.responses(request(model="offline/echo"))).response) == (
        "scripted"
    )
    with pytest.raises(
        ProviderError, match=r"enqueue more replies or use a built-in .*offline/echo"
    ):
        await provider.responses(request(model="offline/unknown"))


async def test_no_fallback_by_default():
    with pytest.raises(ProviderError, match="no scripted reply left for model offline/echo"):
        await ScriptedProvider().responses(request(model="offline/echo"))


# --------------------------------------------------------------------------- word chunks


@pytest.mark.parametrize(
    "text", ["", "one", "one two", "  lead and trail  ", "a\nb\n\nc", "   ", "Zoë  ünï"]
)
def test_word_chunks_rejoin_to_the_text(text: str):
    chunks = word_chunks(text)
    assert "".join(chunks) == text
    assert all(chunks)


# --------------------------------------------------------------------------- replay


def _usage(n: int) -> ResponseUsage:
    return ResponseUsage(prompt_tokens=n, completion_tokens=1, total_tokens=n + 1)


def _call(deck: str, action: str, user: str) -> ModelCallEvent:
    return ModelCallEvent(
        run_id=RUN,
        action_call_id=action,
        deck_path=deck,
        model="openrouter/m",
        mode="responses",
        items=[message_item("user", user)],
        response_items=[message_item("user", user)],
    )


def _result(deck: str, action: str, output: list[Any], usage: int) -> ModelResultEvent:
    return ModelResultEvent(
        run_id=RUN,
        action_call_id=action,
        deck_path=deck,
        model="openrouter/m",
        mode="responses",
        output=output,
        usage=_usage(usage),
    )


@pytest.fixture
def trace_file(tmp_path):
    """A root deck and a nested child deck whose model results interleave."""
    path = tmp_path / "trace.jsonl"
    root_act, child_act = "action-root", "action-child"
    with TraceWriter(path) as writer:
        writer.write(RunStartEvent(run_id=RUN, deck_path=ROOT))
        writer.write(_call(ROOT, root_act, "hello"))
        writer.write(
            _result(ROOT, root_act, [function_call_item("call-c", "child", '{"q": 1}')], 10)
        )
        writer.write(ActionStartEvent(run_id=RUN, action_call_id="call-c", name="child"))
        writer.write(_call(CHILD, child_act, "child input"))
        writer.write(_result(CHILD, child_act, [function_call_item("call-x", "tool", "{}")], 20))
        writer.write(_call(ROOT, root_act, "hello"))  # never answered in this trace
        writer.write(_call(CHILD, child_act, "child input"))
        writer.write(_result(CHILD, child_act, [message_item("assistant", "child says hi")], 21))
        writer.write(_call(ROOT, root_act, "hello"))
        writer.write(
            _result(ROOT, root_act, [message_item("assistant", "All done, thanks for waiting")], 11)
        )
    return path


def test_replay_provider_satisfies_the_protocols(trace_file):
    provider = ReplayProvider.from_trace(trace_file)
    assert isinstance(provider, ModelProvider) and isinstance(provider, ChatProvider)
    assert provider.name == "offline-replay"
    assert provider.offline is True
    assert provider.remaining() == 4
    assert provider.remaining(ROOT) == 2 and provider.remaining(CHILD) == 2


async def test_replay_respects_order_per_deck_and_replays_usage(trace_file):
    provider = ReplayProvider.from_trace(str(trace_file))
    # Ask in a different interleaving than recorded: order is per deck.
    child1 = (await provider.responses(request("child input"), deck_path=CHILD)).response
    root1 = (await provider.responses(request("hello"), deck_path=ROOT)).response
    root2 = (await provider.responses(request("hello"), deck_path=ROOT)).response
    child2 = (await provider.responses(request("child input"), deck_path=CHILD)).response
    assert root1.output == [function_call_item("call-c", "child", '{"q": 1}')]
    assert child1.output == [function_call_item("call-x", "tool", "{}")]
    assert output_text(child2) == "child says hi"
    assert output_text(root2) == "All done, thanks for waiting"
    assert [r.usage.prompt_tokens for r in (root1, child1, child2, root2)] == [10, 20, 21, 11]
    assert is_valid_id(root1.id, "resp")
    assert root1.model == "test-model"
    assert provider.remaining() == 0
    assert [r.deck_path for r in provider.records] == [CHILD, ROOT, ROOT, CHILD]


async def test_replay_running_out_raises(trace_file):
    provider = ReplayProvider.from_trace(trace_file)
    await provider.responses(request(), deck_path=ROOT)
    await provider.responses(request(), deck_path=ROOT)
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(), deck_path=ROOT)
    assert info.value.provider == "offline-replay"
    assert info.value.code == "replay_exhausted"
    assert str(info.value) == (
        f"offline-replay: deck {ROOT} made call 3, but the trace recorded only 2 model calls for it"
    )
    # The child deck is unaffected.
    assert provider.remaining(CHILD) == 2


async def test_replay_unknown_deck_raises(trace_file):
    provider = ReplayProvider.from_trace(trace_file)
    with pytest.raises(ProviderError, match=r"no model results were recorded for deck /x/OTHER.md"):
        await provider.responses(request(), deck_path="/x/OTHER.md")


async def test_replay_matches_a_moved_deck_by_file_name(tmp_path):
    events = [_result("/old/place/solo.deck.md", "action-1", [message_item("assistant", "ok")], 1)]
    provider = ReplayProvider.from_trace(events)
    moved = (await provider.responses(request(), deck_path="/new/solo.deck.md")).response
    assert output_text(moved) == "ok"


async def test_replay_streams_recorded_text_as_word_chunks(trace_file):
    provider = ReplayProvider.from_trace(trace_file, chunk_delay=0.005)
    await provider.responses(request(), deck_path=ROOT)
    events = Events()
    result = await provider.responses(request(), deck_path=ROOT, on_stream_event=events)
    assert events.deltas == ["All ", "done, ", "thanks ", "for ", "waiting"]
    assert events.types[0] == "response.created"
    assert events.types[-1] == "response.completed"
    assert events.seqs == list(range(1, len(events.events) + 1))
    assert events.events[-1]["response"] == result.response.to_dict()
    # A recorded function call streams as item events.
    calls = Events()
    await provider.responses(request(), deck_path=CHILD, on_stream_event=calls)
    assert calls.types == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]


async def test_replay_reads_every_item_spelling_and_old_chat_traces():
    msg = message_item("assistant", "from items").to_dict()
    events = [
        # the usual key on model.result is `output`; an `items` key is also accepted
        {"type": "model.result", "runId": RUN, "deckPath": ROOT, "items": [msg]},
        {
            "type": "model.result",
            "runId": RUN,
            "deckPath": ROOT,
            "responseItems": [message_item("assistant", "from responseItems").to_dict()],
        },
        # an old chat trace: message + toolCalls only
        ModelResultEvent(
            run_id=RUN,
            deck_path=ROOT,
            finish_reason="tool_calls",
            message=ChatMessage(role="assistant", content="calling"),
            tool_calls=[TraceToolCall(id="call-9", name="lookup", args={"id": 9})],
        ),
        ModelResultEvent(
            run_id=RUN,
            deck_path=ROOT,
            message=ChatMessage(
                role="assistant",
                content=None,
                tool_calls=[
                    ToolCall(id="call-r", function=ToolCallFunction(name="raw", arguments="{ }"))
                ],
            ),
            tool_calls=[TraceToolCall(id="call-r", name="raw", args={})],
        ),
        ModelResultEvent(run_id=RUN, deck_path=ROOT),
    ]
    provider = ReplayProvider.from_trace(events)
    outputs = [(await provider.responses(request(), deck_path=ROOT)).response for _ in range(5)]
    assert output_text(outputs[0]) == "from items"
    assert output_text(outputs[1]) == "from responseItems"
    assert outputs[2].output == [
        message_item("assistant", "calling"),
        function_call_item("call-9", "lookup", '{"id": 9}'),
    ]
    assert outputs[3].output == [function_call_item("call-r", "raw", "{ }")]
    assert outputs[4].output == []
    # No recorded usage: estimated, never missing.
    assert outputs[0].usage is not None and outputs[0].usage.completion_tokens == 2


async def test_replay_strict_mode(trace_file):
    lenient = ReplayProvider.from_trace(trace_file)
    await lenient.responses(request("something else"), deck_path=ROOT)  # not checked

    strict = ReplayProvider.from_trace(trace_file, strict=True)
    await strict.responses(request("hello"), deck_path=ROOT)
    with pytest.raises(ProviderError) as info:
        await strict.responses(request("changed"), deck_path=CHILD)
    assert info.value.code == "replay_diverged"
    assert "recorded last user message 'child input', got 'changed'" in str(info.value)
    assert "at call 1" in str(info.value)


async def test_replay_chat_mode(trace_file):
    provider = ReplayProvider.from_trace(trace_file)
    chunks: list[str] = []
    first = await provider.chat(model="m", messages=[], deck_path=ROOT)
    assert first.finish_reason == "tool_calls"
    assert first.tool_calls[0].args == {"q": 1}
    second = await provider.chat(
        model="m", messages=[], deck_path=ROOT, on_stream_text=chunks.append
    )
    assert second.message.content == "All done, thanks for waiting"
    assert chunks == ["All ", "done, ", "thanks ", "for ", "waiting"]
    assert second.usage.prompt_tokens == 11


async def test_replay_from_state(trace_file):
    from gambit.core._trace import read_trace

    state = SavedState(run_id=RUN, traces=read_trace(trace_file))
    provider = ReplayProvider.from_state(state)
    assert provider.remaining() == 4
    from_dict = ReplayProvider.from_state(state.to_dict())
    response = (await from_dict.responses(request(), deck_path=CHILD)).response
    assert response.output[0].name == "tool"
    with pytest.raises(ProviderError, match="has no traces"):
        ReplayProvider.from_state(SavedState(run_id=RUN))


async def test_replay_single_deck_without_deck_path():
    provider = ReplayProvider(
        [RecordedResult(deck_path=ROOT, output=[message_item("assistant", "only")])]
    )
    assert output_text((await provider.responses(request())).response) == "only"
    assert isinstance(provider.records[0].request.input[0], MessageItem)


async def test_echo_answers_respond_decks_with_a_schema_valid_payload():
    from gambit.core._openresponses import ResponseFunctionDefinition, ResponseToolDefinition

    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": -3, "maximum": 3},
            "reason": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "mood": {"enum": ["calm", "upset"]},
        },
        "required": ["score", "reason", "tags", "mood"],
    }
    respond = ResponseToolDefinition(
        function=ResponseFunctionDefinition(
            name="gambit_respond",
            parameters={
                "type": "object",
                "properties": {"payload": schema},
                "required": ["payload"],
            },
        )
    )
    provider = ScriptedProvider(fallback_models=True)
    request = CreateResponseRequest(
        model="offline/echo", input=[message_item("user", "grade this")], tools=[respond]
    )
    result = await provider.responses(request)
    (call,) = result.response.output
    payload = json.loads(call.arguments)["payload"]
    assert payload == {
        "score": 0,
        "reason": "You said: grade this",
        "tags": ["You said: grade this"],
        "mood": "calm",
    }


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("Where is my order A1002?", "order_status"),
        ("I want a refund, this is a complaint!", "draft_reply"),
    ],
)
async def test_the_demo_model_calls_the_tool_the_message_is_about(said, expected):
    # Before, a hash of the message chose: the README's "Where is my order A1002?" drafted a
    # refund, and the complaint looked up an order.
    from gambit.core._openresponses import ResponseFunctionDefinition, ResponseToolDefinition

    def tool(name: str, description: str) -> ResponseToolDefinition:
        return ResponseToolDefinition(
            function=ResponseFunctionDefinition(
                name=name, description=description, parameters={"type": "object"}
            )
        )

    tools = [
        tool("order_status", "Look up an order by its id."),
        tool(
            "draft_reply", "Draft a careful reply for a sensitive situation (refunds, complaints)."
        ),
    ]
    provider = ScriptedProvider(fallback_models=True)
    result = await provider.responses(
        CreateResponseRequest(model="offline/demo", input=[message_item("user", said)], tools=tools)
    )
    (call,) = result.response.output
    assert call.name == expected


async def test_an_unknown_model_of_the_offline_provider_is_named_as_unknown():
    # `--model-force offline/nosuch` said "no scripted reply left ... enqueue more replies",
    # which means nothing on the command line: nothing was ever scripted there.
    from gambit.providers.offline.demo import BUILTIN_MODELS

    provider = ScriptedProvider(models=BUILTIN_MODELS)
    with pytest.raises(ProviderError) as info:
        await provider.responses(request(model="offline/nosuch"), deck_path="/d/PROMPT.md")
    assert str(info.value) == (
        "offline: unknown offline model offline/nosuch (deck /d/PROMPT.md); "
        "the offline models are offline/echo, offline/demo"
    )
    assert info.value.code == "unknown_model"
