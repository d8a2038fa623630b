"""Long conversations fit their model (docs/decks.md, "Context window and compaction"): the
runtime counts a request's input before sending it, compacts the conversation it sends when
it would pass `contextWindow * compactRatio`, and keeps the whole conversation in the state.

The model is the fake server (tests/support/fake_model_server.py) with a 4,000-token window:
it refuses a larger request with OpenAI's `context_length_exceeded`, as a real one does.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from gambit.core import (
    CompactionSettings,
    ProviderError,
    SavedState,
    grade_state,
    load_deck_tree,
    run_deck,
)
from gambit.core._runtime._context import COMPACT_PROMPT, COMPACTION_META_KEY, SUMMARY_PREFIX
from gambit.core._state import state_messages
from gambit.providers.openai_api import OpenAIResponsesProvider
from gambit.providers.openresponses import OpenResponsesProvider
from tests.support.fake_model_server import (
    FakeModelServer,
    RecordedRequest,
    Reply,
    count_request_tokens,
)

WINDOW = 4000
TURNS = 60
# Past half the limit of a 256-token window: counted precisely from the first pass.
LONG_MESSAGE = "Hello there, how are you doing today? " * 20


def _deck(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "chat" / "PROMPT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        textwrap.dedent(
            f"""\
            +++
            label = "long_chat"

            [modelParams]
            model = "gpt-4o"
            contextWindow = {WINDOW}
            compactRatio = 0.8
            {extra}
            +++
            You are a patient assistant. Keep track of every number the user mentions.
            """
        )
    )
    return path


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def _last_text(request: RecordedRequest) -> str:
    return _text(request.body["input"][-1])


def _answer(request: RecordedRequest) -> Reply:
    """The fake model: a summary when asked for one, else a reply of some 45 words."""
    text = _last_text(request)
    if text == COMPACT_PROMPT:
        return Reply(text="The user has been counting turns and telling me numbers; I noted them.")
    return Reply(
        text=f"Noted ({text[:12]}). "
        + "I will remember this number along with everything you told me before, "
        "and I can repeat any of it whenever you ask me to do so later on. " * 3
    )


def _message(turn: int) -> str:
    return f"Turn {turn}: my number for this turn is {turn * 7}, please keep it in mind as well."


async def _converse(
    deck: Path, provider: Any, turns: int, **options: Any
) -> tuple[SavedState, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    state: SavedState | None = None
    tree = load_deck_tree(deck)
    for turn in range(turns):
        result = await run_deck(
            tree,
            provider=provider,
            message=_message(turn),
            state=state,
            on_trace=events.append,
            **options,
        )
        state = result.state
    assert state is not None
    return state, events


@pytest.fixture
def windowed_server(fake_server: FakeModelServer) -> FakeModelServer:
    fake_server.token_budget = WINDOW
    fake_server.queue_many([_answer] * 400)
    return fake_server


def _provider(server: FakeModelServer) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(api_key="test-key", base_url=server.base_url)


async def test_a_60_turn_conversation_completes_in_a_4000_token_window(
    tmp_path: Path, windowed_server: FakeModelServer
):
    deck = _deck(tmp_path)
    state, events = await _converse(deck, _provider(windowed_server), TURNS)

    # Every turn is kept: the state holds the whole conversation, nothing summarised away.
    messages = [m for m in state_messages(state) if m.role in ("user", "assistant")]
    assert [m.content for m in messages if m.role == "user"] == [_message(t) for t in range(TURNS)]
    assert len(messages) == 2 * TURNS
    assert not any(SUMMARY_PREFIX in str(m.content) for m in messages)

    compactions = [e for e in events if e["type"] == "context.compacted"]
    assert len(compactions) >= 2
    for event in compactions:
        assert event["tokensBefore"] > event["limit"] == int(WINDOW * 0.8)
        assert event["tokensAfter"] < event["tokensBefore"]
        assert event["method"] == "api"
        assert event["summary"].startswith("The user has been counting turns")

    # What was sent stayed within the window: the fake refuses anything larger.
    model_requests = windowed_server.requests_to("/responses")
    assert all(count_request_tokens(r.body) <= WINDOW for r in model_requests)
    summary_requests = [r for r in model_requests if _last_text(r) == COMPACT_PROMPT]
    assert len(summary_requests) == len(compactions)
    assert all("tools" not in r.body for r in summary_requests)

    # After a compaction the chain starts afresh: the next request carries the summary and no
    # previous_response_id; later ones chain again.
    index = model_requests.index(summary_requests[0])
    after = model_requests[index + 1]
    assert "previous_response_id" not in after.body
    assert any(_text(item).startswith(SUMMARY_PREFIX) for item in after.body["input"])
    assert "previous_response_id" in model_requests[index + 2].body

    # The compaction is kept with the state: the next turn sends the compacted view again.
    assert state.meta is not None and state.meta[COMPACTION_META_KEY]["deckPath"] == str(deck)

    # Grades see every turn: a grader reads the saved state, not what was sent.
    grader = tmp_path / "count_grader.py"
    grader.write_text(
        textwrap.dedent(
            """
            import gambit

            def run(ctx):
                messages = ctx.input["session"]["messages"]
                users = [m for m in messages if m["role"] == "user"]
                seen = 3 if len(users) == 60 else -3
                return {"score": seen, "reason": f"{len(users)} user turns"}

            deck = gambit.define_deck(
                run=run,
                context_schema="gambit://schemas/graders/contexts/conversation.zod.ts",
                response_schema="gambit://schemas/graders/grader_output.zod.ts",
            )
            """
        )
    )
    run, _ = await grade_state(grader, state, provider=_provider(windowed_server))
    assert run.error is None, run.error
    assert [(g.score, g.reason) for g in run.grades] == [(3, f"{TURNS} user turns")]


async def test_without_compaction_the_conversation_fails_at_the_window(
    tmp_path: Path, windowed_server: FakeModelServer
):
    deck = _deck(tmp_path)
    with pytest.raises(ProviderError, match="context window") as failed:
        await _converse(
            deck, _provider(windowed_server), TURNS, compaction=CompactionSettings(enabled=False)
        )
    assert failed.value.code == "context_length_exceeded"


async def test_the_deck_switch_turns_compaction_off(
    tmp_path: Path, windowed_server: FakeModelServer
):
    deck = _deck(tmp_path, "compact = false")
    with pytest.raises(ProviderError, match="context window"):
        await _converse(deck, _provider(windowed_server), TURNS)


async def test_the_count_comes_from_the_input_token_endpoint_beside_the_reported_usage(
    tmp_path: Path, fake_server: FakeModelServer
):
    fake_server.count_usage = True
    # A window small enough that the first request is past half the limit: counted precisely.
    deck = _deck(tmp_path).read_text().replace(f"contextWindow = {WINDOW}", "contextWindow = 256")
    path = tmp_path / "small" / "PROMPT.md"
    path.parent.mkdir()
    path.write_text(deck.replace("compactRatio = 0.8", "compact = false"))
    events: list[dict[str, Any]] = []
    await run_deck(
        path, provider=_provider(fake_server), message=LONG_MESSAGE, on_trace=events.append
    )
    counted = fake_server.requests_to("/responses/input_tokens")
    assert len(counted) == 1
    sent = fake_server.requests_to("/responses")[0]
    call = next(e for e in events if e["type"] == "model.call")
    result = next(e for e in events if e["type"] == "model.result")
    assert call["contextTokens"] == {
        "counted": count_request_tokens(sent.body),
        "method": "api",
        "window": 256,
        "limit": 204,
    }
    assert result["contextTokens"]["reported"] == result["usage"]["promptTokens"]
    assert result["contextTokens"]["counted"] == result["contextTokens"]["reported"]
    assert counted[0].body["input"] == sent.body["input"]


async def test_a_provider_that_cannot_count_uses_the_tokenizer_of_a_known_family(
    tmp_path: Path, fake_server: FakeModelServer
):
    text = _deck(tmp_path).read_text().replace(f"contextWindow = {WINDOW}", "contextWindow = 256")
    path = tmp_path / "small" / "PROMPT.md"
    path.parent.mkdir()
    path.write_text(text.replace("compactRatio = 0.8", "compact = false"))
    events: list[dict[str, Any]] = []
    provider = OpenResponsesProvider(api_key="k", base_url=fake_server.base_url)
    await run_deck(path, provider=provider, message=LONG_MESSAGE, on_trace=events.append)
    call = next(e for e in events if e["type"] == "model.call")
    assert call["contextTokens"]["method"] == "o200k_base"
    assert fake_server.requests_to("/responses/input_tokens") == []
    # An unknown model family: the estimate, labelled as such.
    path.write_text(path.read_text().replace('"gpt-4o"', '"llama3.1"'))
    events.clear()
    await run_deck(path, provider=provider, message=LONG_MESSAGE, on_trace=events.append)
    call = next(e for e in events if e["type"] == "model.call")
    assert call["contextTokens"]["method"] == "estimate"


async def test_nothing_is_counted_without_a_known_window(
    tmp_path: Path, fake_server: FakeModelServer
):
    path = tmp_path / "plain" / "PROMPT.md"
    path.parent.mkdir()
    path.write_text('+++\nmodelParams.model = "gpt-4o"\n+++\nHi.\n')
    events: list[dict[str, Any]] = []
    await run_deck(path, provider=_provider(fake_server), message="Hello", on_trace=events.append)
    call = next(e for e in events if e["type"] == "model.call")
    assert "contextTokens" not in call
    assert fake_server.requests_to("/responses/input_tokens") == []
