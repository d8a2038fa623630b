"""A cursor over the token list, shared by the expression parser and the statement reader.

Look ahead (`peek`), consume (`next`, `accept`, `expect`), and skip what the translator reads
past without evaluating: type annotations, type declarations and the rest of an expression
that is already known to be unsupported (`skip_balanced`).
"""

from __future__ import annotations

from ._errors import _FileErrors
from ._lexer import _Tok

# A skipped type or expression ends before one of these when it starts a line (no semicolon).
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
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


class _Cursor(_FileErrors):
    def __init__(self, toks: list[_Tok], file: str):
        super().__init__(file)
        self.toks = toks
        self.i = 0

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
