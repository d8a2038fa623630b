"""The static Zod → JSON Schema translator (`gambit/core/_zod/`; docs/decks.md, "Zod files")."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from gambit.core import DeckError, GambitError
from gambit.core._zod import (
    MAX_NESTING,
    ZodTranslationError,
    translate_zod_file,
    translate_zod_source,
)

IMPORT = 'import { z } from "zod";\n'
FILE = "schemas/input.zod.ts"


def tr(source: str, file: str = FILE) -> dict:
    return translate_zod_source(source, file=file)


def default(expression: str, prelude: str = "") -> dict:
    """Translate `export default <expression>` (after the zod import and `prelude`)."""
    return tr(IMPORT + prelude + f"export default {expression};\n")


def error_of(source: str, file: str = FILE) -> ZodTranslationError:
    with pytest.raises(ZodTranslationError) as info:
        translate_zod_source(source, file=file)
    return info.value


STRING = {"type": "string"}
NUMBER = {"type": "number"}


def obj(properties: dict, required: list[str] | None = None, extra: object = False) -> dict:
    out: dict = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra
    return out


# ---- the documented example ------------------------------------------------------------------

EXAMPLE = """\
import { z } from "zod";            // also "npm:zod"
export default z.object({
  name: z.string().describe("Customer name"),
  age: z.number().int().min(0).max(150).optional(),
  tier: z.enum(["free", "pro"]).default("free"),
  tags: z.array(z.string()).min(1),
  kind: z.literal("x"),
  meta: z.record(z.string(), z.unknown()).optional(),   // also z.record(valueSchema)
  either: z.union([z.string(), z.number()]),
  maybe: z.string().nullable(),
  flag: z.boolean(),
  nested: z.object({ a: z.string() }).strict(),           // .passthrough() too
}).describe("Input");
"""


def test_it_translates_the_documented_example():
    assert tr(EXAMPLE) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Customer name"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tier": {"type": "string", "enum": ["free", "pro"], "default": "free"},
            "tags": {"type": "array", "items": STRING, "minItems": 1},
            "kind": {"type": "string", "const": "x"},
            "meta": {"type": "object", "additionalProperties": {}},
            "either": {"anyOf": [STRING, NUMBER]},
            "maybe": {"anyOf": [STRING, {"type": "null"}]},
            "flag": {"type": "boolean"},
            "nested": obj({"a": STRING}, ["a"]),
        },
        "required": ["name", "tags", "kind", "either", "maybe", "flag", "nested"],
        "additionalProperties": False,
        "description": "Input",
    }


def test_it_produces_a_valid_draft_2020_12_schema_that_validates_like_zod():
    schema = tr(EXAMPLE)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    good = {
        "name": "Ada",
        "tags": ["a"],
        "kind": "x",
        "either": 3,
        "maybe": None,
        "flag": True,
        "nested": {"a": "b"},
    }
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "tags": []})
    assert not validator.is_valid({**good, "age": 1.5})
    assert not validator.is_valid({**good, "tier": "gold"})
    assert not validator.is_valid({k: v for k, v in good.items() if k != "name"})


def test_it_resolves_constants_and_exports_used_by_other_schemas():
    source = IMPORT + (
        "const Item = z.object({ id: z.string() });\n"
        "export const Other = z.string();\n"
        "const Schema = z.object({ items: z.array(Item), other: Other.optional() });\n"
        "export default Schema;\n"
    )
    assert tr(source) == obj(
        {"items": {"type": "array", "items": obj({"id": STRING}, ["id"])}, "other": STRING},
        ["items"],
    )


def test_it_inlines_a_shared_schema_each_time_it_is_used_without_aliasing():
    out = default("z.object({ a: Item, b: Item })", "const Item = z.object({ id: z.string() });\n")
    assert out["properties"]["a"] == out["properties"]["b"]
    assert out["properties"]["a"] is not out["properties"]["b"]
    assert "$ref" not in json.dumps(out)


# ---- imports ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "import_line",
    [
        'import { z } from "zod";',
        "import { z } from 'zod'",
        'import { z } from "npm:zod";',
        'import { z } from "npm:zod@3";',
        'import { z } from "npm:zod@^3.23.8";',
        'import { z } from "jsr:@zod/zod";',
        'import { z } from "jsr:@zod/zod@^4.0.0";',
        'import { z } from "zod/v4";',
        'import { z } from "zod/v3";',
        'import * as z from "zod";',
        'import z from "zod";',
        'import { z, type ZodType } from "zod";',
        'import { type ZodTypeAny, z } from "npm:zod";',
        'import { z } from "https://deno.land/x/zod@v3.22.4/mod.ts";',
        'import type { Something } from "./types.ts";\nimport { z } from "zod";',
    ],
)
def test_it_accepts_every_spelling_of_the_zod_import(import_line: str):
    assert tr(import_line + "\nexport default z.string();\n") == STRING


def test_it_follows_an_aliased_namespace_and_named_factories():
    assert tr('import { z as zod } from "zod";\nexport default zod.number();') == NUMBER
    source = 'import { object, string as str } from "zod";\nexport default object({ a: str() });'
    assert tr(source) == obj({"a": STRING}, ["a"])


def test_it_requires_zod_to_be_imported():
    error = error_of("export default z.string();\n")
    assert error.line == 1 and error.construct == "z"
    assert 'import { z } from "zod"' in error.message


# ---- constructs -----------------------------------------------------------------------------

CASES = [
    # primitives
    ("z.string()", STRING),
    ("z.number()", NUMBER),
    ("z.int()", {"type": "integer"}),
    ("z.number().int()", {"type": "integer"}),
    ("z.boolean()", {"type": "boolean"}),
    ("z.null()", {"type": "null"}),
    ("z.any()", {}),
    ("z.unknown()", {}),
    ('z.string({ description: "d" })', {"type": "string", "description": "d"}),
    ('z.string({ required_error: "needed" })', STRING),
    # string checks
    ("z.string().min(2).max(5)", {"type": "string", "minLength": 2, "maxLength": 5}),
    ("z.string().length(3)", {"type": "string", "minLength": 3, "maxLength": 3}),
    ("z.string().nonempty()", {"type": "string", "minLength": 1}),
    ("z.string().min(3).nonempty()", {"type": "string", "minLength": 3}),
    ('z.string().min(1, "Required")', {"type": "string", "minLength": 1}),
    ('z.string().min(1, { message: "Required" })', {"type": "string", "minLength": 1}),
    ("z.string().email()", {"type": "string", "format": "email"}),
    ("z.string().url()", {"type": "string", "format": "uri"}),
    ("z.string().uuid()", {"type": "string", "format": "uuid"}),
    ("z.string().datetime()", {"type": "string", "format": "date-time"}),
    ("z.string().datetime({ offset: true })", {"type": "string", "format": "date-time"}),
    ("z.string().date()", {"type": "string", "format": "date"}),
    ("z.string().time()", {"type": "string", "format": "time"}),
    ("z.email()", {"type": "string", "format": "email"}),
    ("z.url()", {"type": "string", "format": "uri"}),
    ("z.uuid()", {"type": "string", "format": "uuid"}),
    ("z.iso.datetime()", {"type": "string", "format": "date-time"}),
    ("z.string().trim()", STRING),
    ("z.string().trim().min(1)", {"type": "string", "minLength": 1}),
    ("z.string().regex(/^[a-z]+$/)", {"type": "string", "pattern": "^[a-z]+$"}),
    (r"z.string().regex(/^a\/b[/]$/u)", {"type": "string", "pattern": r"^a\/b[/]$"}),
    (
        "z.string().regex(/a/).regex(/b/)",
        {"type": "string", "pattern": "a", "allOf": [{"pattern": "b"}]},
    ),
    # number checks
    ("z.number().min(0).max(1.5)", {"type": "number", "minimum": 0, "maximum": 1.5}),
    ("z.number().min(-3)", {"type": "number", "minimum": -3}),
    ("z.number().positive()", {"type": "number", "exclusiveMinimum": 0}),
    ("z.number().nonnegative()", {"type": "number", "minimum": 0}),
    ("z.number().negative()", {"type": "number", "exclusiveMaximum": 0}),
    ("z.number().nonpositive()", {"type": "number", "maximum": 0}),
    ("z.number().gt(1).lt(9)", {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 9}),
    ("z.number().gte(1).lte(9)", {"type": "number", "minimum": 1, "maximum": 9}),
    ("z.number().multipleOf(5)", {"type": "number", "multipleOf": 5}),
    ("z.number().step(0.5)", {"type": "number", "multipleOf": 0.5}),
    ("z.number().finite()", NUMBER),
    ("z.number().min(1).min(3).max(9).max(7)", {"type": "number", "minimum": 3, "maximum": 7}),
    ("z.number().max(1_000)", {"type": "number", "maximum": 1000}),
    ("z.number().max(0x10)", {"type": "number", "maximum": 16}),
    ("z.int().min(1e3)", {"type": "integer", "minimum": 1000}),
    # enums and literals
    ('z.enum(["a", "b"])', {"type": "string", "enum": ["a", "b"]}),
    ('z.enum(["a", "b", "c"]).extract(["a", "c"])', {"type": "string", "enum": ["a", "c"]}),
    ('z.enum(["a", "b", "c"]).exclude(["a"])', {"type": "string", "enum": ["b", "c"]}),
    ('z.literal("x")', {"type": "string", "const": "x"}),
    ("z.literal(3)", {"type": "integer", "const": 3}),
    ("z.literal(-1.5)", {"type": "number", "const": -1.5}),
    ("z.literal(true)", {"type": "boolean", "const": True}),
    ("z.literal(null)", {"type": "null", "const": None}),
    ('z.literal(["a", "b"])', {"type": "string", "enum": ["a", "b"]}),
    ('z.literal(["a", 1])', {"enum": ["a", 1]}),
    # arrays and tuples
    ("z.array(z.string())", {"type": "array", "items": STRING}),
    ("z.string().array()", {"type": "array", "items": STRING}),
    (
        "z.array(z.number()).min(1).max(3)",
        {"type": "array", "items": NUMBER, "minItems": 1, "maxItems": 3},
    ),
    (
        "z.array(z.number()).length(2)",
        {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2},
    ),
    ("z.array(z.number()).nonempty()", {"type": "array", "items": NUMBER, "minItems": 1}),
    (
        "z.tuple([z.string(), z.number()])",
        {"type": "array", "prefixItems": [STRING, NUMBER], "minItems": 2, "maxItems": 2},
    ),
    (
        "z.tuple([z.string(), z.number().optional()])",
        {"type": "array", "prefixItems": [STRING, NUMBER], "minItems": 1, "maxItems": 2},
    ),
    (
        "z.tuple([z.string()]).rest(z.number())",
        {"type": "array", "prefixItems": [STRING], "minItems": 1, "items": NUMBER},
    ),
    # unions
    ("z.union([z.string(), z.number()])", {"anyOf": [STRING, NUMBER]}),
    ("z.string().or(z.number())", {"anyOf": [STRING, NUMBER]}),
    (
        "z.string().or(z.number()).or(z.boolean())",
        {"anyOf": [STRING, NUMBER, {"type": "boolean"}]},
    ),
    (
        'z.discriminatedUnion("k", [z.object({ k: z.literal("a") }), z.object({ k: z.literal("b"), n: z.number() })])',
        {
            "anyOf": [
                obj({"k": {"type": "string", "const": "a"}}, ["k"]),
                obj({"k": {"type": "string", "const": "b"}, "n": NUMBER}, ["k", "n"]),
            ]
        },
    ),
    # records
    ("z.record(z.number())", {"type": "object", "additionalProperties": NUMBER}),
    ("z.record(z.string(), z.number())", {"type": "object", "additionalProperties": NUMBER}),
    (
        'z.record(z.enum(["a", "b"]), z.boolean())',
        {
            "type": "object",
            "propertyNames": {"enum": ["a", "b"]},
            "additionalProperties": {"type": "boolean"},
        },
    ),
    # modifiers
    ("z.string().nullable()", {"anyOf": [STRING, {"type": "null"}]}),
    ("z.nullable(z.string())", {"anyOf": [STRING, {"type": "null"}]}),
    ('z.string().default("x")', {"type": "string", "default": "x"}),
    (
        "z.any().default({ a: [1, { b: null }], c: true })",
        {"default": {"a": [1, {"b": None}], "c": True}},
    ),
    ('z.string().describe("t")', {"type": "string", "description": "t"}),
    (
        'z.string().nullable().describe("t")',
        {"anyOf": [STRING, {"type": "null"}], "description": "t"},
    ),
    (
        'z.string().describe("inner").nullable()',
        {"anyOf": [{"type": "string", "description": "inner"}, {"type": "null"}]},
    ),
    (
        'z.string().meta({ title: "T", examples: ["e"] })',
        {"type": "string", "title": "T", "examples": ["e"]},
    ),
    ("z.string().readonly()", STRING),
    # objects
    ("z.object({})", obj({})),
    ("z.object({ a: z.string() }).passthrough()", obj({"a": STRING}, ["a"], True)),
    ("z.object({ a: z.string() }).strict()", obj({"a": STRING}, ["a"])),
    ("z.object({ a: z.string() }).passthrough().strip()", obj({"a": STRING}, ["a"])),
    ("z.looseObject({ a: z.string() })", obj({"a": STRING}, ["a"], True)),
    ("z.strictObject({ a: z.string() })", obj({"a": STRING}, ["a"])),
    ("z.object({ a: z.string() }).catchall(z.number())", obj({"a": STRING}, ["a"], NUMBER)),
    (
        "z.object({ a: z.string() }).extend({ b: z.number(), a: z.boolean() })",
        obj({"a": {"type": "boolean"}, "b": NUMBER}, ["a", "b"]),
    ),
    (
        "z.object({ a: z.string() }).merge(z.object({ b: z.number() }).passthrough())",
        obj({"a": STRING, "b": NUMBER}, ["a", "b"], True),
    ),
    ("z.object({ a: z.string(), b: z.number() }).partial()", obj({"a": STRING, "b": NUMBER})),
    (
        "z.object({ a: z.string(), b: z.number() }).partial({ a: true })",
        obj({"a": STRING, "b": NUMBER}, ["b"]),
    ),
    (
        "z.object({ a: z.string().optional(), b: z.number() }).required()",
        obj({"a": STRING, "b": NUMBER}, ["a", "b"]),
    ),
    ("z.object({ a: z.string(), b: z.number() }).pick({ b: true })", obj({"b": NUMBER}, ["b"])),
    ("z.object({ a: z.string(), b: z.number() }).omit({ b: true })", obj({"a": STRING}, ["a"])),
    ("z.object({ a: z.string(), b: z.number() }).keyof()", {"type": "string", "enum": ["a", "b"]}),
    (
        "z.object({ a: z.string() }).extend(z.object({ b: z.number() }).shape)",
        obj({"a": STRING, "b": NUMBER}, ["a", "b"]),
    ),
]


@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0][:60] for c in CASES])
def test_it_translates_each_supported_construct(expression: str, expected: dict):
    out = default(expression)
    assert out == expected
    Draft202012Validator.check_schema(out)


def test_it_leaves_keys_that_accept_a_missing_value_out_of_required():
    out = default(
        "z.object({"
        " req: z.string(),"
        " opt: z.string().optional(),"
        " wrapped: z.optional(z.string()),"
        " nullish: z.string().nullish(),"
        ' dflt: z.string().default("x"),'
        " any: z.any(),"
        " unknown: z.unknown(),"
        " either: z.union([z.string(), z.number().optional()]),"
        " nullable: z.string().nullable(),"
        " }).describe('all')"
    )
    assert out["required"] == ["req", "nullable"]
    assert list(out["properties"]) == [
        "req",
        "opt",
        "wrapped",
        "nullish",
        "dflt",
        "any",
        "unknown",
        "either",
        "nullable",
    ]
    assert out["properties"]["nullish"] == {"anyOf": [STRING, {"type": "null"}]}


def test_it_omits_required_when_no_key_is_required():
    assert "required" not in default("z.object({ a: z.string().optional() })")


def test_it_marks_an_optional_top_level_schema():
    assert default("z.string().optional()") == {"type": "string", "x-gambit-optional": True}
    assert default("z.optional(z.string())") == {"type": "string", "x-gambit-optional": True}
    assert default("z.string().nullish()") == {
        "anyOf": [STRING, {"type": "null"}],
        "x-gambit-optional": True,
    }
    assert "x-gambit-optional" not in default("z.any()")
    assert "x-gambit-optional" not in default('z.string().default("a")')
    assert "x-gambit-optional" not in default("z.object({ a: z.string().optional() })")


def test_it_uses_constants_as_values():
    prelude = 'const MAX = 10;\nconst TIERS = ["free", "pro"] as const;\nconst DEF = { a: 1 };\n'
    assert default("z.number().max(MAX)", prelude) == {"type": "number", "maximum": 10}
    assert default("z.enum(TIERS)", prelude) == {"type": "string", "enum": ["free", "pro"]}
    assert default("z.any().default(DEF)", prelude) == {"default": {"a": 1}}


# ---- syntax tolerated -----------------------------------------------------------------------


def test_it_tolerates_comments_trailing_commas_quotes_and_type_syntax():
    source = """\
/** Input of the deck. */
import { z } from "npm:zod"; // the zod import
/* a block
   comment spanning lines */
type Helper = { a: string; b: Array<Record<string, number>> };
interface Other {
  x: number;
}
const Tier = z.enum(['free', "pro", `team`,] as const);
const Base: z.ZodType<Helper, z.ZodTypeDef, unknown> = z.object({
  'single': z.string(), // trailing comment
  "double": z.string(),
  bare_key: z.string().describe(`backtick
text`),
  $dollar: z.number(),
  tier: Tier,
}) satisfies z.ZodTypeAny;
export type Input = z.infer<typeof Base>;
export default Base as typeof Base;
"""
    out = tr(source)
    assert list(out["properties"]) == ["single", "double", "bare_key", "$dollar", "tier"]
    assert out["properties"]["bare_key"]["description"] == "backtick\ntext"
    assert out["properties"]["tier"]["enum"] == ["free", "pro", "team"]


def test_it_tolerates_missing_semicolons_and_methods_on_new_lines():
    source = (
        'import { z } from "zod"\n'
        "const A = z\n  .string()\n  .min(1)\n"
        "export default z.object({ a: A })\n"
        "  .describe('x')\n"
    )
    assert tr(source) == {
        **obj({"a": {"type": "string", "minLength": 1}}, ["a"]),
        "description": "x",
    }


def test_it_decodes_string_escapes():
    out = default(r'z.literal("a\n\t\"\u00e9\u{1F600}\x41\uD83D\uDE00")')
    assert out["const"] == 'a\n\t"\u00e9\U0001f600A\U0001f600'


def test_it_ignores_a_bom_a_shebang_and_type_only_exports():
    source = (
        "\ufeff#!/usr/bin/env -S deno run\n"
        + IMPORT
        + (
            'export type { Input } from "./types.ts";\n'
            "export interface Shape { a: string }\n"
            "export default z.string();\n"
        )
    )
    assert tr(source) == STRING


def test_it_accepts_generic_type_arguments_and_non_null_assertions():
    assert default("Item!.optional()", "const Item = z.string();\n") == {
        "type": "string",
        "x-gambit-optional": True,
    }


# ---- default export resolution --------------------------------------------------------------


def test_it_uses_a_named_default_export():
    assert tr(IMPORT + "const S = z.number();\nexport default S;") == NUMBER


def test_it_uses_an_export_list_with_default():
    assert tr(IMPORT + "const S = z.number();\nexport { S as default };") == NUMBER


def test_it_uses_the_single_exported_schema_when_there_is_no_default():
    source = IMPORT + "export const LIMIT = 3;\nexport const Input = z.string().max(LIMIT);\n"
    assert tr(source) == {"type": "string", "maxLength": 3}


def test_several_exported_schemas_without_a_default_is_an_error():
    source = IMPORT + "export const A = z.string();\nexport const B = z.number();\n"
    error = error_of(source)
    assert "export default" in error.message and "A, B" in error.message
    assert error.line == 3


def test_a_file_without_exports_is_an_error():
    error = error_of(IMPORT + "const A = z.string();\n")
    assert "no default export" in error.message
    assert error.line is None
    assert str(error) == f"{FILE}: {error.message}"


def test_a_default_export_that_is_not_a_schema_is_an_error():
    error = error_of(IMPORT + 'export default "x";\n')
    assert "not a zod schema" in error.message and error.line == 2


def test_two_default_exports_are_an_error():
    error = error_of(IMPORT + "export default z.string();\nexport default z.number();\n")
    assert error.line == 3


# ---- unsupported constructs: an error naming the construct, the file and the line ------------

UNSUPPORTED = [
    ("z.lazy(() => Node)", "z.lazy(...)"),
    ("z.string().refine((s) => s.length > 2)", ".refine(...)"),
    ("z.string().transform((s) => s.trim())", ".transform(...)"),
    ("z.object({ a: z.string() }).superRefine((v, ctx) => {})", ".superRefine(...)"),
    ("z.preprocess((v) => String(v), z.string())", "z.preprocess(...)"),
    ("z.function()", "z.function(...)"),
    ("z.coerce.number()", "z.coerce.number(...)"),
    ("z.date()", "z.date(...)"),
    ("z.bigint()", "z.bigint(...)"),
    ("z.nativeEnum(Colors)", "z.nativeEnum(...)"),
    ("z.intersection(z.object({}), z.object({}))", "z.intersection(...)"),
    ("z.custom<string>()", "z.custom(...)"),
    ("z.string().brand<'Id'>()", ".brand(...)"),
    ("z.object({}).and(z.object({}))", ".and(...)"),
    ("z.string().catch('x')", ".catch(...)"),
    ("z.string().pipe(z.string())", ".pipe(...)"),
    ("z.string().toLowerCase()", ".toLowerCase(...)"),
    ("z.string().int()", ".int(...)"),
    ("z.boolean().min(1)", ".min(...)"),
    ("z.string().optional().min(1)", ".min(...)"),
    ("makeSchema()", "makeSchema(...)"),
    ("Missing", "Missing"),
    ("z.object({ ...Base.shape, b: z.string() })", "...Base.shape"),
    ("z.union([...options])", "...options"),
    ("z.string().default(() => 'x')", "=>"),
    ("z.string().default(new Date().toISOString())", "new Date(...)"),
    ("z.string().regex(new RegExp('a'))", "new RegExp(...)"),
    ("z.string().regex(/abc/i)", "/abc/i"),
    ("z.number().max(MAX - 1)", "-"),
    ("z.number().max(flag ? 1 : 2)", "? :"),
    ("z.object({ [key]: z.string() })", "[key]"),
    ("z.object({ a: z.string() }).shape?.a", "?."),
    ("z.object({ a: z.string() }).shape['a']", "[...]"),
    ("z.string().element", ".element"),
    ("z.object({ get a() { return z.string(); } })", "get a(...)"),
    ("z.object({ a() { return z.string(); } })", "a(...)"),
    ("z.object({ a: z.string() }).pick({ b: true })", ".pick(...)"),
    ("z.discriminatedUnion('k', [z.object({ a: z.string() })])", "z.discriminatedUnion(...)"),
    ("z.array()", "z.array(...)"),
    ("z.string().describe(3)", ".describe(...)"),
    ("z.enum([])", "z.enum(...)"),
    ("z.record(z.number(), z.string())", "z.record(...)"),
    ("z.string().default(undefined)", ".default(...)"),
    ("typeof z", "typeof"),
    ("function () {}", "function expression"),
]


@pytest.mark.parametrize(("expression", "construct"), UNSUPPORTED, ids=[c[1] for c in UNSUPPORTED])
def test_an_unsupported_construct_is_an_error_naming_it_with_file_and_line(
    expression: str, construct: str
):
    source = IMPORT + "\n// a comment line\nconst Base = z.object({ a: z.string() });\n"
    source += "export default z.object({\n  ok: z.string(),\n  bad: " + expression + ",\n});\n"
    error = error_of(source, file="deck/bad.zod.ts")
    assert error.construct == construct
    assert error.file == "deck/bad.zod.ts"
    assert error.line == 7
    assert str(error) == f"deck/bad.zod.ts:7: {error.message}"
    assert construct in error.message


def test_the_line_is_where_the_construct_appears_in_a_long_chain():
    source = IMPORT + "export default z\n  .string()\n  .min(1)\n  .refine(\n    (s) => s,\n  );\n"
    error = error_of(source)
    assert (error.construct, error.line) == (".refine(...)", 5)


def test_the_error_lists_what_is_supported():
    error = error_of(IMPORT + "export default z.string().refine((s) => true);")
    assert error.message.startswith('unsupported zod construct ".refine(...)" (supported')
    assert ".min()" in error.message and ".optional()" in error.message
    error = error_of(IMPORT + "export default z.lazy(() => X);")
    assert "z.object" in error.message and "z.string" in error.message


def test_an_error_in_an_unused_constant_is_still_reported():
    error = error_of(
        IMPORT + "const Unused = z.string().transform(Number);\nexport default z.string();"
    )
    assert (error.construct, error.line) == (".transform(...)", 2)


UNSUPPORTED_STATEMENTS = [
    ('import { helper } from "./shared.ts";', 'import from "./shared.ts"'),
    (
        'import { patient } from "../tests/shared/patientProfile.ts";',
        'import from "../tests/shared/patientProfile.ts"',
    ),
    ('import { v } from "valibot";', 'import from "valibot"'),
    ('import * as z from "zod/mini";', 'import from "zod/mini"'),
    ('import "./side-effect.ts";', 'import from "./side-effect.ts"'),
    ('export { A } from "./a.ts";', 'import from "./a.ts"'),
    ('export * from "./a.ts";', "export * from"),
    ("function make() { return z.string(); }", "function"),
    ("class A {}", "class"),
    ("enum Color { Red }", "enum"),
    ("const { a } = z.object({}).shape;", "destructuring"),
    ("let later;", "later"),
    ("z.string();", "z"),
    ("export function f() {}", "export function"),
    ("const S = `a${1}b`;", "${...}"),
    ("const Dup = z.string();\nconst Dup = z.number();", "Dup"),
]


@pytest.mark.parametrize(
    ("statement", "construct"), UNSUPPORTED_STATEMENTS, ids=[c[1] for c in UNSUPPORTED_STATEMENTS]
)
def test_an_unsupported_statement_is_an_error_naming_it_with_file_and_line(
    statement: str, construct: str
):
    source = IMPORT + "// comment\n" + statement + "\nexport default z.string();\n"
    error = error_of(source)
    assert error.construct == construct
    assert error.line == 3 + statement.count("\n")
    assert error.file == FILE


def test_a_local_import_error_says_to_inline_the_schema():
    error = error_of(IMPORT + 'import { P } from "./patient.ts";\nexport default P;')
    assert "inline" in error.message and error.line == 2


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ('export default z.literal("unterminated);\n', 2),
        ("/* unterminated comment\n\nexport default z.string();", 2),
        ("export default z.string().regex(/abc\n);", 2),
        ("export default z.object({ a z.string() });", 2),
        ("export default z.string()(;", 2),
        ("\n\nexport default z.number().max(12n);", 4),
        ("export default z.number().max(1e999);", 2),
        ('export default z.literal("\\u{110000}");', 2),
        ("export default z.string() z.number();", 2),
        ("export default €;", 2),
    ],
)
def test_a_syntax_error_is_reported_with_its_line(source: str, line: int):
    error = error_of(IMPORT + source)
    assert error.line == line


# ---- the error type -------------------------------------------------------------------------


def test_the_error_carries_message_file_line_and_construct():
    error = ZodTranslationError("boom", file="a.zod.ts", line=4, construct=".refine(...)")
    assert (error.message, error.file, error.line, error.construct) == (
        "boom",
        "a.zod.ts",
        4,
        ".refine(...)",
    )
    assert str(error) == "a.zod.ts:4: boom"
    assert isinstance(error, DeckError) and isinstance(error, GambitError)
    assert error.problems[0].line == 4


def test_the_error_survives_pickling():
    error = error_of(IMPORT + "export default z.string().refine(() => true);")
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.message, clone.file, clone.line, clone.construct) == (
        error.message,
        error.file,
        error.line,
        error.construct,
    )
    assert str(clone) == str(error)


# ---- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "z.array(" * 300 + "z.string()" + ")" * 300,
        "(" * 3000 + "z.string()" + ")" * 3000,
        "z.object({ a: " * 200 + "z.string()" + " })" * 200,
        "z.string()" + ".array()" * 500,
        "z.string()" + ".nullable()" * 500,
        "z.any().default(" + "[" * 3000 + "]" * 3000 + ")",
        "z.tuple([" * 300 + "])" * 300,
    ],
    ids=["arrays", "parens", "objects", "method-arrays", "nullables", "default", "tuples"],
)
def test_deep_nesting_is_an_error_not_a_recursion_error(expression: str):
    error = error_of(IMPORT + "export default " + expression + ";")
    assert error.line == 2
    assert str(MAX_NESTING) in error.message


def test_nesting_through_constants_is_bounded_too():
    lines = ["const A0 = z.string();"]
    lines += [f"const A{i + 1} = z.array(A{i});" for i in range(200)]
    error = error_of(IMPORT + "\n".join(lines) + "\nexport default A200;")
    assert error.line == 2 + MAX_NESTING


def test_an_exponentially_large_inlined_schema_is_an_error():
    lines = ["const A0 = z.string();"]
    lines += [f"const A{i + 1} = z.object({{ a: A{i}, b: A{i} }});" for i in range(64)]
    error = error_of(IMPORT + "\n".join(lines) + "\nexport default A64;")
    assert "nodes" in error.message


def test_a_long_method_chain_is_fine():
    assert default("z.string()" + ".optional()" * 3000) == {
        "type": "string",
        "x-gambit-optional": True,
    }


def test_a_reasonably_deep_schema_translates():
    depth = 20
    expression = "z.object({ a: " * depth + "z.string()" + " })" * depth
    out = default(expression)
    for _ in range(depth):
        out = out["properties"]["a"]
    assert out == STRING


# ---- files ------------------------------------------------------------------------------------


def test_translate_zod_file_reads_the_file(tmp_path: Path):
    path = tmp_path / "input.zod.ts"
    path.write_text(EXAMPLE, encoding="utf-8")
    assert translate_zod_file(path) == tr(EXAMPLE)
    assert translate_zod_file(str(path)) == tr(EXAMPLE)


def test_translate_zod_file_errors_name_the_path(tmp_path: Path):
    path = tmp_path / "bad.zod.ts"
    path.write_text(IMPORT + "export default z.lazy(() => X);\n", encoding="utf-8")
    with pytest.raises(ZodTranslationError) as info:
        translate_zod_file(path)
    assert info.value.file == str(path) and info.value.line == 2


def test_a_missing_file_is_a_translation_error(tmp_path: Path):
    with pytest.raises(ZodTranslationError) as info:
        translate_zod_file(tmp_path / "missing.zod.ts")
    assert info.value.file == str(tmp_path / "missing.zod.ts")


def test_the_package_uses_only_the_standard_library_and_no_environment():
    package = Path(__file__).resolve().parents[2] / "gambit" / "core" / "_zod"
    paths = sorted(package.glob("*.py"))
    assert package / "__init__.py" in paths
    imported: set[str] = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add((node.module or "").split(".")[0])
        assert "os.environ" not in text and "getenv" not in text, path.name
    assert imported <= {
        "__future__",
        "collections",
        "dataclasses",
        "functools",
        "math",
        "os",
        "pathlib",
        "re",
        "typing",
    }


# ---- properties -------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(source: str) -> dict | None:
    try:
        out = translate_zod_source(source, file="fuzz.zod.ts")
    except ZodTranslationError as error:
        assert error.file == "fuzz.zod.ts"
        assert error.line is None or error.line >= 1
        assert str(error)
        return None
    assert isinstance(out, dict)
    json.dumps(out)
    return out


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text_gives_a_dict_or_a_translation_error(text: str):
    _outcome(text)
    _outcome(IMPORT + "export default " + text)


FRAGMENTS = [
    "z",
    ".",
    "object",
    "string",
    "number",
    "int",
    "boolean",
    "array",
    "enum",
    "union",
    "record",
    "tuple",
    "literal",
    "optional",
    "nullable",
    "nullish",
    "default",
    "describe",
    "min",
    "max",
    "extend",
    "merge",
    "pick",
    "omit",
    "partial",
    "keyof",
    "shape",
    "regex",
    "or",
    "rest",
    "meta",
    "discriminatedUnion",
    "refine",
    "lazy",
    "iso",
    "coerce",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    ";",
    "...",
    "=>",
    "=",
    "<",
    ">",
    "?",
    "?.",
    "!",
    "-",
    "+",
    "a",
    "b",
    "X",
    '"k"',
    "'q'",
    "`t`",
    "1",
    "-2.5",
    "0x1f",
    "1e999",
    "true",
    "null",
    "undefined",
    "new",
    "as",
    "const",
    "satisfies",
    "export",
    "default",
    "import",
    "from",
    '"zod"',
    "type",
    "interface",
    "/a/",
    "/b/i",
    "//",
    "/*",
    "*/",
    "\n",
    " ",
    '"\\u{',
    "${",
    "`${",
    "\\",
    '"',
    "'",
    "`",
]


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60))
def test_token_soup_gives_a_dict_or_a_translation_error(parts: list[str]):
    body = " ".join(parts)
    _outcome(IMPORT + "const X = 1;\nconst a = z.string();\nexport default " + body)
    _outcome(IMPORT + body)


LEAVES = st.sampled_from(
    [
        "z.string()",
        "z.number()",
        "z.int()",
        "z.boolean()",
        "z.null()",
        "z.any()",
        "z.unknown()",
        'z.enum(["a", "b"])',
        'z.literal("a")',
        "z.literal(2)",
        "z.email()",
        "Item",
    ]
)
MODIFIERS = st.sampled_from(
    [
        ".optional()",
        ".nullable()",
        ".nullish()",
        '.describe("d")',
        ".array()",
        ".readonly()",
        '.default("x")',
        ".default(null)",
        ".default([1, { a: 2 }])",
    ]
)
KEYS = st.sampled_from(["a", "b", "'c-d'", '"e"', "f1"])


def _with_modifiers(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(inner, st.lists(MODIFIERS, max_size=3)).map(lambda t: t[0] + "".join(t[1]))


ZOD_EXPRESSIONS = st.recursive(
    _with_modifiers(LEAVES),
    lambda inner: _with_modifiers(
        st.one_of(
            st.dictionaries(KEYS, inner, max_size=3).map(
                lambda d: "z.object({ " + ", ".join(f"{k}: {v}" for k, v in d.items()) + " })"
            ),
            inner.map(lambda e: f"z.array({e})"),
            st.lists(inner, min_size=1, max_size=3).map(lambda es: f"z.union([{', '.join(es)}])"),
            st.lists(inner, min_size=1, max_size=3).map(lambda es: f"z.tuple([{', '.join(es)}])"),
            inner.map(lambda e: f"z.record(z.string(), {e})"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}.or({t[1]})"),
        )
    ),
    max_leaves=12,
)


@FUZZ
@given(ZOD_EXPRESSIONS)
def test_supported_expressions_translate_to_valid_json_schema(expression: str):
    source = IMPORT + "const Item = z.object({ id: z.string() });\nexport default " + expression
    out = tr(source)
    marker = out.pop("x-gambit-optional", None)
    assert marker in (None, True)
    Draft202012Validator.check_schema(out)
    assert "x-gambit-optional" not in json.dumps(out)
