"""Static translation of Zod schema files (`*.zod.ts`) to JSON Schema (DESIGN §3 "Schemas").

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
- methods: see `_METHODS` (`.optional()`, `.nullable()`, `.default(v)`, `.describe(t)`,
  `.min/.max/...`, `.extend/.merge/.partial/.pick/.omit/...`).

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

This module must stay free of Django, HTTP clients and environment reads (DESIGN §4).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ._errors import MAX_NESTING, MAX_SCHEMA_NODES, ZodTranslationError, _rebuild_error
from ._lexer import _Lexer, _Tok
from ._schema import _kind_label, _render, _Schema
from ._values import _UNDEFINED, _describe_value, _is_number, _literal_type, _Regex, _ZodRef

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
    return _Translator(source, file).run()


def translate_zod_file(path: str | os.PathLike) -> dict:
    """Read a `.zod.ts` file and translate it (see `translate_zod_source`)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ZodTranslationError(f"cannot read the schema file: {exc}", file=file) from exc
    return translate_zod_source(text, file=file)


# Syntax tree

_STATEMENT_STARTERS = frozenset(
    [
        "import",
        "export",
        "const",
        "let",
        "var",
        "type",
        "interface",
        "function",
        "class",
        "enum",
        "declare",
    ]
)
_BINARY = frozenset(
    [
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "==",
        "!=",
        "===",
        "!==",
        "<",
        ">",
        "&&",
        "||",
        "??",
        "?",
        "&",
        "|",
        "^",
        "=",
        "+=",
        "-=",
        "**=",
        "++",
        "--",
    ]
)
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


@dataclass(frozen=True, slots=True, eq=False)
class _Node:
    # "lit", "ident", "regex", "array", "object", "member", "call", "bad"
    kind: str
    line: int
    value: Any = None  # literal value, identifier, member name, or (construct, message)
    obj: _Node | None = None  # member object / call callee
    items: tuple = ()  # array elements, call arguments, object entries (key, node)


_COMMON_METHODS = (
    "optional",
    "nullable",
    "nullish",
    "default",
    "describe",
    "meta",
    "array",
    "or",
    "readonly",
)
_METHODS: dict[str, tuple[str, ...]] = {
    "string": (
        "min",
        "max",
        "length",
        "nonempty",
        "email",
        "url",
        "uuid",
        "regex",
        "datetime",
        "date",
        "time",
        "trim",
    ),
    "number": (
        "int",
        "min",
        "max",
        "gt",
        "gte",
        "lt",
        "lte",
        "positive",
        "nonnegative",
        "negative",
        "nonpositive",
        "multipleOf",
        "step",
        "finite",
    ),
    "array": ("min", "max", "length", "nonempty"),
    "object": (
        "extend",
        "merge",
        "partial",
        "required",
        "pick",
        "omit",
        "strict",
        "passthrough",
        "strip",
        "catchall",
        "keyof",
    ),
    "enum": ("extract", "exclude"),
    "tuple": ("rest",),
}
_FACTORIES: dict[str, str] = {
    "object": "_f_object",
    "strictObject": "_f_object",
    "looseObject": "_f_object",
    "string": "_f_leaf",
    "number": "_f_leaf",
    "int": "_f_leaf",
    "boolean": "_f_leaf",
    "null": "_f_leaf",
    "any": "_f_leaf",
    "unknown": "_f_leaf",
    "email": "_f_leaf",
    "url": "_f_leaf",
    "uuid": "_f_leaf",
    "iso.datetime": "_f_leaf",
    "iso.date": "_f_leaf",
    "iso.time": "_f_leaf",
    "array": "_f_array",
    "tuple": "_f_tuple",
    "enum": "_f_enum",
    "literal": "_f_literal",
    "union": "_f_union",
    "discriminatedUnion": "_f_discriminated_union",
    "record": "_f_record",
    "optional": "_f_wrap",
    "nullable": "_f_wrap",
}
_LEAVES: dict[str, tuple[str, dict[str, Any]]] = {
    "string": ("string", {"type": "string"}),
    "number": ("number", {"type": "number"}),
    "int": ("number", {"type": "integer"}),
    "boolean": ("boolean", {"type": "boolean"}),
    "null": ("null", {"type": "null"}),
    "any": ("any", {}),
    "unknown": ("unknown", {}),
    "email": ("string", {"type": "string", "format": "email"}),
    "url": ("string", {"type": "string", "format": "uri"}),
    "uuid": ("string", {"type": "string", "format": "uuid"}),
    "iso.datetime": ("string", {"type": "string", "format": "date-time"}),
    "iso.date": ("string", {"type": "string", "format": "date"}),
    "iso.time": ("string", {"type": "string", "format": "time"}),
}
_STRING_FORMATS = {
    "email": "email",
    "url": "uri",
    "uuid": "uuid",
    "datetime": "date-time",
    "date": "date",
    "time": "time",
}
# Keys of the optional "params" argument of factories, and of the message argument of checks.
_PARAM_KEYS = frozenset(
    ["description", "message", "error", "required_error", "invalid_type_error", "abort"]
)
_CHECK_OPTION_KEYS = frozenset(["message", "error", "abort", "offset", "local", "precision"])
_REGEX_FLAGS_OK = frozenset("gud")
_SUPPORTED_FACTORIES = ", ".join(f"z.{name}" for name in _FACTORIES)


_ZOD_SOURCE = re.compile(
    r"(?:npm:|jsr:)?(?:@zod/)?zod(?:@[\w.^~<>=*|-]*)?(?:/v[34](?:/classic)?)?"
    r"|https://(?:deno\.land/x|esm\.sh|cdn\.skypack\.dev)/zod(?:@[\w.^~-]*)?(?:/[\w./-]*)?"
)


def _methods_for(s: _Schema) -> tuple[str, ...]:
    if s.wrapped:
        return _COMMON_METHODS
    return _METHODS.get(s.kind, ()) + _COMMON_METHODS


# ---------------------------------------------------------------------------------------------
# Parser and evaluator


class _Translator:
    def __init__(self, source: str, file: str):
        self.file = file
        self.toks = _Lexer(source, file).tokens()
        self.i = 0
        self.depth = 0
        self.env: dict[str, Any] = {}
        self.zod_imported = False
        self.exports: dict[str, tuple[Any, int]] = {}
        self.export_lists: list[tuple[str, str, int]] = []
        self.default: tuple[Any, int] | None = None
        # id(list|dict) -> (value, depth, size, is_json) for array/object literals
        self.literals: dict[int, tuple[Any, int, int, bool]] = {}

    # ---- errors and token helpers -----------------------------------------------------------

    def fail(
        self, message: str, line: int | None, construct: str | None = None
    ) -> ZodTranslationError:
        return ZodTranslationError(message, file=self.file, line=line, construct=construct)

    def unsupported(self, construct: str, line: int | None, why: str) -> ZodTranslationError:
        return self.fail(f'unsupported zod construct "{construct}" ({why})', line, construct)

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> _Tok:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    @staticmethod
    def is_punct(tok: _Tok, value: str) -> bool:
        return tok.kind == "punct" and tok.value == value

    @staticmethod
    def is_name(tok: _Tok, value: str) -> bool:
        return tok.kind == "name" and tok.value == value

    def accept(self, value: str) -> bool:
        if self.is_punct(self.peek(), value):
            self.next()
            return True
        return False

    @staticmethod
    def show(tok: _Tok) -> str:
        if tok.kind == "eof":
            return "the end of the file"
        if tok.kind == "str":
            return f"string {tok.value!r}"
        return f'"{tok.text}"'

    def expect(self, value: str, where: str) -> _Tok:
        tok = self.peek()
        if not self.is_punct(tok, value):
            raise self.fail(
                f'expected "{value}" {where}, found {self.show(tok)}', tok.line, tok.text or None
            )
        return self.next()

    def expect_name(self, where: str) -> _Tok:
        tok = self.peek()
        if tok.kind != "name":
            raise self.fail(
                f"expected a name {where}, found {self.show(tok)}", tok.line, tok.text or None
            )
        return self.next()

    def end_statement(self) -> None:
        tok = self.peek()
        if self.is_punct(tok, ";"):
            self.next()
        elif tok.kind != "eof" and not tok.nl_before:
            raise self.fail(
                f"unexpected {self.show(tok)} (expected the end of the statement)",
                tok.line,
                tok.text,
            )

    def skip_balanced(self, stops: frozenset[str] = frozenset(), *, angles: bool = False) -> None:
        """Skip a type or an expression we do not evaluate, up to a closer or `,`/`;` at depth 0."""
        depth = 0
        start = self.i
        while True:
            tok = self.peek()
            if tok.kind == "eof":
                return
            if depth == 0:
                if tok.kind == "punct" and (
                    tok.value in stops or tok.value in _CLOSE or tok.value in (",", ";")
                ):
                    return
                if angles and self.is_punct(tok, ">"):
                    return
                if (
                    self.i > start
                    and tok.nl_before
                    and tok.kind == "name"
                    and tok.value in _STATEMENT_STARTERS
                ):
                    return
            if tok.kind == "punct":
                if tok.value in _OPEN or (angles and tok.value == "<"):
                    depth += 1
                elif tok.value in _CLOSE or (angles and tok.value == ">"):
                    depth -= 1
            self.next()

    def text_since(self, start: int, limit: int = 40) -> str:
        parts: list[str] = []
        for tok in self.toks[start : self.i]:
            parts.append(repr(tok.value) if tok.kind == "str" else tok.text)
            if sum(len(p) for p in parts) > limit:
                break
        text = "".join(parts)
        return text if len(text) <= limit else text[: limit - 3] + "..."

    # ---- statements ---------------------------------------------------------------------------

    def run(self) -> dict:
        while True:
            tok = self.peek()
            if tok.kind == "eof":
                break
            if self.is_punct(tok, ";"):
                self.next()
                continue
            if tok.kind == "name":
                after = self.peek(1)
                if tok.value == "import" and not (
                    self.is_punct(after, "(") or self.is_punct(after, ".")
                ):
                    self.import_statement()
                    continue
                if tok.value == "export":
                    self.export_statement()
                    continue
                if tok.value in ("const", "let", "var"):
                    self.declaration(exported=False)
                    continue
                if tok.value in ("type", "interface") and after.kind == "name":
                    self.next()
                    self.skip_type_statement()
                    continue
            raise self.unsupported(
                tok.text or "end of file",
                tok.line,
                "a schema file may only contain imports of zod, const declarations, exports "
                "and type declarations",
            )
        return self.result()

    def skip_type_statement(self) -> None:
        """Skip the rest of `type X = ...` / `interface X {...}` (after the keyword)."""
        while True:
            self.skip_balanced(angles=True)
            tok = self.peek()
            if tok.kind == "punct" and (tok.value in _CLOSE or tok.value in (",", ">")):
                self.next()  # stray in a type we do not read: go on skipping
                continue
            break
        self.accept(";")

    def import_statement(self) -> None:
        kw = self.next()
        line = kw.line
        bindings: list[tuple[str, str]] = []  # (local, imported) value bindings
        type_only = False
        tok = self.peek()
        if tok.kind == "str":
            source = self.next().value
            self.end_statement()
            if not _ZOD_SOURCE.fullmatch(source):
                raise self.bad_import(source, line)
            return
        if self.is_name(tok, "type") and not (
            self.is_name(self.peek(1), "from") or self.is_punct(self.peek(1), ",")
        ):
            self.next()
            type_only = True
        if self.peek().kind == "name" and not self.is_name(self.peek(), "from"):
            bindings.append((self.next().value, "default"))
            self.accept(",")
        if self.accept("*"):
            as_tok = self.expect_name('after "import *"')
            if as_tok.value != "as":
                raise self.fail('expected "as" after "import *"', as_tok.line, as_tok.text)
            bindings.append((self.expect_name('after "import * as"').value, "*"))
        elif self.accept("{"):
            while not self.is_punct(self.peek(), "}"):
                is_type = False
                if self.is_name(self.peek(), "type") and self.peek(1).kind in ("name", "str"):
                    self.next()
                    is_type = True
                name_tok = self.next()
                if name_tok.kind not in ("name", "str"):
                    raise self.fail(
                        f"unexpected {self.show(name_tok)} in an import list",
                        name_tok.line,
                        name_tok.text,
                    )
                imported = name_tok.value
                local = imported
                if self.is_name(self.peek(), "as"):
                    self.next()
                    local = self.expect_name('after "as"').value
                if not is_type:
                    bindings.append((local, imported))
                if not self.accept(","):
                    break
            self.expect("}", "to close the import list")
        from_tok = self.expect_name("(from) in the import")
        if from_tok.value != "from":
            raise self.fail(
                f'expected "from" in the import, found {self.show(from_tok)}',
                from_tok.line,
                from_tok.text,
            )
        src_tok = self.next()
        if src_tok.kind != "str":
            raise self.fail("expected the module name of the import", src_tok.line, src_tok.text)
        self.end_statement()
        if type_only or not bindings:
            return
        if not _ZOD_SOURCE.fullmatch(src_tok.value):
            raise self.bad_import(src_tok.value, line)
        self.zod_imported = True
        for local, imported in bindings:
            if local in self.env:
                raise self.fail(f'"{local}" is declared twice', line, local)
            if imported in ("*", "default", "z"):
                self.env[local] = _ZodRef(local, "")
            else:
                self.env[local] = _ZodRef(local, imported)

    def bad_import(self, source: str, line: int) -> ZodTranslationError:
        construct = f'import from "{source}"'
        if source.startswith((".", "/")):
            why = (
                "a .zod.ts schema is translated on its own and cannot import other files; "
                "inline the shared schema here, or write the schema as .json"
            )
        elif "zod" in source:
            why = 'this zod entry point is not supported; import { z } from "zod" (or "zod/v4")'
        else:
            why = "only zod can be imported by a .zod.ts schema"
        return self.fail(f"unsupported {construct} ({why})", line, construct)

    def export_statement(self) -> None:
        kw = self.next()
        tok = self.peek()
        if self.is_name(tok, "default"):
            self.next()
            node = self.expr()
            self.end_statement()
            value = self.eval(node)
            self.set_default(value, tok.line)
            return
        if tok.kind == "name" and tok.value in ("const", "let", "var"):
            self.declaration(exported=True)
            return
        if tok.kind == "name" and tok.value in ("type", "interface"):
            self.next()
            if self.is_punct(self.peek(), "{") or self.is_punct(self.peek(), "*"):
                # `export type { X } [from "..."]`: type-only, nothing to evaluate
                self.skip_balanced(frozenset())
                self.accept("}")
                if self.is_name(self.peek(), "from"):
                    self.next()
                    self.next()
                self.end_statement()
                return
            self.skip_type_statement()
            return
        if self.accept("{"):
            names: list[tuple[str, str, int]] = []
            while not self.is_punct(self.peek(), "}"):
                local_tok = self.expect_name("in the export list")
                exported = local_tok.value
                if self.is_name(self.peek(), "as"):
                    self.next()
                    exported = self.expect_name('after "as"').value
                names.append((local_tok.value, exported, local_tok.line))
                if not self.accept(","):
                    break
            self.expect("}", "to close the export list")
            if self.is_name(self.peek(), "from"):
                self.next()
                src = self.next()
                raise self.bad_import(str(src.value), kw.line)
            self.end_statement()
            self.export_lists.extend(names)
            return
        if self.is_punct(tok, "*"):
            self.next()
            self.skip_balanced(frozenset())
            raise self.unsupported(
                "export * from", kw.line, "re-exports from other files cannot be translated"
            )
        raise self.unsupported(
            f"export {tok.text}".strip(),
            tok.line,
            "only `export default`, `export const`, `export { ... }` and type exports are "
            "supported",
        )

    def set_default(self, value: Any, line: int) -> None:
        if self.default is not None:
            raise self.fail("the file has two default exports", line, "export default")
        self.default = (value, line)

    def declaration(self, *, exported: bool) -> None:
        self.next()  # const / let / var
        while True:
            name_tok = self.peek()
            if name_tok.kind != "name":
                if self.is_punct(name_tok, "{") or self.is_punct(name_tok, "["):
                    raise self.unsupported(
                        "destructuring", name_tok.line, "declare one constant per schema"
                    )
                raise self.fail(
                    f"expected a constant name, found {self.show(name_tok)}",
                    name_tok.line,
                    name_tok.text or None,
                )
            self.next()
            name = name_tok.value
            if self.accept(":"):
                self.skip_balanced(frozenset(["="]), angles=True)
            if not self.accept("="):
                raise self.fail(f'"{name}" has no initializer', name_tok.line, f"{name_tok.value}")
            node = self.expr()
            value = self.eval(node)
            if name in self.env:
                raise self.fail(f'"{name}" is declared twice', name_tok.line, name)
            self.env[name] = value
            if exported:
                self.exports[name] = (value, name_tok.line)
            if not self.accept(","):
                break
        self.end_statement()

    def result(self) -> dict:
        for local, exported, line in self.export_lists:
            if local not in self.env:
                raise self.fail(f'exported name "{local}" is not defined', line, local)
            if exported == "default":
                self.set_default(self.env[local], line)
            else:
                self.exports[exported] = (self.env[local], line)
        if self.default is not None:
            value, line = self.default
        else:
            schemas = [(n, v, ln) for n, (v, ln) in self.exports.items() if isinstance(v, _Schema)]
            if not schemas:
                raise self.fail(
                    "the file has no default export (add `export default <schema>`)", None
                )
            if len(schemas) > 1:
                names = ", ".join(n for n, _, _ in schemas)
                raise self.fail(
                    f"several schemas are exported ({names}) and none is the default; "
                    "add `export default <schema>` to say which one the deck uses",
                    schemas[1][2],
                    "export const",
                )
            _, value, line = schemas[0]
        if not isinstance(value, _Schema):
            raise self.fail(
                f"the default export is {_describe_value(value)}, not a zod schema",
                line,
                "export default",
            )
        out = _render(value)
        if value.optional:
            out["x-gambit-optional"] = True
        return out

    # ---- expressions --------------------------------------------------------------------------

    def bad(self, construct: str, line: int, why: str) -> _Node:
        """A construct we parsed past but cannot evaluate; the error is raised if it is used."""
        return _Node("bad", line, (construct, why))

    def expr(self) -> _Node:
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                tok = self.peek()
                raise self.fail(
                    f"the schema is nested too deeply (more than {MAX_NESTING} levels)",
                    tok.line,
                    "nesting",
                )
            node = self.postfix(self.primary())
            while self.peek().kind == "name" and self.peek().value in ("as", "satisfies"):
                self.next()
                self.skip_balanced(frozenset(["=", ":"]), angles=True)
            tok = self.peek()
            if (tok.kind == "punct" and tok.value in _BINARY) or (
                tok.kind == "name" and tok.value in ("in", "instanceof") and not tok.nl_before
            ):
                if tok.value == "?":
                    construct, why = "? :", "conditional expressions are not static"
                else:
                    construct = str(tok.value)
                    why = f"operators such as {tok.value} are not supported in a static schema"
                self.skip_balanced()
                return self.bad(construct, tok.line, why)
            return node
        finally:
            self.depth -= 1

    def paren_is_arrow(self) -> bool:
        depth = 0
        j = self.i
        while j < len(self.toks):
            tok = self.toks[j]
            if tok.kind == "eof":
                return False
            if tok.kind == "punct":
                if tok.value in _OPEN:
                    depth += 1
                elif tok.value in _CLOSE:
                    depth -= 1
                    if depth == 0:
                        after = self.toks[min(j + 1, len(self.toks) - 1)]
                        return after.kind == "punct" and after.value in ("=>", ":")
            j += 1
        return False  # pragma: no cover - the eof token ends the loop

    def primary(self) -> _Node:
        tok = self.peek()
        line = tok.line
        if tok.kind == "str":
            self.next()
            return _Node("lit", line, tok.value)
        if tok.kind == "num":
            self.next()
            return _Node("lit", line, tok.value)
        if tok.kind == "regex":
            self.next()
            return _Node("regex", line, tok.value)
        if tok.kind == "name":
            name = tok.value
            after = self.peek(1)
            if self.is_punct(after, "=>") or name == "async":
                self.skip_balanced()
                return self.bad("=>", line, "functions cannot be translated statically")
            if name in ("true", "false"):
                self.next()
                return _Node("lit", line, name == "true")
            if name == "null":
                self.next()
                return _Node("lit", line, None)
            if name == "undefined":
                self.next()
                return _Node("lit", line, _UNDEFINED)
            if name == "new":
                start = self.i
                self.next()
                callee = self.peek().text if self.peek().kind == "name" else ""
                self.skip_balanced()
                construct = f"new {callee}(...)" if callee else self.text_since(start)
                return self.bad(construct, line, "values computed at runtime are not static")
            if name in ("function", "class"):
                self.skip_balanced()
                return self.bad(f"{name} expression", line, "functions cannot be translated")
            if name in ("typeof", "await", "void", "delete", "yield", "import", "this", "super"):
                self.skip_balanced()
                return self.bad(name, line, "not a static value")
            self.next()
            return _Node("ident", line, name)
        if tok.kind == "punct":
            value = tok.value
            if value == "[":
                return self.array_literal()
            if value == "{":
                return self.object_literal()
            if value == "(":
                if self.paren_is_arrow():
                    self.skip_balanced()
                    return self.bad("=>", line, "functions cannot be translated statically")
                self.next()
                inner = self.expr()
                self.expect(")", "to close the parenthesis")
                return inner
            if value in ("-", "+") and self.peek(1).kind == "num":
                self.next()
                number = self.next().value
                return _Node("lit", line, -number if value == "-" else number)
            if value == "...":
                start = self.i
                self.next()
                self.skip_balanced()
                return self.bad(
                    self.text_since(start),
                    line,
                    "spreading is not supported; list the keys, or use .extend()/.merge()",
                )
        raise self.fail(
            f"unexpected {self.show(tok)} where a value was expected", line, tok.text or None
        )

    def generic_call_ahead(self) -> bool:
        """At `<`: is this `f<T>(...)` (type arguments) rather than a comparison?"""
        depth = 0
        j = self.i
        while j < len(self.toks):
            tok = self.toks[j]
            if tok.kind == "eof" or self.is_punct(tok, ";"):
                return False
            if tok.kind == "punct":
                if tok.value in ("<", "(", "[", "{"):
                    depth += 1
                elif tok.value in (">", ")", "]", "}"):
                    depth -= 1
                    if depth == 0:
                        return tok.value == ">" and self.is_punct(
                            self.toks[min(j + 1, len(self.toks) - 1)], "("
                        )
                    if depth < 0:
                        return False
            j += 1
        return False  # pragma: no cover - the eof token ends the loop

    def postfix(self, node: _Node) -> _Node:
        while True:
            tok = self.peek()
            if tok.kind != "punct":
                return node
            value = tok.value
            if value == ".":
                self.next()
                name_tok = self.expect_name('after "."')
                node = _Node("member", name_tok.line, name_tok.value, obj=node)
            elif value == "(":
                node = _Node("call", node.line, items=self.arguments(), obj=node)
            elif value == "<" and node.kind in ("ident", "member") and self.generic_call_ahead():
                self.next()
                self.skip_balanced(angles=True)
                self.expect(">", "to close the type arguments")
            elif value == "?.":
                self.skip_balanced()
                return self.bad("?.", tok.line, "optional chaining is not static")
            elif value == "[":
                self.skip_balanced()
                return self.bad("[...]", tok.line, "computed member access is not supported")
            elif value == "!" and not tok.nl_before and not self.is_punct(self.peek(1), "="):
                self.next()  # TypeScript non-null assertion
            else:
                return node

    def arguments(self) -> tuple[_Node, ...]:
        self.expect("(", "to start the arguments")
        args: list[_Node] = []
        while not self.is_punct(self.peek(), ")"):
            args.append(self.expr())
            if not self.accept(","):
                break
        self.expect(")", "to close the arguments")
        return tuple(args)

    def array_literal(self) -> _Node:
        line = self.next().line
        items: list[_Node] = []
        while not self.is_punct(self.peek(), "]"):
            if self.is_punct(self.peek(), ","):
                tok = self.next()
                items.append(self.bad("[,]", tok.line, "array holes are not supported"))
                continue
            items.append(self.expr())
            if not self.accept(","):
                break
        self.expect("]", "to close the array")
        return _Node("array", line, items=tuple(items))

    def object_literal(self) -> _Node:
        line = self.next().line
        entries: list[tuple[str | None, _Node]] = []
        while not self.is_punct(self.peek(), "}"):
            tok = self.peek()
            if self.is_punct(tok, "..."):
                entries.append((None, self.expr()))
            elif self.is_punct(tok, "["):
                start = self.i
                self.skip_balanced(frozenset([":"]))
                construct = self.text_since(start, 30)
                if self.accept(":"):
                    self.expr()
                entries.append(
                    (None, self.bad(construct, tok.line, "computed keys are not supported"))
                )
            else:
                self.next()
                if tok.kind == "name" or tok.kind == "str":
                    key = tok.value
                elif tok.kind == "num":
                    key = _js_number_text(tok.value)
                else:
                    raise self.fail(
                        f"unexpected {self.show(tok)} in an object literal", tok.line, tok.text
                    )
                after = self.peek()
                if self.accept(":"):
                    entries.append((key, self.expr()))
                elif tok.kind == "name" and (
                    self.is_punct(after, ",") or self.is_punct(after, "}")
                ):
                    entries.append((key, _Node("ident", tok.line, key)))
                elif tok.kind == "name" and (
                    after.kind == "name" or self.is_punct(after, "(") or self.is_punct(after, "<")
                ):
                    # get x() {...}, async x() {...}, x() {...}
                    construct = (
                        f"{key} {after.value}(...)" if after.kind == "name" else f"{key}(...)"
                    )
                    self.skip_balanced()
                    entries.append(
                        (None, self.bad(construct, tok.line, "methods are not supported"))
                    )
                else:
                    raise self.fail(
                        f'expected ":" after the key "{key}", found {self.show(after)}',
                        after.line,
                        after.text or None,
                    )
            if not self.accept(","):
                break
        self.expect("}", "to close the object")
        return _Node("object", line, items=tuple(entries))

    # ---- evaluation ---------------------------------------------------------------------------

    def eval(self, node: _Node) -> Any:
        kind = node.kind
        if kind == "lit":
            return node.value
        if kind == "ident":
            return self.lookup(node.value, node.line)
        if kind == "regex":
            return node.value
        if kind == "bad":
            construct, why = node.value
            raise self.unsupported(construct, node.line, why)
        if kind == "array":
            return self.register([self.eval(item) for item in node.items], node.line)
        if kind == "object":
            out: dict[str, Any] = {}
            for key, item in node.items:
                value = self.eval(item)
                if key is not None:  # pragma: no branch - keyless entries are bad nodes
                    out[key] = value
            return self.register(out, node.line)
        return self.eval_chain(node)

    def register(self, value: list | dict, line: int) -> Any:
        children = value.values() if isinstance(value, dict) else value
        depth, size, is_json = 1, 1, True
        for child in children:
            d, s, j = self.measure(child)
            depth = max(depth, d + 1)
            size += s
            is_json = is_json and j
        if depth > MAX_NESTING or size > MAX_SCHEMA_NODES:
            raise self.fail(
                f"this value is nested more than {MAX_NESTING} levels deep or is larger than "
                f"{MAX_SCHEMA_NODES} nodes once inlined",
                line,
                "size",
            )
        self.literals[id(value)] = (value, depth, size, is_json)
        return value

    def measure(self, value: Any) -> tuple[int, int, bool]:
        if isinstance(value, _Schema):
            return value.depth, value.size, False
        if isinstance(value, (list, dict)):
            _, depth, size, is_json = self.literals[id(value)]
            return depth, size, is_json
        is_json = value is None or isinstance(value, (str, int, float))
        return 0, 1, is_json

    def lookup(self, name: str, line: int) -> Any:
        if name in self.env:
            return self.env[name]
        if name in ("z", "zod") and not self.zod_imported:
            raise self.fail(
                f'unknown identifier "{name}": import zod first (import {{ z }} from "zod")',
                line,
                name,
            )
        raise self.fail(
            f'unknown identifier "{name}" (only zod and constants defined earlier in this file '
            "can be used)",
            line,
            name,
        )

    def eval_chain(self, node: _Node) -> Any:
        ops: list[_Node] = []
        base = node
        while base.kind in ("member", "call"):
            ops.append(base)
            assert base.obj is not None
            base = base.obj
        ops.reverse()
        if ops[0].kind == "call" and base.kind == "ident" and base.value not in self.env:
            if base.value in ("z", "zod"):
                self.lookup(base.value, base.line)
            raise self.unsupported(
                f"{base.value}(...)",
                base.line,
                f'"{base.value}" is not a zod function or a constant of this file',
            )
        value = self.eval(base)
        index = 0
        while index < len(ops):
            op = ops[index]
            if op.kind == "member" and index + 1 < len(ops) and ops[index + 1].kind == "call":
                value = self.call_method(value, op.value, ops[index + 1].items, op.line)
                index += 2
                continue
            if op.kind == "member":
                value = self.get_property(value, op.value, op.line)
            else:
                if not isinstance(value, _ZodRef):
                    callee = base.value if base.kind == "ident" and index == 0 else "(...)"
                    raise self.unsupported(
                        f"{callee}(...)", op.line, f"{_describe_value(value)} cannot be called"
                    )
                value = self.call_factory(value, op.items, op.line)
            index += 1
        return value

    def get_property(self, value: Any, name: str, line: int) -> Any:
        if isinstance(value, _ZodRef):
            return value.child(name)
        if (
            isinstance(value, _Schema)
            and name == "shape"
            and value.kind == "object"
            and not value.wrapped
        ):
            return self.register(dict(zip(value.keys, value.children, strict=True)), line)
        raise self.unsupported(
            f".{name}", line, f"properties of {_describe_value(value)} are not supported"
        )

    def call_method(self, value: Any, name: str, arg_nodes: tuple, line: int) -> Any:
        if isinstance(value, _ZodRef):
            return self.call_factory(value.child(name), arg_nodes, line)
        construct = f".{name}(...)"
        if not isinstance(value, _Schema):
            raise self.unsupported(
                construct, line, f"it is called on {_describe_value(value)}, not on a zod schema"
            )
        allowed = _methods_for(value)
        if name not in allowed:
            raise self.unsupported(
                construct,
                line,
                f"supported on {_kind_label(value)} schema: "
                + ", ".join(f".{m}()" for m in allowed),
            )
        args = [self.eval(a) for a in arg_nodes]
        result = self.method(value, name, args, line, construct)
        return self.checked(result, line)

    def call_factory(self, ref: _ZodRef, arg_nodes: tuple, line: int) -> Any:
        handler = _FACTORIES.get(ref.path)
        construct = f"{ref.display}(...)"
        if handler is None:
            raise self.unsupported(construct, line, f"supported: {_SUPPORTED_FACTORIES}")
        args = [self.eval(a) for a in arg_nodes]
        result = getattr(self, handler)(ref.path, args, line, construct)
        return self.checked(result, line)

    def checked(self, schema: _Schema, line: int) -> _Schema:
        if schema.depth > MAX_NESTING:
            raise self.fail(
                f"the schema is nested too deeply (more than {MAX_NESTING} levels)",
                line,
                "nesting",
            )
        if schema.size > MAX_SCHEMA_NODES:
            raise self.fail(
                f"the schema is too large once inlined (more than {MAX_SCHEMA_NODES} nodes)",
                line,
                "size",
            )
        return schema

    # ---- argument helpers ----------------------------------------------------------------------

    def arity(self, args: list, lo: int, hi: int, line: int, construct: str) -> None:
        if not lo <= len(args) <= hi:
            expected = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.fail(
                f"{construct} takes {expected} argument(s), got {len(args)}", line, construct
            )

    def want_schema(self, value: Any, line: int, construct: str, what: str = "") -> _Schema:
        if not isinstance(value, _Schema):
            raise self.fail(
                f"{construct} expects a zod schema{what}, got {_describe_value(value)}",
                line,
                construct,
            )
        return value

    def want_shape(self, value: Any, line: int, construct: str) -> dict[str, _Schema]:
        if not isinstance(value, dict):
            raise self.fail(
                f"{construct} expects an object of zod schemas, got {_describe_value(value)}",
                line,
                construct,
            )
        for key, item in value.items():
            if not isinstance(item, _Schema):
                raise self.fail(
                    f'{construct}: key "{key}" is {_describe_value(item)}, not a zod schema',
                    line,
                    construct,
                )
        return value

    def want_mask(self, value: Any, line: int, construct: str, keys: tuple[str, ...]) -> list[str]:
        if not isinstance(value, dict) or not all(v is True for v in value.values()):
            raise self.fail(f"{construct} expects an object like {{ key: true }}", line, construct)
        for key in value:
            if key not in keys:
                raise self.fail(f'{construct}: unknown key "{key}"', line, construct)
        return list(value)

    def want_number(self, value: Any, line: int, construct: str) -> int | float:
        if not _is_number(value):
            raise self.fail(
                f"{construct} expects a number, got {_describe_value(value)}", line, construct
            )
        return value

    def want_count(self, value: Any, line: int, construct: str) -> int:
        if not _is_number(value) or value < 0 or value != int(value):
            raise self.fail(
                f"{construct} expects a non-negative integer, got {value!r}", line, construct
            )
        return int(value)

    def want_strings(self, value: Any, line: int, construct: str) -> list[str]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{construct} expects a non-empty array of strings", line, construct)
        return list(value)

    def want_json(self, value: Any, line: int, construct: str) -> Any:
        if not self.measure(value)[2]:
            raise self.fail(
                f"{construct} expects a JSON value, got {_describe_value(value)}", line, construct
            )
        return value

    def params(self, args: list, start: int, line: int, construct: str) -> dict[str, Any]:
        """The optional trailing params object of a factory; returns meta (description)."""
        if len(args) <= start:
            return {}
        self.arity(args, start, start + 1, line, construct)
        value = args[start]
        if isinstance(value, str):
            return {}
        if not isinstance(value, dict) or not set(value) <= _PARAM_KEYS:
            raise self.fail(
                f"{construct}: unsupported parameters {_describe_value(value)} "
                f"(supported keys: {', '.join(sorted(_PARAM_KEYS))})",
                line,
                construct,
            )
        description = value.get("description")
        if description is None:
            return {}
        if not isinstance(description, str):
            raise self.fail(f"{construct}: description must be a string", line, construct)
        return {"description": description}

    def check_options(self, args: list, start: int, line: int, construct: str) -> None:
        """Accept and ignore the optional message argument of a check (`"msg"` or `{message}`)."""
        self.arity(args, start, start + 1, line, construct)
        if len(args) == start:
            return
        value = args[start]
        if isinstance(value, str):
            return
        if not isinstance(value, dict) or not set(value) <= _CHECK_OPTION_KEYS:
            raise self.fail(
                f"{construct}: unsupported options {_describe_value(value)} "
                f"(supported keys: {', '.join(sorted(_CHECK_OPTION_KEYS))})",
                line,
                construct,
            )

    # ---- factories ------------------------------------------------------------------------------

    def object_schema(
        self, shape: dict[str, _Schema], extra: Any, meta: dict[str, Any] | None = None
    ) -> _Schema:
        return _Schema(
            "object",
            keys=tuple(shape),
            children=tuple(shape.values()),
            extra=extra,
            meta=meta or {},
        )

    def _f_object(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 2, line, construct)
        shape = self.want_shape(args[0], line, construct) if args else {}
        extra = {"strictObject": "strict", "looseObject": "passthrough"}.get(path, "strip")
        return self.object_schema(shape, extra, self.params(args, 1, line, construct))

    def _f_leaf(self, path: str, args: list, line: int, construct: str) -> _Schema:
        kind, keywords = _LEAVES[path]
        meta = self.params(args, 0, line, construct)
        return _Schema(kind, keywords=dict(keywords), meta=meta)

    def _f_array(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        item = self.want_schema(args[0], line, construct)
        return _Schema("array", children=(item,), meta=self.params(args, 1, line, construct))

    def _f_tuple(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 3, line, construct)
        if not isinstance(args[0], list):
            raise self.fail(f"{construct} expects an array of zod schemas", line, construct)
        items = tuple(self.want_schema(v, line, construct) for v in args[0])
        rest = None
        start = 1
        if len(args) > 1 and isinstance(args[1], _Schema):
            rest = args[1]
            start = 2
        meta = self.params(args, start, line, construct)
        return _Schema("tuple", children=items, extra=rest, meta=meta)

    def _f_enum(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        values = self.want_strings(args[0], line, construct)
        return self.enum_schema(values, self.params(args, 1, line, construct))

    @staticmethod
    def enum_schema(values: list[str], meta: dict[str, Any] | None = None) -> _Schema:
        return _Schema(
            "enum",
            keywords={"type": "string", "enum": list(values)},
            meta=meta or {},
            own_size=1 + len(values),
        )

    def _f_literal(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        value = args[0]
        meta = self.params(args, 1, line, construct)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise self.fail(f"{construct} needs at least one value", line, construct)
        types = []
        for item in values:
            json_type = _literal_type(item)
            if json_type is None:
                raise self.fail(
                    f"{construct} expects a string, number, boolean or null, got "
                    f"{_describe_value(item)}",
                    line,
                    construct,
                )
            types.append(json_type)
        if isinstance(value, list):
            keywords: dict[str, Any] = {"enum": list(values)}
            if len(set(types)) == 1:
                keywords = {"type": types[0], **keywords}
        else:
            keywords = {"type": types[0], "const": value}
        return _Schema("literal", keywords=keywords, meta=meta, own_size=1 + len(values))

    def _f_union(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        options = self.want_options(args[0], line, construct)
        return _Schema("union", children=options, meta=self.params(args, 1, line, construct))

    def want_options(self, value: Any, line: int, construct: str) -> tuple[_Schema, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                f"{construct} expects a non-empty array of zod schemas", line, construct
            )
        return tuple(self.want_schema(v, line, construct, " in the array") for v in value)

    def _f_discriminated_union(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 2, 3, line, construct)
        key = args[0]
        if not isinstance(key, str):
            raise self.fail(
                f"{construct} expects the discriminator key as its first argument",
                line,
                construct,
            )
        options = self.want_options(args[1], line, construct)
        for option in options:
            if option.kind != "object" or option.wrapped:
                raise self.fail(
                    f"{construct}: every option must be a z.object(...)", line, construct
                )
            if key not in option.keys:
                raise self.fail(
                    f'{construct}: an option has no discriminator key "{key}"', line, construct
                )
        return _Schema("union", children=options, meta=self.params(args, 2, line, construct))

    def _f_record(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 3, line, construct)
        if len(args) >= 2 and isinstance(args[1], _Schema):
            key = self.want_schema(args[0], line, construct)
            value = args[1]
            start = 2
        else:
            key = None
            value = self.want_schema(args[0], line, construct)
            start = 1
        meta = self.params(args, start, line, construct)
        names = None
        if key is not None:
            if key.kind == "enum" and not key.wrapped:
                names = {"enum": list(key.keywords["enum"])}
            elif key.kind != "string" or key.wrapped:
                raise self.fail(
                    f"{construct}: the key schema must be z.string() or z.enum([...]), got "
                    f"{_describe_value(key)}",
                    line,
                    construct,
                )
        return _Schema("record", children=(value,), extra=names, meta=meta)

    def _f_wrap(self, path: str, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        inner = self.want_schema(args[0], line, construct)
        return self.method(inner, path, [], line, construct)

    # ---- methods --------------------------------------------------------------------------------

    def method(self, s: _Schema, name: str, args: list, line: int, construct: str) -> _Schema:
        handler = getattr(self, f"_m_{name}", None)
        if handler is not None:
            return handler(s, args, line, construct)
        if s.kind == "string" and name in _STRING_FORMATS:
            self.check_options(args, 0, line, construct)
            return self.constrain(s, "format", _STRING_FORMATS[name])
        if name in ("trim", "finite"):
            self.check_options(args, 0, line, construct)
            return s
        raise self.unsupported(construct, line, "not implemented")  # pragma: no cover

    # common

    def _m_optional(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        return replace(s, opt_self=True, wrapped=True)

    def _m_nullable(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        return _Schema("nullable", children=(s,))

    def _m_nullish(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        return replace(_Schema("nullable", children=(s,)), opt_self=True, wrapped=True)

    def _m_default(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        value = self.want_json(args[0], line, construct)
        size = self.measure(value)[1]
        return replace(
            s,
            meta={**s.meta, "default": value},
            default_self=True,
            wrapped=True,
            own_size=s.own_size + size,
        )

    def _m_describe(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        if not isinstance(args[0], str):
            raise self.fail(f"{construct} expects a string", line, construct)
        return replace(s, meta={**s.meta, "description": args[0]})

    def _m_meta(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        value = args[0]
        if not isinstance(value, dict):
            raise self.fail(f"{construct} expects an object", line, construct)
        self.want_json(value, line, construct)
        extra = {k: v for k, v in value.items() if k != "id"}
        return replace(s, meta={**s.meta, **extra}, own_size=s.own_size + self.measure(value)[1])

    def _m_array(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        return _Schema("array", children=(s,))

    def _m_or(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        other = self.want_schema(args[0], line, construct)
        if s.kind == "union" and not s.meta and not s.wrapped:
            return _Schema("union", children=(*s.children, other))
        return _Schema("union", children=(s, other))

    def _m_readonly(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        return replace(s, wrapped=True)

    # string / number / array bounds

    def bound(self, s: _Schema, key: str, value: Any, *, lower: bool) -> _Schema:
        keywords = dict(s.keywords)
        if key in keywords:
            value = max(keywords[key], value) if lower else min(keywords[key], value)
        keywords[key] = value
        return replace(s, keywords=keywords)

    def constrain(self, s: _Schema, key: str, value: Any) -> _Schema:
        keywords = dict(s.keywords)
        if key not in keywords:
            keywords[key] = value
        elif keywords[key] != value:
            keywords["allOf"] = [*keywords.get("allOf", []), {key: value}]
        return replace(s, keywords=keywords)

    def size_bound(self, s: _Schema, args: list, line: int, construct: str, lower: bool) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        self.check_options(args, 1, line, construct)
        if s.kind == "number":
            number = self.want_number(args[0], line, construct)
            return self.bound(s, "minimum" if lower else "maximum", number, lower=lower)
        count = self.want_count(args[0], line, construct)
        prefix = "min" if lower else "max"
        key = f"{prefix}Length" if s.kind == "string" else f"{prefix}Items"
        return self.bound(s, key, count, lower=lower)

    def _m_min(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.size_bound(s, args, line, construct, lower=True)

    def _m_max(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.size_bound(s, args, line, construct, lower=False)

    def _m_length(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.size_bound(
            self.size_bound(s, args, line, construct, True), args, line, construct, False
        )

    def _m_nonempty(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.check_options(args, 0, line, construct)
        key = "minLength" if s.kind == "string" else "minItems"
        return self.bound(s, key, 1, lower=True)

    def _m_regex(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        self.check_options(args, 1, line, construct)
        regex = args[0]
        if not isinstance(regex, _Regex):
            raise self.fail(
                f"{construct} expects a regular expression literal /.../", line, construct
            )
        bad_flags = sorted(set(regex.flags) - _REGEX_FLAGS_OK)
        if bad_flags:
            literal = f"/{regex.source}/{regex.flags}"
            raise self.unsupported(
                literal,
                line,
                f"the regex flag(s) {''.join(bad_flags)} cannot be expressed by a JSON Schema "
                "pattern; rewrite the pattern without them",
            )
        try:
            re.compile(regex.source)
        except (re.error, RecursionError, OverflowError) as exc:
            raise self.unsupported(
                f"/{regex.source}/",
                line,
                f"this regular expression cannot be used as a JSON Schema pattern here: {exc}",
            ) from None
        return self.constrain(s, "pattern", regex.source)

    def _m_int(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.check_options(args, 0, line, construct)
        return replace(s, keywords={**s.keywords, "type": "integer"})

    def number_check(
        self, s: _Schema, args: list, line: int, construct: str, key: str, lower: bool
    ) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        self.check_options(args, 1, line, construct)
        return self.bound(s, key, self.want_number(args[0], line, construct), lower=lower)

    def _m_gt(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, args, line, construct, "exclusiveMinimum", True)

    def _m_gte(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, args, line, construct, "minimum", True)

    def _m_lt(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, args, line, construct, "exclusiveMaximum", False)

    def _m_lte(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, args, line, construct, "maximum", False)

    def _m_positive(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, [0, *args], line, construct, "exclusiveMinimum", True)

    def _m_nonnegative(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, [0, *args], line, construct, "minimum", True)

    def _m_negative(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, [0, *args], line, construct, "exclusiveMaximum", False)

    def _m_nonpositive(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.number_check(s, [0, *args], line, construct, "maximum", False)

    def _m_multipleOf(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        self.check_options(args, 1, line, construct)
        step = self.want_number(args[0], line, construct)
        if step <= 0:
            raise self.fail(f"{construct} expects a positive number", line, construct)
        return self.constrain(s, "multipleOf", step)

    _m_step = _m_multipleOf

    # objects

    def want_object(self, s: _Schema, line: int, construct: str) -> None:
        if s.kind != "object" or s.wrapped:
            raise self.fail(
                f"{construct} expects a z.object(...), got {_describe_value(s)}", line, construct
            )

    def shape_of(self, s: _Schema) -> dict[str, _Schema]:
        return dict(zip(s.keys, s.children, strict=True))

    def with_shape(self, s: _Schema, shape: dict[str, _Schema], extra: Any = None) -> _Schema:
        return replace(
            s,
            keys=tuple(shape),
            children=tuple(shape.values()),
            extra=s.extra if extra is None else extra,
        )

    def _m_extend(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        shape = self.shape_of(s)
        shape.update(self.want_shape(args[0], line, construct))
        return self.with_shape(s, shape)

    def _m_merge(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        other = self.want_schema(args[0], line, construct)
        self.want_object(other, line, construct)
        shape = self.shape_of(s)
        shape.update(self.shape_of(other))
        return self.with_shape(s, shape, other.extra)

    def optionality(
        self, s: _Schema, args: list, line: int, construct: str, optional: bool
    ) -> _Schema:
        self.arity(args, 0, 1, line, construct)
        shape = self.shape_of(s)
        keys = self.want_mask(args[0], line, construct, s.keys) if args else list(shape)
        for key in keys:
            shape[key] = replace(shape[key], opt_self=optional, wrapped=optional)
        return self.with_shape(s, shape)

    def _m_partial(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.optionality(s, args, line, construct, True)

    def _m_required(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.optionality(s, args, line, construct, False)

    def _m_pick(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        shape = self.shape_of(s)
        keys = self.want_mask(args[0], line, construct, s.keys)
        return self.with_shape(s, {k: shape[k] for k in keys})

    def _m_omit(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        drop = set(self.want_mask(args[0], line, construct, s.keys))
        return self.with_shape(s, {k: v for k, v in self.shape_of(s).items() if k not in drop})

    def unknown_keys(self, s: _Schema, args: list, line: int, construct: str, mode: str) -> _Schema:
        self.check_options(args, 0, line, construct)
        return replace(s, extra=mode)

    def _m_strict(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.unknown_keys(s, args, line, construct, "strict")

    def _m_strip(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.unknown_keys(s, args, line, construct, "strip")

    def _m_passthrough(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.unknown_keys(s, args, line, construct, "passthrough")

    def _m_catchall(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        return replace(s, extra=self.want_schema(args[0], line, construct))

    def _m_keyof(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 0, 0, line, construct)
        if not s.keys:
            raise self.fail(f"{construct} of an object without keys", line, construct)
        return self.enum_schema(list(s.keys))

    # enums and tuples

    def enum_subset(self, s: _Schema, args: list, line: int, construct: str, keep: bool) -> _Schema:
        self.arity(args, 1, 2, line, construct)
        values = self.want_strings(args[0], line, construct)
        current = s.keywords["enum"]
        for value in values:
            if value not in current:
                raise self.fail(f'{construct}: "{value}" is not in the enum', line, construct)
        remaining = [v for v in current if (v in values) == keep]
        if not remaining:
            raise self.fail(f"{construct} leaves no values", line, construct)
        return self.enum_schema(remaining, dict(s.meta))

    def _m_extract(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.enum_subset(s, args, line, construct, True)

    def _m_exclude(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        return self.enum_subset(s, args, line, construct, False)

    def _m_rest(self, s: _Schema, args: list, line: int, construct: str) -> _Schema:
        self.arity(args, 1, 1, line, construct)
        return replace(s, extra=self.want_schema(args[0], line, construct))


def _js_number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(value)
