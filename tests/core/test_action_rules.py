"""Seed 002 action rules at run time, written from the seed's words:

- "[[actions]] ... may declare schemas inline, in the execute module, or both";
- "Action result envelope": `payload` is validated against the action deck's
  responseSchema, `status`, `message`, `code` and `meta` are preserved for the parent, and a
  bare value becomes `payload`.
"""

from __future__ import annotations

import json

import pytest

from gambit.core import RunError, check_deck_tree, run_deck
from gambit.providers.offline import Call, ScriptedProvider

from .conftest import MODEL, DeckFolder

NO_SCHEMAS = """
import gambit
deck = gambit.define_deck(run=lambda ctx: {"echo": ctx.input["q"]})
"""
RESPONSE_ONLY = """
import gambit
deck = gambit.define_deck(
    run=lambda ctx: {"echo": ctx.input["q"]},
    response_schema={"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]},
)
"""
ENVELOPE = """
import gambit
def run(ctx):
    return {"status": 200, "message": "looked up", "code": "ok", "meta": {"n": 1},
            "payload": {"query": ctx.input["q"]}}
deck = gambit.define_deck(run=run)
"""
BARE = """
import gambit
deck = gambit.define_deck(run=lambda ctx: {"query": ctx.input["q"]})
"""
BAD_ENVELOPE = """
import gambit
deck = gambit.define_deck(run=lambda ctx: {"status": 200, "payload": {"other": 1}})
"""
IN_SCHEMA = '{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}'
OUT_SCHEMA = '{"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]}'
QUERY_SCHEMA = (
    '{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}'
)


def _deck(decks: DeckFolder, module: str, inline: str) -> str:
    decks.write("d/act.py", module)
    decks.write("d/in.json", IN_SCHEMA)
    decks.write("d/out.json", OUT_SCHEMA)
    decks.write("d/query.json", QUERY_SCHEMA)
    return decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "act"\ndescription = "d"\nexecute = "./act.py"\n' + inline,
    )


async def _envelope(path, args) -> dict:
    provider = ScriptedProvider()
    provider.enqueue(Call("act", args), "done")
    assert (await run_deck(path, provider=provider)).output == "done"
    outputs = [i for i in provider.requests[1].input if i.type == "function_call_output"]
    return json.loads(outputs[0].output)


@pytest.mark.parametrize(
    ("module", "inline"),
    [
        (NO_SCHEMAS, 'contextSchema = "./in.json"\nresponseSchema = "./out.json"'),
        (RESPONSE_ONLY, 'contextSchema = "./in.json"'),
    ],
    ids=["both-inline", "context-inline-response-in-module"],
)
async def test_execute_actions_run_with_inline_schemas(decks: DeckFolder, module, inline):
    path = _deck(decks, module, inline)
    tree, diag = check_deck_tree(path)
    assert tree is not None and not diag.errors
    envelope = await _envelope(path, {"q": "hello"})
    assert envelope["status"] == 200 if "status" in envelope else True
    assert envelope["payload"] == {"echo": "hello"}


async def test_inline_context_schema_validates_the_arguments(decks: DeckFolder):
    path = _deck(decks, NO_SCHEMAS, 'contextSchema = "./in.json"\nresponseSchema = "./out.json"')
    envelope = await _envelope(path, {"q": 3})
    assert (envelope["status"], envelope["code"]) == (400, "invalid_input")


def test_an_execute_action_with_no_schema_anywhere_is_a_load_error(decks: DeckFolder):
    path = _deck(decks, NO_SCHEMAS, "")
    _, diag = check_deck_tree(path)
    rendered = [p.render() for p in diag.errors]
    assert len(rendered) == 2 and all("actions[act]" in r for r in rendered)
    assert "declare contextSchema on the [[actions]] entry" in rendered[0]


async def test_an_envelope_keeps_its_fields_and_only_the_payload_is_validated(decks: DeckFolder):
    path = _deck(decks, ENVELOPE, 'contextSchema = "./in.json"\nresponseSchema = "./query.json"')
    envelope = await _envelope(path, {"q": "hello"})
    assert envelope["payload"] == {"query": "hello"}
    assert (envelope["status"], envelope["message"], envelope["code"], envelope["meta"]) == (
        200,
        "looked up",
        "ok",
        {"n": 1},
    )


async def test_a_bare_value_becomes_the_payload(decks: DeckFolder):
    path = _deck(decks, BARE, 'contextSchema = "./in.json"\nresponseSchema = "./query.json"')
    envelope = await _envelope(path, {"q": "hi"})
    assert envelope["payload"] == {"query": "hi"}


async def test_an_envelope_whose_payload_does_not_match_fails_naming_the_deck(decks: DeckFolder):
    path = _deck(
        decks, BAD_ENVELOPE, 'contextSchema = "./in.json"\nresponseSchema = "./query.json"'
    )
    provider = ScriptedProvider()
    provider.enqueue(Call("act", {"q": "x"}), "done")
    with pytest.raises(
        RunError,
        match=r"act\.py does not match its responseSchema: .*'query' is a required property",
    ):
        await run_deck(path, provider=provider)
