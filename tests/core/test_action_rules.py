"""Action rules at run time (docs/decks.md, "Actions and their results"):

- an `execute` action's schemas may be declared on its `[[actions]]` entry, in its module, or
  both (then they must match);
- the result envelope: `payload` is validated against the action's responseSchema, `status`,
  `message`, `code` and `meta` reach the parent as they are, and a bare value becomes
  `payload`.
"""

from __future__ import annotations

import json

import pytest

from gambit.core import RunError, check_deck_tree, run_deck
from gambit.providers.offline import Call, ScriptedProvider

from .conftest import ACTION_SCHEMAS, MODEL, DeckFolder

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


# ---- TOML 1.1 front matter (issue: the TypeScript Gambit's shipped decks use it) -----------


def test_toml_1_1_inline_tables_span_lines_with_trailing_commas(decks: DeckFolder):
    path = decks.write(
        "d/PROMPT.md",
        '+++\nlabel = "cold emailer"\n[modelParams]\nmodel = "test-model"\n'
        'additionalParams = {\n  codex = { effort = "low", },\n  note = "x",\n}\n+++\nWrite.\n',
    )
    tree, diag = check_deck_tree(path)
    assert not diag.errors, [p.render() for p in diag.errors]
    assert tree.root.label == "cold emailer"


def test_a_toml_error_keeps_its_file_and_line(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", '+++\nlabel = "x"\nbroken = = 1\n+++\nBody.\n')
    _, diag = check_deck_tree(path)
    (problem,) = diag.errors
    assert problem.file == str(path) and problem.line == 3
    assert "invalid TOML front matter" in problem.message


def test_toml_nested_thousands_deep_is_a_clear_error(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", "+++\nx = " + "[" * 5000 + "]" * 5000 + "\n+++\nBody.\n")
    _, diag = check_deck_tree(path)
    (problem,) = diag.errors
    assert "nested more than 400 levels deep" in problem.message and problem.file == str(path)


# ---- [[responseItemExtensions]] dataSchema ---------------------------------------------------

EXTENSION = '[[responseItemExtensions]]\ntype = "acme:search"\ndataSchema = "./search.json"\n'
SEARCH = '{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}'


def test_a_missing_data_schema_file_is_an_error_naming_the_key(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + EXTENSION)
    _, diag = check_deck_tree(path)
    (problem,) = diag.errors
    assert problem.key == "responseItemExtensions[0].dataSchema" and problem.file == str(path)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[[responseItemExtensions]]\ndataSchema = "./search.json"\n', "must include a type"),
        (
            '[[responseItemExtensions]]\ntype = "search"\ndataSchema = "./search.json"\n',
            "must be namespaced",
        ),
        ('[[responseItemExtensions]]\ntype = "acme:search"\n', "must include dataSchema"),
        (EXTENSION + EXTENSION, "duplicate response item extension type"),
    ],
)
def test_extension_declarations_are_checked(decks: DeckFolder, table, message):
    decks.write("d/search.json", SEARCH)
    path = decks.deck("d/PROMPT.md", MODEL + table)
    _, diag = check_deck_tree(path)
    assert any(message in p.message for p in diag.errors), [p.render() for p in diag.errors]


async def test_declared_extension_items_are_validated_when_produced(decks: DeckFolder):
    from gambit.providers.offline import Reply

    decks.write("d/search.json", SEARCH)
    path = decks.deck("d/PROMPT.md", MODEL + EXTENSION)
    ok = ScriptedProvider().enqueue(
        Reply(text="found", extra_items=[{"type": "acme:search", "data": {"query": "q"}}])
    )
    result = await run_deck(path, provider=ok)
    assert result.output == "found"
    assert any(getattr(i, "type", None) == "acme:search" for i in result.state.items)
    undeclared = ScriptedProvider().enqueue(
        Reply(text="found", extra_items=[{"type": "other:thing", "data": 1}])
    )
    assert (await run_deck(path, provider=undeclared)).output == "found"  # kept, not checked
    bad = ScriptedProvider().enqueue(
        Reply(text="found", extra_items=[{"type": "acme:search", "data": {"q": 1}}])
    )
    with pytest.raises(
        RunError, match=r"'acme:search' \(response.output\[1\]\) whose data does not match"
    ):
        await run_deck(path, provider=bad)


# ---- the model resolver's argument ----------------------------------------------------------


class RecordingResolver:
    def __init__(self):
        self.seen = []

    def resolve_model(self, model, *, params=None, deck_path=None):
        from gambit.core import ResolvedModel

        self.seen.append(model)
        return ResolvedModel(model=model if isinstance(model, str) else model[0], params=params)


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ('modelParams.model = "alias/model"\n', "alias/model"),
        ('modelParams.model = ["alias/model"]\n', "alias/model"),
        ('modelParams.model = ["a/one", "b/two"]\n', ["a/one", "b/two"]),
    ],
)
async def test_a_resolver_gets_a_string_or_the_fallback_list(decks: DeckFolder, front, expected):
    path = decks.deck("d/PROMPT.md", front)
    resolver = RecordingResolver()
    await run_deck(path, provider=ScriptedProvider().enqueue("hi"), model_resolver=resolver)
    assert resolver.seen == [expected]


# ---- names, duplicates, unknown entry keys, snippets (issue 8 §1) ----------------------------


def _errors(path) -> list[str]:
    _, diag = check_deck_tree(path)
    return [p.render() for p in diag.errors]


def _warnings(path) -> list[str]:
    _, diag = check_deck_tree(path)
    return [p.render() for p in diag.warnings]


@pytest.mark.parametrize("name", ["gambit_context", "gambit_init", "gambit_respond", "gambit_x"])
def test_gambit_names_are_reserved_for_actions(decks: DeckFolder, name):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + f'[[actions]]\nname = "{name}"\ndescription = "d"\npath = "./child/PROMPT.md"\n',
    )
    assert any(f"Action name {name} is reserved (prefix gambit_)" in e for e in _errors(path))


def test_built_in_tool_names_are_reserved(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        MODEL + '[[actions]]\nname = "read_file"\ndescription = "d"\npath = "./child/PROMPT.md"\n',
    )
    assert any("conflicts with a built-in tool name" in e for e in _errors(path))


def test_duplicate_action_names_are_an_error(decks: DeckFolder):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    entry = '[[actions]]\nname = "same"\ndescription = "d"\npath = "./child/PROMPT.md"\n'
    path = decks.deck("d/PROMPT.md", MODEL + entry + entry)
    assert any("duplicate action name same" in e for e in _errors(path))


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (
            '[[actions]]\nname = "a"\ndescription = "d"\npath = "./child/PROMPT.md"\ncolour = 1\n',
            "actions[1].colour",
        ),
        ('[[tools]]\nname = "t"\nsize = 2\n', "tools[1].size"),
        ('[[scenarios]]\npath = "./child/PROMPT.md"\nweight = 3\n', "scenarios[1].weight"),
        ('[[graders]]\npath = "./child/PROMPT.md"\nstrictness = 3\n', "graders[1].strictness"),
        ('[permissions.run]\ncommands = ["ls"]\nshell = true\n', "permissions.run.shell"),
    ],
)
def test_unknown_keys_in_entries_warn(decks: DeckFolder, table, key):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    path = decks.deck("d/PROMPT.md", MODEL + table)
    assert any(f"{key}: unknown key; it is ignored" in w for w in _warnings(path)), _warnings(path)


def test_a_misspelt_key_in_an_entry_gets_the_closest_key_like_a_top_level_one(
    decks: DeckFolder,
):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    table = '[[actions]]\nname = "a"\ndescripton = "d"\npath = "./child/PROMPT.md"\n'
    path = decks.deck("d/PROMPT.md", MODEL + 'lable = "x"\n' + table)
    warnings = _warnings(path)
    assert any(
        w.endswith("lable: unknown key; it is ignored (fix: did you mean 'label'?)")
        for w in warnings
    )
    assert any(
        w.endswith(
            "actions[1].descripton: unknown key; it is ignored (fix: did you mean 'description'?)"
        )
        for w in warnings
    ), warnings


@pytest.mark.parametrize("array", ["actionDecks", "testDecks", "graderDecks"])
def test_a_misspelt_key_in_a_legacy_array_entry_warns_too(decks: DeckFolder, array):
    decks.deck("d/child/PROMPT.md", MODEL + ACTION_SCHEMAS)
    table = f'[[{array}]]\nname = "a"\npath = "./child/PROMPT.md"\nlable = "x"\n'
    if array != "actionDecks":
        table = table.replace('name = "a"\n', "")
    warnings = _warnings(decks.deck("d/PROMPT.md", MODEL + table))
    assert any(
        w.endswith(f"{array}[1].lable: unknown key; it is ignored (fix: did you mean 'label'?)")
        for w in warnings
    ), warnings


def test_mcp_servers_in_a_snippet_fail_fast(decks: DeckFolder):
    decks.write("d/snip.md", '+++\n[[mcpServers]]\nname = "x"\n+++\nSnippet text.\n')
    path = decks.deck("d/PROMPT.md", MODEL, "![](./snip.md)")
    assert any(
        "[[mcpServers]] in a snippet's front matter is unsupported" in e for e in _errors(path)
    )


# ---- deep nesting gives a clear error, never a RecursionError --------------------------------


def _nested_schema(levels: int) -> str:
    return '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels


@pytest.mark.parametrize("levels", [100, 3000])
def test_a_schema_nested_too_deep_names_the_file_and_the_limit(decks: DeckFolder, levels):
    decks.write("d/deep.json", _nested_schema(levels))
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./deep.json"\n')
    (error,) = _errors(path)
    assert "deep.json" in error and "nested more than 128 levels deep" in error


def test_a_schema_60_levels_deep_loads(decks: DeckFolder):
    decks.write("d/deep.json", _nested_schema(60))
    path = decks.deck("d/PROMPT.md", MODEL + 'contextSchema = "./deep.json"\n')
    assert _errors(path) == []


def test_a_snippet_chain_500_deep_names_the_limit(decks: DeckFolder):
    for i in range(500):
        decks.write(f"d/s{i}.md", f"text {i}\n![](./s{i + 1}.md)\n" if i < 499 else "end\n")
    path = decks.deck("d/PROMPT.md", MODEL, "![](./s0.md)")
    (error,) = _errors(path)
    assert "snippets are embedded more than 32 levels deep" in error


def test_an_unknown_key_with_no_close_match_lists_the_deck_format_s_keys(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", MODEL + "zzqqxx = 1\n")
    (warning,) = [w for w in _warnings(path) if "zzqqxx" in w]
    assert warning.endswith(
        "zzqqxx: unknown key; it is ignored (fix: the deck format's keys are actions, allowEnd, "
        "contextSchema, graders, guardrails, handlers, label, modelParams, permissions, "
        "respond, responseSchema, scenarios, startMode, tools)"
    ), warning
