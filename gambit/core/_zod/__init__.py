"""Static translation of Zod schema files (`*.zod.ts`) to JSON Schema (docs/decks.md, "Zod files").

Decks written for the TypeScript Gambit reference schemas written with Zod. We do not run
TypeScript: a small tokenizer and recursive-descent parser read the file, evaluate the common
subset of Zod statically, and return the JSON Schema (draft 2020-12 vocabulary, fully inlined,
no `$ref`) of the module's default export.

Supported (anything else is a `ZodTranslationError` naming the construct, the file and the
1-based line, never a silent `{}`):

- imports of zod: `import { z } from "zod"` (also `npm:zod`, `npm:zod@3`, `jsr:@zod/zod`,
  `zod/v4`, ...), `import * as z from ...`, `import z from ...`, named factories
  (`import { object, string } from "zod"`); type-only imports from anywhere;
- statements: `const`/`let`/`var` (optionally `export`ed, with a type annotation),
  `export default <expr>`, `export { A as default }`, type-only statements (`type`,
  `interface`, `export type ...`), which are skipped;
- expressions: `as const`, `as T`, `satisfies T`, string/number/boolean/null literals,
  arrays and objects of them, regex literals, references to earlier constants;
- factories: `z.object`, `z.strictObject`, `z.looseObject`, `z.string`, `z.number`,
  `z.int`, `z.boolean`, `z.null`, `z.any`, `z.unknown`, `z.array`, `z.tuple`, `z.enum`,
  `z.literal`, `z.union`, `z.discriminatedUnion`, `z.record`, `z.optional`, `z.nullable`,
  `z.email`, `z.url`, `z.uuid`, `z.iso.datetime/date/time`;
- methods: see `_methods.py` (`.optional()`, `.nullable()`, `.default(v)`, `.describe(t)`,
  `.min/.max/...`, `.extend/.merge/.partial/.pick/.omit/...`).

How it works, and where to look (each step is one module; read them in this order):

    source text
      → _lexer.py      tokens with their lines (`_Lexer.tokens()`)
      → _module.py     statements: zod imports, constants, exports (`_SchemaFile.translate()`);
                       each initializer is parsed, then evaluated at once
          _parser.py     an expression → a `_Node` tree (`_ExpressionParser.expr()`), over
                         the token cursor of _cursor.py
          _evaluate.py   a `_Node` → a value (`_Evaluator.eval()`): literals, constants, and
                         zod chains, which run
            _factories.py  `z.object(...)`, `z.string()`, ... (`_FACTORIES`)
            _methods.py    `.min(1)`, `.optional()`, ... (`_METHODS`, `_METHOD_HANDLERS`)
            _arguments.py  the argument checks and literal sizes both of those use
      → _schema.py     the exported `_Schema` → a JSON Schema dict (`_render`)

_values.py holds the other values an expression can have (regex, undefined, zod references)
and how messages name them; _errors.py the error, the limits and `_FileErrors` (`fail`,
`unsupported`), which the lexer, the parser and the evaluator share.

Decisions worth knowing:

- An object property is left out of `required` when its schema accepts a missing value in
  Zod: `.optional()`, `.nullish()`, `.default(v)`, `z.any()` and `z.unknown()` (Zod parses
  `{}` with `z.object({a: z.any()})`), and unions/nullables containing one of those.
- A top-level schema that accepts a missing value because of `.optional()` (or `.nullish()`)
  carries `"x-gambit-optional": true` (see `gambit.core._schema.OPTIONAL_KEY`).
- `.describe()` and `.default()` apply to the schema they are called on: after
  `.nullable()` they sit on the `anyOf` wrapper, before it on the inner branch.
- Regex flags other than `g`, `u` and `d` cannot be expressed by `pattern` and are errors.
- Validation messages (`.min(1, "Required")`, `{ message: ... }`) are accepted and ignored.
- Recursion and size are bounded: nesting deeper than `MAX_NESTING` or a schema larger than
  `MAX_SCHEMA_NODES` once inlined is an error, not a `RecursionError` or a hang.

This package must stay free of Django, HTTP clients and environment reads, like all of
gambit.core; every module imports only the standard library (tests/core/test_zod.py checks).
"""

from __future__ import annotations

import os
from pathlib import Path

from ._errors import MAX_NESTING, MAX_SCHEMA_NODES, ZodTranslationError, _rebuild_error
from ._module import _SchemaFile

__all__ = [
    "MAX_NESTING",
    "MAX_SCHEMA_NODES",
    "ZodTranslationError",
    "translate_zod_file",
    "translate_zod_source",
]

# The error and the function pickle rebuilds it with keep their public home: tracebacks name
# `gambit.core._zod.ZodTranslationError` and pickles refer to `gambit.core._zod`, as before
# the translator became a package.
ZodTranslationError.__module__ = __name__
_rebuild_error.__module__ = __name__


def translate_zod_source(source: str, *, file: str) -> dict:
    """The JSON Schema of the default export of the Zod module `source` (read from `file`)."""
    return _SchemaFile(source, file).translate()


def translate_zod_file(path: str | os.PathLike) -> dict:
    """Read a `.zod.ts` file and translate it (see `translate_zod_source`)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ZodTranslationError(f"cannot read the schema file: {exc}", file=file) from exc
    return translate_zod_source(text, file=file)
