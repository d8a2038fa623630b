"""Tokens → an expression tree (`_Node`), by recursive descent.

`_ExpressionParser.expr()` reads one expression: literals, identifiers, array and object
literals, member access (`a.b`) and calls (`f(...)`), so that `z.string().min(1)` becomes
call(member(call(member(ident z, "string")), "min"), [lit 1]). It does not evaluate anything;
`_evaluate.py` does that.

Constructs that are valid TypeScript but cannot be evaluated statically (arrow functions,
`new Date()`, operators, spreads, computed keys, ...) are skipped and become a `"bad"` node
carrying the construct and the reason. The evaluator raises that error when it reaches the node,
so the whole expression is parsed first: a syntax error later in the same expression is
reported instead. Type syntax (`as T`, `satisfies T`, `f<T>(...)`, `x!`) is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._cursor import _CLOSE, _OPEN, _Cursor
from ._errors import MAX_NESTING
from ._lexer import _Tok
from ._values import _UNDEFINED

# An operator after a value makes the expression non-static: it becomes a "bad" node.
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


@dataclass(frozen=True, slots=True, eq=False)
class _Node:
    """One node of a parsed zod expression."""

    # "lit", "ident", "regex", "array", "object", "member", "call", "bad"
    kind: str
    line: int
    value: Any = None  # literal value, identifier, member name, or (construct, message)
    obj: _Node | None = None  # member object / call callee
    items: tuple = ()  # array elements, call arguments, object entries (key, node)


class _ExpressionParser(_Cursor):
    def __init__(self, toks: list[_Tok], file: str):
        super().__init__(toks, file)
        self.depth = 0  # of nested expr() calls, bounded by MAX_NESTING

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


def _js_number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(value)
