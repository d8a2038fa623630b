"""What a deck can make the loader do is bounded, and each bound is one error line naming the
file and the limit (docs/decks.md, "Bounds"): non-string keys, odd `$schema` values, YAML
aliases, embeds and `$ref`s that fan out, numbers past Python's digit limit, and compute
decks whose definition has fields of the wrong type.

These tests assert the outcome (the error, the expanded text), never how long a load takes:
the time budgets live in tests/fuzz, which `./dev fuzz` runs.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gambit.core import check_deck_tree, load_deck
from gambit.core._frontmatter import MAX_FRONT_MATTER_CHARS
from gambit.core._loader.embeds import MAX_EMBED_DEPTH, MAX_PROMPT_CHARS, find_embeds
from gambit.core._loader.schemas import MAX_ZOD_FILE_BYTES
from gambit.core._loader.values import MAX_SUGGESTIONS
from gambit.core._schema import MAX_SCHEMA_VALUES

from .conftest import ACTION_SCHEMAS, DeckFolder

# ---- keys YAML reads as something other than a string -----------------------------------------


@pytest.mark.parametrize(
    ("front", "key", "message", "line"),
    [
        ("1: x", None, "key 1 must be a string, not a number", 2),
        ("null: x", None, "key null must be a string, not null", 2),
        ("true: x", None, "key true must be a string, not a boolean", 2),
        ("2020-01-01: x", None, "key 2020-01-01 must be a string, not a date/time", 2),
        (
            "label: x\nmodelParams:\n  1: x",
            "modelParams",
            "key 1 must be a string, not a number",
            4,
        ),
        (
            "actions:\n  - name: a\n    1.5: x",
            "actions[1]",
            "key 1.5 must be a string, not a number",
            4,
        ),
        (
            "modelParams:\n  additionalParams:\n    [a]: x",
            "modelParams.additionalParams",
            "key [...] must be a string, not a list",
            4,
        ),
    ],
)
def test_a_yaml_key_that_is_not_a_string_is_one_error_naming_its_path(
    decks: DeckFolder, front: str, key: str | None, message: str, line: int
):
    path = decks.write("d.deck.md", f"---\n{front}\n---\nHi\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.key, error.message, error.line) == (str(path), key, message, line)
    assert error.hint is not None
    assert error.hint.startswith("quote the key") or "quoted string" in error.hint


def test_an_embedded_cards_non_string_key_is_an_error_in_the_card(decks: DeckFolder):
    card = decks.write("d/card.md", "---\nactions:\n  - true: 1\n---\ncard\n")
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", "", "![](./card.md)"))
    (error,) = diag.errors
    assert (error.file, error.key) == (str(card), "actions[1]")
    assert error.message == "key true must be a string, not a boolean"


# ---- YAML aliases --------------------------------------------------------------------------


def _laughs(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def test_yaml_aliases_are_refused_so_nine_to_the_ninth_is_one_error(decks: DeckFolder):
    path = decks.write("d.deck.md", f"---\n{_laughs(9)}\n---\nHi\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.file == str(path) and error.line == 3
    assert error.message == (
        "Failed to parse front matter: invalid YAML front matter: alias *a0: YAML aliases are "
        "not allowed in front matter"
    )
    assert error.hint == (
        "write the value of &a0 out in full where *a0 is, or move to TOML front matter "
        "between +++ lines"
    )


def test_a_recursive_yaml_alias_says_so(decks: DeckFolder):
    path = decks.write("d.deck.md", "---\nlabel: x\nextra: &loop [1, *loop]\n---\nHi\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.line == 3
    assert "recursive alias *loop (the value &loop contains itself)" in error.message
    assert "nested more than" not in error.message


def test_a_control_character_in_yaml_front_matter_is_an_error(decks: DeckFolder):
    # Found by the mutation fuzzer: PyYAML's reader refuses it before anything is parsed.
    _, diag = check_deck_tree(decks.write("d.deck.md", "---\nlabel: a\x00b\n---\nHi\n"))
    (error,) = diag.errors
    assert error.message.startswith("Failed to parse front matter: invalid YAML front matter: ")


def test_an_anchor_without_an_alias_still_loads(decks: DeckFolder):
    deck = load_deck(decks.write("d.deck.md", "---\nlabel: &name Greeter\n---\nHi\n"))
    assert deck.label == "Greeter"


# ---- files too large to parse -----------------------------------------------------------------


@pytest.mark.parametrize("opener", ["+++", "---"])
def test_front_matter_past_the_bound_is_one_error(decks: DeckFolder, opener: str):
    pair = "k{} = 1\n" if opener == "+++" else "k{}: 1\n"
    front = "".join(pair.format(i) for i in range(MAX_FRONT_MATTER_CHARS // 7))
    path = decks.write("d.deck.md", f"{opener}\n{front}{opener}\nHi\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.line) == (str(path), 2)
    assert error.message == (
        "Failed to parse front matter: the front matter is longer than 100,000 characters "
        "(the limit)"
    )


def test_only_the_first_unknown_keys_of_a_table_get_a_suggestion(decks: DeckFolder):
    # A "did you mean" costs difflib about 0.1 ms; front matter can hold 10,000 unknown keys.
    front = "".join(f"labl{i} = 1\n" for i in range(MAX_SUGGESTIONS + 10))
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", front))
    hints = [w.hint for w in diag.warnings]
    assert len(hints) == MAX_SUGGESTIONS + 10
    assert hints.count("did you mean 'label'?") == MAX_SUGGESTIONS


def test_a_zod_file_past_the_bound_is_one_error(decks: DeckFolder):
    # Found by the mutation fuzzer: a line of `![(` repeated into a 12 MB schema file.
    schema = decks.write("d/s.zod.ts", "![(" * (MAX_ZOD_FILE_BYTES // 3 + 1))
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", 'contextSchema = "./s.zod.ts"'))
    (error,) = diag.errors
    assert (error.file, error.message) == (
        str(schema),
        "the zod file is larger than 100,000 bytes (the limit)",
    )


# ---- numbers Python will not build -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("+++\nlabel = {n}\n+++\nHi\n", "TOML"),
        ("---\nlabel: {n}\n---\nHi\n", "YAML"),
        ('---json\n{{"label": {n}}}\n---\nHi\n', "JSON"),
    ],
)
def test_an_integer_past_pythons_digit_limit_is_an_error(decks: DeckFolder, text: str, fmt: str):
    path = decks.write("d.deck.md", text.format(n="7" * 5000))
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.file == str(path)
    assert error.message == (
        f"Failed to parse front matter: invalid {fmt} front matter: a number has more than "
        "4300 digits"
    )


def test_an_impossible_yaml_date_is_an_error(decks: DeckFolder):
    _, diag = check_deck_tree(decks.write("d.deck.md", "---\nlabel: 2020-13-45\n---\nHi\n"))
    (error,) = diag.errors
    assert error.message.startswith("Failed to parse front matter: invalid YAML front matter: ")


def test_a_json_schema_with_an_integer_past_the_digit_limit_is_an_error(decks: DeckFolder):
    schema = decks.write("d/s.json", '{"type": "integer", "maximum": ' + "7" * 5000 + "}")
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"'))
    (error,) = diag.errors
    assert (error.file, error.message) == (
        str(schema),
        "invalid JSON: a number has more than 4300 digits",
    )


# ---- numbers that are not finite ------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("temperature = nan", "must be a finite number, not nan"),
        ("top_p = inf", "must be a finite number, not inf"),
        ("max_tokens = 1.5", "must be a whole number, not 1.5"),
        ('temperature = "hot"', "must be a finite number, not a string"),
    ],
)
def test_a_number_that_is_not_one_says_what_it_is(decks: DeckFolder, setting: str, message: str):
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", f"[modelParams]\n{setting}"))
    (error,) = diag.errors
    assert (error.key, error.message) == (f"modelParams.{setting.split()[0]}", message)
    assert error.hint and error.hint.startswith(f"e.g. {setting.split()[0]} = ")


def test_a_number_below_its_minimum_gives_one_to_paste(decks: DeckFolder):
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", "[modelParams]\nmax_tokens = -3"))
    (error,) = diag.errors
    assert (error.message, error.hint) == ("must be at least 1, not -3", "e.g. max_tokens = 1")


def test_a_schema_file_that_is_not_json_names_the_key_and_the_deck_that_reads_it(
    decks: DeckFolder,
):
    schema = decks.write("d/s.json", '{"type": "object" "x": 1}')
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"'))
    (error,) = diag.errors
    assert (error.file, error.line, error.key) == (str(schema), 1, "contextSchema")
    assert error.message == "invalid JSON: Expecting ',' delimiter (column 19)"
    assert error.hint == "fix the JSON there; contextSchema of PROMPT.md reads this file"


def test_a_yaml_front_matter_error_asks_to_fix_the_yaml(decks: DeckFolder):
    path = decks.write("y/PROMPT.md", "---\nlabel: [x\n---\nhi\n")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.hint and error.hint.startswith("fix the YAML between the --- lines")


# ---- $schema, keys and size in schema files --------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"), [("[]", "an array"), ("5", "a number"), ("{}", "an object")]
)
def test_a_schema_whose_dollar_schema_is_not_a_string_is_one_error(
    decks: DeckFolder, value: str, kind: str
):
    schema = decks.write("d/s.json", f'{{"$schema": {value}, "type": "object"}}')
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"'))
    (error,) = diag.errors
    assert (error.file, error.message) == (
        str(schema),
        f"invalid JSON Schema: $schema must be a string (the URI of a JSON Schema draft), not "
        f"{kind} (at the schema root)",
    )


def _ref_fan_out(levels: int) -> dict:
    """Each definition uses the one before twice: 2**levels leaves once inlined."""
    defs: dict = {"d0": {"type": "string"}}
    for i in range(1, levels + 1):
        ref = {"$ref": f"#/$defs/d{i - 1}"}
        defs[f"d{i}"] = {"type": "object", "properties": {"a": ref, "b": dict(ref)}}
    return {"$defs": defs, "$ref": f"#/$defs/d{levels}"}


@pytest.mark.parametrize("levels", [20, 60])
def test_a_ref_fan_out_past_the_bound_is_one_error_naming_it(decks: DeckFolder, levels: int):
    schema = decks.write("d/s.json", json.dumps(_ref_fan_out(levels)))
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"'))
    (error,) = diag.errors
    assert (error.file, error.message) == (
        str(schema),
        f"invalid JSON Schema: the schema expands to more than {MAX_SCHEMA_VALUES:,} values "
        "once its $refs are inlined",
    )


def test_a_ref_fan_out_under_the_bound_still_inlines(decks: DeckFolder):
    decks.write("d/s.json", json.dumps(_ref_fan_out(6)))
    deck = load_deck(decks.deck("d/PROMPT.md", 'contextSchema = "./s.json"'))
    assert deck.context_schema is not None
    text = json.dumps(deck.context_schema.json)
    assert "$ref" not in text and text.count('"string"') == 2**6


def test_a_modules_schema_dict_shared_at_every_level_is_one_error(decks: DeckFolder):
    # 40 levels, each holding the one below twice: 2**40 values to walk, 80 levels deep
    # (under the depth limit), built in a few lines of Python.
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        schema = {"type": "string"}
        for _ in range(40):
            schema = {"type": "object", "properties": {"a": schema, "b": schema}}
        deck = gambit.define_deck(run=lambda ctx: "x", context_schema=schema)
        """,
    )
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.key) == (str(path.resolve()), "context_schema")
    assert (
        error.message
        == f"invalid JSON Schema: the schema has more than {MAX_SCHEMA_VALUES:,} values"
    )


def test_a_modules_schema_dict_with_a_key_that_is_not_a_string_is_an_error(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        """
        import gambit
        schema = {"type": "object", "properties": {1: {"type": "string"}}}
        deck = gambit.define_deck(run=lambda ctx: "x", context_schema=schema)
        """,
    )
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.key == "context_schema"
    assert error.message == (
        "invalid JSON Schema: key 1 must be a string, not a number (at schema location "
        "#/properties)"
    )


# ---- embeds --------------------------------------------------------------------------------


def _embed_fan_out(decks: DeckFolder, levels: int, text: str = "x") -> None:
    """s0.md embeds s1.md twice, s1.md embeds s2.md twice, ...: 2**levels copies of the leaf."""
    for i in range(levels):
        decks.write(f"d/s{i}.md", f"{i} ![](./s{i + 1}.md) ![](./s{i + 1}.md)\n")
    decks.write(f"d/s{levels}.md", f"{text}\n")


@pytest.mark.parametrize("levels", [22, 30])
def test_an_embed_fan_out_past_the_bound_is_one_error_naming_it(decks: DeckFolder, levels: int):
    _embed_fan_out(decks, levels, "leaf " * 10)
    path = decks.deck("d/PROMPT.md", "", "![](./s0.md)")
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.message == (
        f"the deck's prompt is longer than {MAX_PROMPT_CHARS:,} characters (the limit) once its "
        "snippets are embedded"
    )
    assert re.fullmatch(r"\./s\d+\.md", error.key.removeprefix("![](").removesuffix(")"))
    assert error.file.startswith(str(decks.root / "d"))


def test_an_embed_fan_out_under_the_bound_expands_every_copy_and_lists_each_file_once(
    decks: DeckFolder,
):
    _embed_fan_out(decks, 10, "LEAF")
    deck = load_deck(decks.deck("d/PROMPT.md", "", "![](./s0.md)"))
    assert deck.body.count("LEAF") == 2**10
    assert [p.rsplit("/", 1)[1] for p in deck.embeds] == [f"s{i}.md" for i in range(11)]


def test_a_card_embedded_twice_contributes_its_action_once(decks: DeckFolder):
    decks.deck("d/actions/a/PROMPT.md", ACTION_SCHEMAS)
    decks.write(
        "d/card.md",
        '+++\n[[actions]]\nname = "card_action"\npath = "./actions/a/PROMPT.md"\n+++\nCARD\n',
    )
    deck = load_deck(decks.deck("d/PROMPT.md", "", "![](./card.md) and ![again](./card.md)"))
    assert deck.body == "CARD and CARD"
    assert [a.name for a in deck.actions] == ["card_action"]
    assert len(deck.embeds) == 1


def test_a_snippet_reused_deeper_than_it_was_first_expanded_still_meets_the_depth_limit(
    decks: DeckFolder,
):
    # shared.md holds 5 levels of embeds. The deck embeds it directly (fine), then through a
    # chain that puts it past MAX_EMBED_DEPTH: that second use is an error though the
    # snippet's text was already expanded.
    for i in range(5):
        decks.write(f"d/shared{i}.md", f"S{i} ![](./shared{i + 1}.md)\n")
    decks.write("d/shared5.md", "END\n")
    chain = MAX_EMBED_DEPTH - 3
    for i in range(chain):
        decks.write(f"d/c{i}.md", f"C{i} ![](./c{i + 1}.md)\n")
    decks.write(f"d/c{chain}.md", "![](./shared0.md)\n")
    _, diag = check_deck_tree(decks.deck("d/PROMPT.md", "", "![](./shared0.md) ![](./c0.md)"))
    assert [e.message for e in diag.errors] == [
        f"snippets are embedded more than {MAX_EMBED_DEPTH} levels deep (through "
        f"{(decks.root / 'd' / 'shared0.md').resolve()})"
    ]


def test_a_plain_body_over_the_bound_is_an_error(decks: DeckFolder):
    path = decks.deck("d/PROMPT.md", "", "x" * (MAX_PROMPT_CHARS + 1))
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.key) == (str(path.resolve()), None)
    assert "longer than 1,000,000 characters" in error.message


@pytest.mark.parametrize("unit", ["![", "![(", "![a](", "![]("])
def test_many_unclosed_embeds_on_one_line_stay_text(decks: DeckFolder, unit: str):
    # 40,000 of these took the old embed regex 13-44 s (its budget is in tests/fuzz).
    body = unit * 40_000
    deck = load_deck(decks.deck("d/PROMPT.md", "", body))
    assert deck.body == body


EMBED_RE = re.compile(r"!\[([^\]\n]*)\]\(([^)\s]+)\)")  # the syntax find_embeds scans


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet="![]() \n\t\x85\xa0\u2028x.md#", max_size=60))
def test_the_embed_scanner_finds_what_the_embed_regex_finds(text: str):
    expected = [(m.start(), m.end(), m.group(2)) for m in EMBED_RE.finditer(text)]
    assert list(find_embeds(text)) == expected


# ---- compute decks built without define_deck -------------------------------------------------


@pytest.mark.parametrize(
    ("build", "key", "message"),
    [
        ("DeckDefinition(run=5)", "deck.run", "must be a function run(ctx), not 5"),
        ("DeckDefinition(run=run, label=b'x')", "deck.label", "must be a string, not bytes"),
        ("DeckDefinition(run=run, label=float('nan'))", "deck.label", "must be a string, not nan"),
        (
            "DeckDefinition(run=run, description=[1])",
            "deck.description",
            "must be a string, not list",
        ),
        ("DeckDefinition(run=run, kind='x')", "deck.kind", "must be \"gambit.deck\", not 'x'"),
    ],
)
def test_a_definition_built_directly_with_a_wrong_field_is_an_error_naming_it(
    decks: DeckFolder, build: str, key: str, message: str
):
    path = decks.write(
        "c/deck.py",
        f"from gambit import DeckDefinition\n\ndef run(ctx):\n    return 1\n\ndeck = {build}\n",
    )
    tree, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert (error.file, error.key, error.message) == (str(path.resolve()), key, message)
    assert tree is None


def test_define_deck_refuses_a_label_that_is_not_a_string(decks: DeckFolder):
    path = decks.write(
        "c/deck.py",
        "import gambit\n\ndeck = gambit.define_deck(run=lambda ctx: 1, label=float('inf'))\n",
    )
    _, diag = check_deck_tree(path)
    (error,) = diag.errors
    assert error.message == (
        "importing the module failed: TypeError: define_deck(label=...) must be a string, not inf"
    )
    assert error.line == 3
