import json

from decks_app.sessions.trace_items import (
    cost_text,
    deck_labeler,
    duration_text,
    sent_summary,
    split_envelope,
    tokens_text,
)
from decks_app.sessions.trace_tree import build_tree

ENVELOPE = {
    "runId": "run-1",
    "actionCallId": "call-1",
    "parentActionCallId": "action-1",
    "source": {"deckPath": "/w/support/PROMPT.md", "actionName": "lookup"},
    "status": 200,
    "payload": {"found": True},
}


def test_an_action_result_is_its_payload_with_the_envelope_kept_whole():
    assert split_envelope(json.dumps(ENVELOPE)) == ({"found": True}, ENVELOPE)
    failed = {**ENVELOPE, "status": 500, "code": "boom", "message": "it broke"}
    del failed["payload"]
    assert split_envelope(failed) == (
        {"status": 500, "code": "boom", "message": "it broke"},
        failed,
    )
    assert split_envelope({"found": True}) == ({"found": True}, None)
    assert split_envelope("plain text") == ("plain text", None)
    assert split_envelope("[not json") == ("[not json", None)


def test_decks_are_named_as_the_workspace_names_them(tmp_path):
    root = str(tmp_path)
    label = deck_labeler(root, "support/PROMPT.md", "Acme support bot")
    assert label(f"{root}/support/PROMPT.md") == "Acme support bot"
    assert label(f"{root}/support/actions/lookup/PROMPT.md") == "support/actions/lookup"
    assert label(f"{root}/hello/deck.py") == "hello/deck.py"
    assert label(f"{root}/x/../support/graders/tone/PROMPT.md") == "support/graders/tone"
    assert label("/elsewhere/pkg/graders/polite/PROMPT.md") == "polite"  # outside: never whole
    assert label(None) == "deck"


def test_figures_as_the_tree_shows_them():
    assert [duration_text(v) for v in (None, 812, 4200, 192_000)] == [
        "",
        "812 ms",
        "4.2 s",
        "3 min 12 s",
    ]
    assert [tokens_text(v) for v in (None, 150, 12_345)] == ["", "150 tok", "12.3k tok"]
    assert [cost_text(v) for v in (None, 0, 0.00042, 1.5)] == ["—", "$0", "$0.00042", "$1.50"]
    assert (
        sent_summary(
            {"itemCount": 2, "toolCount": 1, "mode": "responses", "stream": True, "provider": "p"}
        )
        == "2 items, 1 tools · responses · streamed · p"
    )
    assert sent_summary({"itemCount": None, "toolCount": 0}) == "0 tools"


def test_cost_adds_up_only_when_every_call_has_one():
    def run(*costs):
        events = [{"type": "run.start", "runId": "r", "deckPath": "/w/a/PROMPT.md", "ts": 1}]
        for i, cost in enumerate(costs):
            usage = {"totalTokens": 10, **({"costUsd": cost} if cost is not None else {})}
            events += [
                {"type": "model.call", "actionCallId": "a", "model": "m", "ts": 2 + 2 * i},
                {
                    "type": "model.result",
                    "actionCallId": "a",
                    "model": "m",
                    "usage": usage,
                    "ts": 3 + 2 * i,
                },
            ]
        [node] = build_tree(events)
        return node.total_tokens, node.total_cost, node.figures["cost"]

    assert run(0.001, 0.002) == (20, 0.003, "$0.003")
    assert run(0.001, None) == (20, None, "—")  # one call without a price: unknown, not less
    assert run(None) == (10, None, "—")
