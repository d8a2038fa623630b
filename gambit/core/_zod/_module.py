"""A schema file as a module: its statements, its bindings, and the schema it exports.

`_SchemaFile.translate()` reads the file statement by statement:

- imports: only zod can be imported (`_ZOD_SOURCE` lists the accepted module names); each value
  binding becomes a `_ZodRef` in the evaluator's `env` (`z`, or a named factory such as
  `string`); type-only imports from anywhere are skipped;
- `const`/`let`/`var` declarations: the initializer is parsed and evaluated at once, so a
  constant can only use zod and the constants above it, and an error in an unused constant is
  still reported;
- exports: `export default <expr>`, `export const`, `export { A as default }`; type statements
  (`type`, `interface`, `export type ...`) are skipped.

At the end (`result`) it picks the schema (the default export, or else the only exported
schema) and renders it to JSON Schema.
"""

from __future__ import annotations

import re
from typing import Any

from ._cursor import _CLOSE
from ._errors import ZodTranslationError
from ._evaluate import _Evaluator
from ._lexer import _Lexer
from ._parser import _ExpressionParser
from ._schema import _render, _Schema
from ._values import _describe_value, _ZodRef

# The module names that mean zod: bare, npm: and jsr: specifiers with an optional version and
# /v3 or /v4 subpath, and the usual CDN URLs.
_ZOD_SOURCE = re.compile(
    r"(?:npm:|jsr:)?(?:@zod/)?zod(?:@[\w.^~<>=*|-]*)?(?:/v[34](?:/classic)?)?"
    r"|https://(?:deno\.land/x|esm\.sh|cdn\.skypack\.dev)/zod(?:@[\w.^~-]*)?(?:/[\w./-]*)?"
)


class _SchemaFile(_ExpressionParser):
    def __init__(self, source: str, file: str):
        super().__init__(_Lexer(source, file).tokens(), file)
        self.ev = _Evaluator(file)
        self.exports: dict[str, tuple[Any, int]] = {}  # exported name -> (value, line)
        self.export_lists: list[tuple[str, str, int]] = []  # `export { a as b }`: (a, b, line)
        self.default: tuple[Any, int] | None = None  # (value, line) of the default export

    def translate(self) -> dict:
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
        self.ev.zod_imported = True
        for local, imported in bindings:
            if local in self.ev.env:
                raise self.fail(f'"{local}" is declared twice', line, local)
            if imported in ("*", "default", "z"):
                self.ev.env[local] = _ZodRef(local, "")
            else:
                self.ev.env[local] = _ZodRef(local, imported)

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
            value = self.ev.eval(node)
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
            value = self.ev.eval(node)
            if name in self.ev.env:
                raise self.fail(f'"{name}" is declared twice', name_tok.line, name)
            self.ev.env[name] = value
            if exported:
                self.exports[name] = (value, name_tok.line)
            if not self.accept(","):
                break
        self.end_statement()

    def result(self) -> dict:
        for local, exported, line in self.export_lists:
            if local not in self.ev.env:
                raise self.fail(f'exported name "{local}" is not defined', line, local)
            if exported == "default":
                self.set_default(self.ev.env[local], line)
            else:
                self.exports[exported] = (self.ev.env[local], line)
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
