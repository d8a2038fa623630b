"""Deck loading (docs/decks.md): front matter, snippets and cards, schemas, actions, tools,
permissions and names, and the deprecated TypeScript-era forms with their warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gambit.core import DeckError, DeckLoadError, check_deck_tree, load_deck, load_deck_tree

from .conftest import ACTION_SCHEMAS, GRADER_SCHEMAS, DeckFolder


def errors_of(path: Path, strict: bool = False) -> list[str]:
    _, diag = check_deck_tree(path, strict=strict)
    return [p.render() for p in diag.errors]


def warnings_of(path: Path, strict: bool = False) -> list[str]:
    _, diag = check_deck_tree(path, strict=strict)
    return [p.render() for p in diag.warnings]


# ---- front matter -----------------------------------------------------------------------------


def test_it_loads_toml_front_matter_and_body(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", 'label = "Hi"\nstartMode = "assistant"', "Say hi.")
    deck = load_deck(path)
    assert deck.label == "Hi"
    assert deck.start_mode == "assistant"
    assert deck.system_prompt == "Say hi."
    assert deck.path == str(path.resolve())


def test_it_loads_a_file_without_front_matter(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", "Just a prompt.\n\nWith two paragraphs.\n")
    deck = load_deck(path)
    assert deck.label is None
    assert deck.body == "Just a prompt.\n\nWith two paragraphs."


def test_it_reports_unterminated_front_matter_with_the_file(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", '+++\nlabel = "x"\n\nbody\n')
    with pytest.raises(DeckLoadError) as info:
        load_deck(path)
    assert "Failed to parse front matter" in str(info.value)
    assert info.value.file == str(path.resolve())
    assert "+++" in (info.value.hint or "")


def test_it_reports_invalid_toml_with_the_line(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", '+++\nlabel = "x"\nbroken = \n+++\nbody\n')
    with pytest.raises(DeckLoadError) as info:
        load_deck(path)
    assert info.value.line == 3
    assert "invalid TOML" in str(info.value)


def test_it_loads_legacy_yaml_front_matter_with_a_warning(decks: DeckFolder):
    path = decks.write("d/PROMPT.md", "---\nlabel: Legacy\n---\nBody\n")
    tree = load_deck_tree(path)
    assert tree.root.label == "Legacy"
    assert any("YAML front matter is deprecated" in w.message for w in tree.warnings)
    assert errors_of(path, strict=True)


def test_it_loads_a_legacy_deck_md_with_a_warning(decks: DeckFolder):
    path = decks.deck("legacy.deck.md", 'label = "old"')
    tree = load_deck_tree(path)
    assert tree.root.label == "old"
    assert any("*.deck.md" in w.message for w in tree.warnings)


def test_it_uses_a_deck_table_when_present(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", '[deck]\nlabel = "inner"')
    assert load_deck(path).label == "inner"


def test_it_warns_about_unknown_keys_with_a_suggestion(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "respnd = true")
    warnings = warnings_of(path)
    assert any("respnd" in w and "respond" in w for w in warnings)


def test_it_keeps_workloop_passthrough(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md", "[workloop]\ndefaultTools = false\n[workloop.tools]\nbrowser = true"
    )
    assert load_deck(path).passthrough["workloop"] == {
        "defaultTools": False,
        "tools": {"browser": True},
    }


def test_it_rejects_a_bad_start_mode_naming_the_key(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", 'startMode = "bot"')
    (error,) = errors_of(path)
    assert "startMode" in error and "assistant" in error


# ---- snippets and embeds ----------------------------------------------------------------------


def test_respond_snippet_sets_respond(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "", "Work.\n\n![](gambit://snippets/respond.md)")
    deck = load_deck(path)
    assert deck.respond is True
    assert "gambit_respond" in deck.body
    assert "![" not in deck.body


def test_end_snippet_sets_allow_end(decks: DeckFolder):
    deck = load_deck(decks.deck("d/PROMPT.md", "", "![](gambit://snippets/end.md)"))
    assert deck.allow_end is True
    assert "gambit_end" in deck.body


def test_scenario_participant_snippet(decks: DeckFolder):
    deck = load_deck(
        decks.deck("d/PROMPT.md", "", "![](gambit://snippets/scenario-participant.md)")
    )
    assert "synthetic scenario participant" in deck.body
    assert "exactly one empty message" in deck.body


def test_every_builtin_snippet_loads(decks: DeckFolder):
    for name in ("context", "init", "scenario-participant", "respond", "end"):
        deck = load_deck(decks.deck(f"{name}/PROMPT.md", "", f"![](gambit://snippets/{name}.md)"))
        assert len(deck.body) > 80, name


def test_generate_test_input_is_a_deprecated_alias_of_init(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "", "![](gambit://snippets/generate-test-input.md)")
    tree = load_deck_tree(path)
    init = load_deck(decks.deck("e/PROMPT.md", "", "![](gambit://snippets/init.md)"))
    assert tree.root.body == init.body
    assert any("deprecated" in w.message for w in tree.warnings)


def test_legacy_markers_set_flags_and_warn(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md", "", "![](gambit://init) ![](gambit://respond) ![](gambit://end)"
    )
    tree = load_deck_tree(path)
    deck = tree.root
    assert deck.respond and deck.allow_end
    for name in ("gambit_context", "gambit_respond", "gambit_end"):
        assert name in deck.body
    assert sum("deprecated" in w.message for w in tree.warnings) == 3
    assert len(errors_of(path, strict=True)) == 3


def test_legacy_cards_uri_resolves_to_snippet_with_warning(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "", "![](gambit://cards/respond.card.md)")
    tree = load_deck_tree(path)
    assert tree.root.respond
    assert any("gambit://cards/respond.card.md" in w.message for w in tree.warnings)


def test_unknown_builtin_snippet_lists_the_available_ones(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", "", "![](gambit://snippets/nope.md)"))
    assert "gambit://snippets/respond.md" in error


def test_local_snippets_inline_relative_to_the_embedding_file(decks: DeckFolder):
    decks.write(
        "d/cards/persona.card.md", "+++\nlabel = 'p'\n+++\nPERSONA TEXT ![](./nested/inner.md)\n"
    )
    decks.write("d/cards/nested/inner.md", "INNER TEXT\n")
    deck = load_deck(
        decks.deck("d/PROMPT.md", "", "intro\n\n![Persona](./cards/persona.card.md)\n\noutro")
    )
    assert deck.body.startswith("intro")
    assert "PERSONA TEXT INNER TEXT" in deck.body
    assert deck.body.endswith("outro")
    assert "![" not in deck.body
    assert len(deck.embeds) == 2


def test_embed_cycles_are_reported_with_the_chain(decks: DeckFolder):
    decks.write("d/a.md", "A ![](./b.md)\n")
    decks.write("d/b.md", "B ![](./a.md)\n")
    (error,) = errors_of(decks.deck("d/PROMPT.md", "", "![](./a.md)"))
    assert "cycle" in error
    assert "a.md -> " in error and "b.md -> " in error


def test_an_ordinary_image_stays_an_image(decks: DeckFolder):
    deck = load_deck(decks.deck("d/PROMPT.md", "", "Logo: ![logo](logo.png)"))
    assert deck.body == "Logo: ![logo](logo.png)"


def test_a_missing_local_snippet_names_the_target(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", "", "![](./missing.md)"))
    assert "missing.md" in error and "does not exist" in error


def test_card_actions_merge_with_deck_actions(decks: DeckFolder):
    decks.deck("d/actions/a/PROMPT.md", ACTION_SCHEMAS)
    decks.write(
        "d/cards/card.md",
        '+++\n[[actions]]\nname = "card_action"\npath = "../actions/a/PROMPT.md"\n+++\nCard ![](./nested.md)\n',
    )
    decks.write(
        "d/cards/nested.md",
        '+++\n[[actions]]\nname = "nested_action"\npath = "../actions/a/PROMPT.md"\n+++\nNested\n',
    )
    path = decks.deck(
        "d/PROMPT.md",
        '[[actions]]\nname = "deck_action"\ndescription = "d"\npath = "./actions/a/PROMPT.md"',
        "![](./cards/card.md)",
    )
    deck = load_deck(path)
    assert {a.name for a in deck.actions} == {"card_action", "deck_action", "nested_action"}
    assert len(deck.embeds) == 2


def test_legacy_action_decks_on_a_card_warn(decks: DeckFolder):
    decks.deck("d/actions/a/PROMPT.md", ACTION_SCHEMAS)
    decks.write(
        "d/old.card.md",
        '+++\n[[actionDecks]]\nname = "x"\npath = "./actions/a/PROMPT.md"\n+++\nold\n',
    )
    path = decks.deck("d/PROMPT.md", "", "![](./old.card.md)")
    tree = load_deck_tree(path)
    assert len(tree.root.actions) == 1
    assert any(
        'deprecated "actionDecks"' in w.message and "[[actions]]" in (w.hint or "")
        for w in tree.warnings
    )


def test_card_schema_fragments_merge_with_deck_winning(decks: DeckFolder):
    decks.write(
        "d/in.json", json.dumps({"type": "object", "properties": {"text": {"type": "string"}}})
    )
    decks.write(
        "d/out.json", json.dumps({"type": "object", "properties": {"result": {"type": "string"}}})
    )
    decks.write(
        "d/extra.json", json.dumps({"type": "object", "properties": {"extra": {"type": "string"}}})
    )
    decks.write(
        "d/note.json", json.dumps({"type": "object", "properties": {"note": {"type": "string"}}})
    )
    decks.write(
        "d/card.md",
        '+++\ncontextFragment = "./extra.json"\nresponseFragment = "./note.json"\n+++\ncard\n',
    )
    deck = load_deck(
        decks.deck(
            "d/PROMPT.md",
            'contextSchema = "./in.json"\nresponseSchema = "./out.json"',
            "![](./card.md)",
        )
    )
    assert sorted(deck.context_schema.field_names()) == ["extra", "text"]
    assert sorted(deck.response_schema.field_names()) == ["note", "result"]


def test_cards_cannot_declare_handlers(decks: DeckFolder):
    decks.write("d/card.md", '+++\n[handlers.onError]\npath = "./x/PROMPT.md"\n+++\ncard\n')
    (error,) = errors_of(decks.deck("d/PROMPT.md", "", "![](./card.md)"))
    assert "handlers" in error


# ---- schemas ----------------------------------------------------------------------------------


def test_builtin_respond_schema_as_context(decks: DeckFolder):
    deck = load_deck(
        decks.deck("d/PROMPT.md", 'contextSchema = "gambit://schemas/graders/respond.zod.ts"')
    )
    assert deck.context_schema.validate({"status": 200}) == {"status": 200}


def test_legacy_contexts_uri_resolves(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md", 'contextSchema = "gambit://schemas/contexts/conversation.zod.ts"'
    )
    tree = load_deck_tree(path)
    value = {"session": {"messages": [{"role": "user", "content": "hello"}]}}
    assert tree.root.context_schema.validate(value) == value
    assert any("deprecated" in w.message for w in tree.warnings)


def test_legacy_ts_schema_uri_warns(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", 'contextSchema = "gambit://schemas/graders/respond.ts"')
    tree = load_deck_tree(path)
    assert tree.root.context_schema is not None
    assert any("deprecated" in w.message and ".ts" in w.message for w in tree.warnings)
    assert errors_of(path, strict=True)


def test_legacy_input_output_schema_keys_warn(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md",
        'inputSchema = "gambit://schemas/graders/respond.zod.ts"\noutputSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"',
    )
    tree = load_deck_tree(path)
    assert tree.root.context_schema is not None and tree.root.response_schema is not None
    messages = [w.message for w in tree.warnings]
    assert 'deprecated "inputSchema"' in messages and 'deprecated "outputSchema"' in messages


def test_json_python_and_zod_schema_files(decks: DeckFolder):
    decks.write(
        "d/in.json",
        json.dumps({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    )
    decks.write(
        "d/out.py",
        "from pydantic import BaseModel\n\nclass Out(BaseModel):\n    answer: str\n\nschema = Out\n",
    )
    decks.write(
        "d/tool.zod.ts",
        'import { z } from "zod";\nexport default z.object({ query: z.string() });\n',
    )
    path = decks.deck(
        "d/PROMPT.md",
        'contextSchema = "./in.json"\nresponseSchema = "./out.py"\n[[tools]]\nname = "search"\ninputSchema = "./tool.zod.ts"',
    )
    deck = load_deck(path)
    assert deck.context_schema.required_fields() == ["q"]
    assert deck.response_schema.validate({"answer": "a", "extra": 1}) == {"answer": "a"}
    assert deck.tools[0].input_schema.validate({"query": "q"}) == {"query": "q"}


def test_an_unsupported_zod_construct_names_file_and_line(decks: DeckFolder):
    schema = decks.write(
        "d/bad.zod.ts",
        'import { z } from "zod";\n\nexport default z.string().refine((s) => s.length > 2);\n',
    )
    with pytest.raises(DeckLoadError) as info:
        load_deck(decks.deck("d/PROMPT.md", 'contextSchema = "./bad.zod.ts"'))
    assert info.value.file == str(schema.resolve())
    assert info.value.line == 3
    assert "refine" in str(info.value)


def test_a_missing_schema_file_names_the_key(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", 'responseSchema = "./nope.json"'))
    assert "responseSchema" in error and "nope.json" in error


def test_a_non_string_schema_is_an_error(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", "contextSchema = 3"))
    assert "contextSchema" in error and "string" in error


# ---- modelParams, guardrails, permissions, handlers --------------------------------------------


def test_model_params_are_validated_and_supported_keys_win(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md",
        """
        [modelParams]
        model = ["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]
        temperature = 0.2
        max_tokens = 300
        reasoning = { effort = "high", summary = "detailed" }
        [modelParams.additionalParams]
        temperature = 0.9
        verbosity = "low"
        """,
    )
    tree = load_deck_tree(path)
    params = tree.root.model_params
    assert params.models == ["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]
    assert params.provider_params() == {
        "temperature": 0.2,
        "verbosity": "low",
        "max_tokens": 300,
        "reasoning": {"effort": "high", "summary": "detailed"},
    }
    assert any("temperature" in (w.key or "") for w in tree.warnings)


def test_reasoning_effort_and_summary_are_validated(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md", '[modelParams]\nreasoning = { effort = "max", summary = "long" }'
    )
    errors = errors_of(path)
    assert len(errors) == 2
    assert any("modelParams.reasoning.effort" in e and "xhigh" in e for e in errors)
    assert any("modelParams.reasoning.summary" in e and "concise" in e for e in errors)


def test_additional_params_must_be_json_serialisable(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "[modelParams.additionalParams]\nwhen = 1979-05-27T07:32:00Z")
    (error,) = errors_of(path)
    assert "modelParams.additionalParams.when" in error and "JSON" in error


def test_unsupported_model_param_warns_with_a_fix(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", '[modelParams]\nverbosity = "high"')
    tree = load_deck_tree(path)
    assert "verbosity" not in tree.root.model_params.provider_params()
    assert any("additionalParams" in (w.hint or "") for w in tree.warnings)


def test_model_must_be_a_string_or_list(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", "[modelParams]\nmodel = 3"))
    assert "modelParams.model" in error


def test_guardrails(decks: DeckFolder):
    deck = load_deck(
        decks.deck("d/PROMPT.md", "[guardrails]\nmaxDepth = 2\nmaxPasses = 4\ntimeoutMs = 0")
    )
    assert (deck.guardrails.max_depth, deck.guardrails.max_passes, deck.guardrails.timeout_ms) == (
        2,
        4,
        0,
    )
    (error,) = errors_of(decks.deck("e/PROMPT.md", '[guardrails]\nmaxPasses = "ten"'))
    assert "guardrails.maxPasses" in error


def test_permissions_resolve_from_the_declaring_file(decks: DeckFolder):
    decks.deck("root/actions/a/PROMPT.md", ACTION_SCHEMAS)
    path = decks.deck(
        "root/PROMPT.md",
        """
        [permissions]
        read = ["../shared/prompts", "./cards"]
        run = { paths = ["./bin/tool.sh"], commands = ["deno"] }
        [[actions]]
        name = "a"
        description = "a"
        path = "./actions/a/PROMPT.md"
        permissions = { read = ["./action-overrides"] }
        """,
    )
    deck = load_deck(path)
    base = path.parent.resolve()
    assert deck.permissions.read == sorted(
        [str(base / "cards"), str(base.parent / "shared/prompts")]
    )
    assert deck.permissions.run == {"paths": [str(base / "bin/tool.sh")], "commands": ["deno"]}
    assert (
        deck.permissions.write is False
        and deck.permissions.net is False
        and deck.permissions.env is False
    )
    assert deck.actions[0].permissions.read == [str(base / "action-overrides")]


def test_permission_shape_errors(decks: DeckFolder):
    errors = errors_of(
        decks.deck("d/PROMPT.md", '[permissions]\nread = "yes"\nrun = { paths = true }')
    )
    assert any("permissions.read must be boolean or array" in e for e in errors)
    assert any("permissions.run.paths must be an array in object form" in e for e in errors)


def test_handlers(decks: DeckFolder):
    decks.deck("d/handlers/busy/PROMPT.md", ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        '[handlers.onInterval]\npath = "./handlers/busy/PROMPT.md"\nintervalMs = 500\n[handlers.onError]\npath = "./handlers/busy/PROMPT.md"',
    )
    tree = load_deck_tree(path)
    busy = tree.root.handlers["onBusy"]
    assert busy.repeat_ms == 500 and busy.path.endswith("busy/PROMPT.md")
    assert "onError" in tree.root.handlers
    assert sum("deprecated" in w.message for w in tree.warnings) == 2


# ---- actions ----------------------------------------------------------------------------------


def test_actions_scenarios_graders_resolve_to_absolute_paths(decks: DeckFolder):
    decks.deck(
        "d/x/PROMPT.md",
        ACTION_SCHEMAS
        + GRADER_SCHEMAS.replace("contextSchema", "#").replace("responseSchema", "#"),
    )
    decks.deck("d/s/PROMPT.md", ACTION_SCHEMAS)
    decks.deck("d/g/PROMPT.md", GRADER_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        """
        [[actions]]
        name = "x"
        description = "does x"
        path = "./x/PROMPT.md"
        [[scenarios]]
        path = "./s/PROMPT.md"
        [[graders]]
        path = "./g/PROMPT.md"
        """,
    )
    tree = load_deck_tree(path)
    deck = tree.root
    assert deck.actions[0].path == str((path.parent / "x/PROMPT.md").resolve())
    assert deck.scenarios[0].path.endswith("s/PROMPT.md")
    assert deck.graders[0].path.endswith("g/PROMPT.md")
    assert [e.role for e in tree.entries] == ["root", "action", "scenario", "grader"]
    assert deck.actions[0].context_schema is not None


def test_action_requires_description(decks: DeckFolder):
    decks.deck("d/x/PROMPT.md", ACTION_SCHEMAS)
    (error,) = errors_of(
        decks.deck("d/PROMPT.md", '[[actions]]\nname = "x"\npath = "./x/PROMPT.md"')
    )
    assert "description" in error and "actions[x]" in error


def test_top_level_execute_is_rejected(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", 'execute = "./compute.deck.ts"'))
    assert "Top-level execute" in error


@pytest.mark.parametrize(
    "entry",
    ['path = "./x/PROMPT.md"\nexecute = "./x.py"', ""],
    ids=["both", "neither"],
)
def test_action_needs_exactly_one_target(decks: DeckFolder, entry: str):
    decks.deck("d/x/PROMPT.md", ACTION_SCHEMAS)
    decks.write("d/x.py", "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'ok')\n")
    errors = errors_of(
        decks.deck("d/PROMPT.md", f'[[actions]]\nname = "x"\ndescription = "d"\n{entry}')
    )
    assert any("exactly one of path or execute" in e for e in errors)


COMPUTE_MODULE = """
import gambit
from pydantic import BaseModel

class In(BaseModel):
    count: float

class Out(BaseModel):
    total: float

def run(ctx):
    return {"total": ctx.input["count"] + 1}

deck = gambit.define_deck(run=run, context_schema=In, response_schema=Out)
"""


def test_execute_action_takes_schemas_from_the_module(decks: DeckFolder):
    module = decks.write("d/compute.py", COMPUTE_MODULE)
    deck = load_deck(
        decks.deck(
            "d/PROMPT.md",
            '[[actions]]\nname = "rollup"\ndescription = "d"\nexecute = "./compute.py"',
        )
    )
    action = deck.actions[0]
    assert action.execute == str(module.resolve())
    assert action.context_schema.validate({"count": 2}) == {"count": 2}
    assert action.response_schema.required_fields() == ["total"]


def test_execute_action_inline_schemas_must_match_the_module(decks: DeckFolder):
    decks.write("d/compute.py", COMPUTE_MODULE)
    decks.write(
        "d/in.json",
        json.dumps(
            {"type": "object", "properties": {"count": {"type": "string"}}, "required": ["count"]}
        ),
    )
    errors = errors_of(
        decks.deck(
            "d/PROMPT.md",
            '[[actions]]\nname = "rollup"\ndescription = "d"\nexecute = "./compute.py"\ncontextSchema = "./in.json"',
        )
    )
    assert len(errors) == 1 and "count" in errors[0] and "contextSchema" in errors[0]


def test_execute_action_with_inline_schemas_only(decks: DeckFolder):
    decks.write(
        "d/compute.py", "import gambit\ndeck = gambit.define_deck(run=lambda ctx: ctx.input)\n"
    )
    deck = load_deck(
        decks.deck(
            "d/PROMPT.md",
            '[[actions]]\nname = "echo"\ndescription = "d"\nexecute = "./compute.py"'
            + ACTION_SCHEMAS,
        )
    )
    assert deck.actions[0].response_schema.is_string


def test_execute_action_needs_some_schema_declaration(decks: DeckFolder):
    decks.write("d/compute.py", "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 1)\n")
    errors = errors_of(
        decks.deck(
            "d/PROMPT.md", '[[actions]]\nname = "x"\ndescription = "d"\nexecute = "./compute.py"'
        )
    )
    assert len(errors) == 2
    assert all(
        "Action execute target must include contextSchema and responseSchema" in e for e in errors
    )


def test_typescript_execute_target_says_to_port_it(decks: DeckFolder):
    decks.write("d/compute.deck.ts", "export default {}\n")
    (error,) = errors_of(
        decks.deck(
            "d/PROMPT.md",
            '[[actions]]\nname = "x"\ndescription = "d"\nexecute = "./compute.deck.ts"',
        )
    )
    assert "compute.deck.ts" in error and "port it to Python" in error


def test_mcp_servers_fail_fast(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", '[[mcpServers]]\nname = "x"'))
    assert "[[mcpServers]]" in error


def test_tools_and_shadowing(decks: DeckFolder):
    decks.deck("d/x/PROMPT.md", ACTION_SCHEMAS)
    decks.write(
        "d/q.json", json.dumps({"type": "object", "properties": {"query": {"type": "string"}}})
    )
    path = decks.deck(
        "d/PROMPT.md",
        """
        [[actions]]
        name = "search_docs"
        description = "d"
        path = "./x/PROMPT.md"
        [[tools]]
        name = "search_docs"
        inputSchema = "./q.json"
        [[tools]]
        name = "external_lookup"
        """,
    )
    tree = load_deck_tree(path)
    assert [t.name for t in tree.root.tools] == ["search_docs", "external_lookup"]
    assert [t.name for t in tree.root.effective_tools] == ["external_lookup"]
    assert tree.root.tools[0].input_schema.validate({"query": "q"}) == {"query": "q"}
    assert any("shadowed" in w.message and "search_docs" in w.message for w in tree.warnings)


def test_names_are_validated(decks: DeckFolder):
    decks.deck("d/x/PROMPT.md", ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        f"""
        [[actions]]
        name = "gambit_foo"
        description = "d"
        path = "./x/PROMPT.md"
        [[actions]]
        name = "1bad"
        description = "d"
        path = "./x/PROMPT.md"
        [[actions]]
        name = "{"a" * 65}"
        description = "d"
        path = "./x/PROMPT.md"
        [[tools]]
        name = "gambit_tool"
        [[tools]]
        name = "dup"
        [[tools]]
        name = "dup"
        """,
    )
    errors = errors_of(path)
    assert any("Action name gambit_foo is reserved" in e for e in errors)
    assert any("Action name 1bad must match" in e for e in errors)
    assert any("<= 64 characters" in e and "a" * 65 in e for e in errors)
    assert any("External tool name gambit_tool is reserved (prefix gambit_)" in e for e in errors)
    assert any("duplicate tool name" in e for e in errors)


def test_legacy_arrays_warn_and_dedupe(decks: DeckFolder):
    decks.deck("d/s/PROMPT.md", ACTION_SCHEMAS)
    path = decks.deck(
        "d/PROMPT.md",
        '[[scenarios]]\npath = "./s/PROMPT.md"\nlabel = "first"\n[[testDecks]]\npath = "./s/PROMPT.md"\nlabel = "second"',
    )
    tree = load_deck_tree(path)
    assert [s.label for s in tree.root.scenarios] == ["first"]
    assert any('deprecated "testDecks"' in w.message for w in tree.warnings)


def test_a_folder_path_is_an_error_with_a_hint(decks: DeckFolder):
    decks.deck("d/x/PROMPT.md", ACTION_SCHEMAS)
    (error,) = errors_of(
        decks.deck("d/PROMPT.md", '[[actions]]\nname = "x"\ndescription = "d"\npath = "./x"')
    )
    assert "is a folder" in error and "./x/PROMPT.md" in error


def test_a_legacy_deck_md_path_warns(decks: DeckFolder):
    decks.deck("d/x.deck.md", ACTION_SCHEMAS)
    tree = load_deck_tree(
        decks.deck(
            "d/PROMPT.md", '[[actions]]\nname = "x"\ndescription = "d"\npath = "./x.deck.md"'
        )
    )
    assert tree.root.actions[0].path.endswith("x.deck.md")
    assert any("*.deck.md" in w.message for w in tree.warnings)


def test_a_missing_referenced_deck_names_the_declaring_file_and_key(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", '[[graders]]\npath = "./g/PROMPT.md"')
    (error,) = errors_of(path)
    assert str(path.resolve()) in error and "graders[1].path" in error


# ---- roles ------------------------------------------------------------------------------------


def test_action_decks_must_declare_both_schemas(decks: DeckFolder):
    child = decks.deck("d/x/PROMPT.md", "")
    errors = errors_of(
        decks.deck(
            "d/PROMPT.md", '[[actions]]\nname = "x"\ndescription = "d"\npath = "./x/PROMPT.md"'
        )
    )
    assert len(errors) == 2
    assert all(str(child.resolve()) in e for e in errors)


def test_scenario_without_schemas_warns_and_gets_plain_chat(decks: DeckFolder):
    decks.deck("d/s/PROMPT.md", "")
    path = decks.deck("d/PROMPT.md", '[[scenarios]]\npath = "./s/PROMPT.md"')
    tree = load_deck_tree(path)
    scenario = tree.decks[str((path.parent / "s/PROMPT.md").resolve())]
    assert scenario.response_schema.is_string and scenario.context_schema.is_optional
    assert any("scenario deck declares no" in w.message for w in tree.warnings)
    assert errors_of(path, strict=True)


def test_grader_must_be_compatible_with_builtin_schemas(decks: DeckFolder):
    decks.write(
        "d/g/out.zod.ts",
        'import { z } from "zod";\nexport default z.object({ score: z.string(), reason: z.string(), extra: z.number() });\n',
    )
    decks.deck(
        "d/g/PROMPT.md",
        'contextSchema = "gambit://schemas/graders/contexts/turn.zod.ts"\nresponseSchema = "./out.zod.ts"',
    )
    errors = errors_of(decks.deck("d/PROMPT.md", '[[graders]]\npath = "./g/PROMPT.md"'))
    assert any("responseSchema" in e and "score" in e for e in errors)
    assert any("responseSchema" in e and "extra" in e for e in errors)


def test_grader_with_optional_extension_is_compatible(decks: DeckFolder):
    decks.write(
        "d/g/out.zod.ts",
        'import { z } from "zod";\nexport default z.object({ score: z.number().int().min(-3).max(3), reason: z.string(), evidence: z.array(z.string()).optional(), confidence: z.number().optional() });\n',
    )
    decks.deck(
        "d/g/PROMPT.md",
        'contextSchema = "gambit://schemas/graders/contexts/turn.zod.ts"\nresponseSchema = "./out.zod.ts"',
    )
    path = decks.deck("d/PROMPT.md", '[[graders]]\npath = "./g/PROMPT.md"')
    assert errors_of(path) == []


def test_every_error_is_reported_at_once(decks: DeckFolder):
    path = decks.deck(
        "d/PROMPT.md",
        'startMode = "x"\n[modelParams]\nmodel = 3\n[guardrails]\nmaxDepth = "deep"\n[[actions]]\nname = "a"',
    )
    assert len(errors_of(path)) >= 4


# ---- compute decks ----------------------------------------------------------------------------


def test_a_python_compute_deck_loads(decks: DeckFolder):
    path = decks.write(
        "hello/deck.py",
        "import gambit\ndeck = gambit.define_deck(run=lambda ctx: 'hi', label='Hello')\n",
    )
    deck = load_deck(path)
    assert deck.kind == "compute" and deck.label == "Hello" and deck.definition.run(None) == "hi"


def test_module_level_run_without_deck_is_rejected(decks: DeckFolder):
    path = decks.write("d/deck.py", "def run(ctx):\n    return 1\n")
    (error,) = errors_of(path)
    assert "module level" in error and "define_deck" in error


def test_a_module_that_raises_names_the_line(decks: DeckFolder):
    path = decks.write("d/deck.py", "import gambit\n\nraise RuntimeError('boom')\n")
    with pytest.raises(DeckError) as info:
        load_deck(path)
    assert info.value.line == 3 and "boom" in str(info.value)


def test_a_folder_loads_its_prompt(decks: DeckFolder):
    decks.deck("d/PROMPT.md", 'label = "folder"')
    assert load_deck(decks.root / "d").label == "folder"


def test_a_path_with_a_nul_character_is_an_error(decks: DeckFolder):
    (error,) = errors_of(decks.deck("d/PROMPT.md", 'contextSchema = "bad\\u0000.json"'))
    assert "NUL" in error and "contextSchema" in error
