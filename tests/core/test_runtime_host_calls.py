"""What the runtime hands its host whole (docs/endpoint.md, "Tools" and "Truncation"):

- every tool call of a pass that the host answers later (`on_tool` returns
  `TOOL_CALL_DEFERRED`), not only the first: the run stops after the pass with all of them
  pending, and resuming with all their outputs goes on from there;
- a pass cut at the model's token limit: `RunResult.incomplete_details`, and the trace's
  `model.result` says `finishReason: "length"` with the reason (Responses and chat mode);
- the request's `instructions` reach the model calls of that run only, never the state.
"""

from __future__ import annotations

import json

from gambit.core import (
    TOOL_CALL_DEFERRED,
    FunctionCallItem,
    FunctionCallOutputItem,
    run_deck,
)
from gambit.providers.offline import Call, Reply, ScriptedProvider

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder, Recorder

TOOLS = '[[tools]]\nname = "weather"\n[[tools]]\nname = "time"\n'


def deferring(request: dict) -> object:
    return TOOL_CALL_DEFERRED


async def test_every_deferred_call_of_a_pass_is_pending_and_resumed_together(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + TOOLS)
    provider = ScriptedProvider()
    provider.enqueue(
        Reply(calls=[Call("weather", {"city": "Oslo"}, "c1"), Call("time", {}, "c2")]),
        "Sunny, and it is noon.",
    )
    first = await run_deck(path, provider=provider, message="Weather and time?", on_tool=deferring)
    assert first.output is None
    assert [(c.call_id, c.name) for c in first.pending_tool_calls] == [
        ("c1", "weather"),
        ("c2", "time"),
    ]
    items = list(first.state.items or [])
    assert [i.call_id for i in items if isinstance(i, FunctionCallItem)] == ["c1", "c2"]
    assert not [i for i in items if isinstance(i, FunctionCallOutputItem)]
    answered = first.state.model_copy(
        update={
            "items": [
                *items,
                FunctionCallOutputItem(call_id="c1", output='{"sky": "sunny"}'),
                FunctionCallOutputItem(call_id="c2", output='{"time": "12:00"}'),
            ]
        }
    )
    second = await run_deck(path, provider=provider, state=answered, on_tool=deferring)
    assert second.output == "Sunny, and it is noon." and not second.pending_tool_calls
    sent = provider.requests[1].input
    calls = [i.call_id for i in sent if isinstance(i, FunctionCallItem)]
    outputs = [i.call_id for i in sent if isinstance(i, FunctionCallOutputItem)]
    assert calls == ["c1", "c2"] and outputs == ["c1", "c2"]


async def test_a_deferred_call_below_the_root_gets_an_error_result(decks: DeckFolder):
    decks.deck(
        "d/child/PROMPT.md",
        MODEL + ACTION_SCHEMAS + TOOLS,
    )
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "child"\ndescription = "c"\npath = "./child/PROMPT.md"\n',
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("child", {}), Call("weather", {}, "inner"), "child done", "done")
    rec = Recorder()
    result = await run_deck(
        path, provider=provider, message="go", on_tool=deferring, **rec.kwargs()
    )
    assert result.output == "done" and not result.pending_tool_calls
    inner = next(e for e in rec.of("tool.result") if e["name"] == "weather")
    assert json.loads(inner["result"])["code"] == "deferred_below_root"


async def test_a_truncated_answer_is_incomplete_in_the_result_and_the_trace(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    for mode in ("responses", "chat"):
        provider = ScriptedProvider()
        provider.enqueue(Reply(text="Once upon a", finish_reason="length"))
        rec = Recorder()
        result = await run_deck(path, provider=provider, message="story", mode=mode, **rec.kwargs())
        assert result.output == "Once upon a"
        assert result.incomplete_details == {"reason": "max_output_tokens"}, mode
        (traced,) = rec.of("model.result")
        assert traced["finishReason"] == "length", mode
        assert traced["incompleteDetails"] == {"reason": "max_output_tokens"}


async def test_a_whole_answer_is_not_incomplete(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL)
    provider = ScriptedProvider()
    provider.enqueue("The end.")
    rec = Recorder()
    result = await run_deck(path, provider=provider, message="story", **rec.kwargs())
    assert result.incomplete_details is None
    assert rec.of("model.result")[0]["finishReason"] == "stop"


async def test_instructions_reach_this_runs_requests_and_stay_out_of_the_state(
    decks: DeckFolder,
):
    path = decks.deck("d/PROMPT.md", MODEL, body="You are the deck.")
    for mode in ("responses", "chat"):
        provider = ScriptedProvider()
        provider.enqueue("one", "two")
        first = await run_deck(
            path, provider=provider, message="hi", instructions="Talk like a pirate.", mode=mode
        )
        assert _instructions(provider.requests[0], mode) == "Talk like a pirate."
        texts = json.dumps(first.state.model_dump(mode="json"))
        assert "pirate" not in texts, mode
        await run_deck(path, provider=provider, message="again", state=first.state, mode=mode)
        assert _instructions(provider.requests[1], mode) is None


def _instructions(request, mode: str) -> str | None:
    """The request's instructions: its own field (Responses), or the system message that
    chat mode puts first, before the deck's own prompt."""
    if mode == "responses":
        return request.instructions
    systems = [i for i in request.input if getattr(i, "role", None) == "system"]
    return systems[0].content[0].text if len(systems) == 2 else None
