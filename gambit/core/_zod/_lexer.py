"""Source text → tokens (`_Lexer.tokens()`), with 1-based lines for error messages.

A small JavaScript/TypeScript tokenizer: names, strings (with escapes, and template literals
without substitutions), numbers, regex literals, punctuation, and comments skipped. Each token
records whether it starts a line, which the parser needs for automatic semicolon insertion.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ._errors import _FileErrors
from ._values import _Regex


@dataclass(frozen=True, slots=True)
class _Tok:
    """One token of a `.zod.ts` file."""

    kind: str  # "name", "str", "num", "regex", "punct", "eof"
    value: Any
    line: int
    nl_before: bool  # the token is the first on its line
    text: str


_WS = re.compile(r"[ \t\r\n\f\v\u00a0\ufeff\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_NAME = re.compile(r"(?:[^\W\d]|\$)[\w$]*")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+"
    r"|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?"
)
_PUNCT3 = ("...", "===", "!==", "**=")
_PUNCT2 = ("=>", "?.", "??", "==", "!=", "&&", "||", "++", "--", "**", "+=", "-=")
_PUNCT1 = frozenset("{}()[];,.:=<>?!+-*/%&|^~@#")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
# After these tokens a `/` starts a regex literal; elsewhere it is the division operator.
_REGEX_AFTER_PUNCT = frozenset(
    ["(", ",", "[", "=", ":", "{", "}", ";", "!", "&", "|", "?", "=>", "&&", "||", "??", "+", "-"]
)
_REGEX_AFTER_NAME = frozenset(["return", "typeof", "case", "in", "of", "new", "delete", "void"])


class _Lexer(_FileErrors):
    def __init__(self, src: str, file: str):
        super().__init__(file)
        self.src = src

    def tokens(self) -> list[_Tok]:
        src, n = self.src, len(self.src)
        toks: list[_Tok] = []
        i, line, nl = 0, 1, True
        if src.startswith("\ufeff"):
            i = 1
        if src.startswith("#!", i):
            end = src.find("\n", i)
            i = n if end < 0 else end
        while i < n:
            c = src[i]
            m = _WS.match(src, i)
            if m:
                count = m.group().count("\n")
                if count:
                    line += count
                    nl = True
                i = m.end()
                continue
            if src.startswith("//", i):
                end = src.find("\n", i)
                i = n if end < 0 else end
                continue
            if src.startswith("/*", i):
                end = src.find("*/", i + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment", line)
                count = src.count("\n", i, end)
                if count:
                    line += count
                    nl = True
                i = end + 2
                continue
            start_line = line
            if c in "\"'`":
                value, i, line = self._string(i, line)
                toks.append(_Tok("str", value, start_line, nl, src[i - 1 : i]))
            elif (m := _NAME.match(src, i)) is not None:
                toks.append(_Tok("name", m.group(), line, nl, m.group()))
                i = m.end()
            elif c in "0123456789" or (c == "." and src[i + 1 : i + 2].isdecimal()):
                m = _NUMBER.match(src, i)
                if m is None:  # a non-ASCII digit
                    raise self.fail(f"unexpected character {c!r}", line)
                text = m.group()
                i = m.end()
                if src.startswith("n", i):
                    raise self.fail("BigInt literals are not supported", line, construct=text + "n")
                toks.append(_Tok("num", self._number(text, line), line, nl, text))
            elif c == "/" and self._regex_allowed(toks):
                regex, text, i = self._regex(i, line)
                toks.append(_Tok("regex", regex, line, nl, text))
            else:
                for candidate in (src[i : i + 3], src[i : i + 2], c):
                    if (
                        candidate in _PUNCT3
                        or candidate in _PUNCT2
                        or (len(candidate) == 1 and candidate in _PUNCT1)
                    ):
                        toks.append(_Tok("punct", candidate, line, nl, candidate))
                        i += len(candidate)
                        break
                else:
                    raise self.fail(f"unexpected character {c!r}", line)
            nl = False
        toks.append(_Tok("eof", None, line, True, ""))
        return toks

    @staticmethod
    def _regex_allowed(toks: list[_Tok]) -> bool:
        if not toks:
            return True
        prev = toks[-1]
        if prev.kind == "punct":
            return prev.value in _REGEX_AFTER_PUNCT
        return prev.kind == "name" and prev.value in _REGEX_AFTER_NAME

    def _number(self, text: str, line: int) -> int | float:
        digits = text.replace("_", "")
        try:
            if digits[:2].lower() in ("0x", "0b", "0o"):
                value: float = float(int(digits[2:], {"x": 16, "b": 2, "o": 8}[digits[1].lower()]))
            else:
                value = float(digits)
        except (ValueError, OverflowError):
            raise self.fail(f"invalid number {text!r}", line, construct=text) from None
        if not math.isfinite(value):
            raise self.fail(f"number {text!r} is out of range", line, construct=text)
        if value.is_integer() and abs(value) <= 2**53:
            return int(value)
        return value

    def _string(self, i: int, line: int) -> tuple[str, int, int]:
        src, n = self.src, len(self.src)
        quote = src[i]
        start_line = line
        out: list[str] = []
        j = i + 1
        while True:
            if j >= n:
                raise self.fail("unterminated string literal", start_line)
            ch = src[j]
            if ch == quote:
                j += 1
                break
            if ch == "\\":
                j += 1
                if j >= n:
                    raise self.fail("unterminated string literal", start_line)
                e = src[j]
                if e == "\r" and src.startswith("\r\n", j):
                    j += 1
                    e = "\n"
                if e in "\n\u2028\u2029":
                    if e == "\n":
                        line += 1
                    j += 1
                    continue
                if e == "u" and src.startswith("{", j + 1):
                    end = src.find("}", j + 2)
                    digits = src[j + 2 : end] if end > 0 else ""
                    if not 1 <= len(digits) <= 6 or not set(digits) <= _HEX:
                        raise self.fail("invalid \\u{...} escape in a string", line)
                    code = int(digits, 16)
                    if code > 0x10FFFF:
                        raise self.fail("invalid \\u{...} escape in a string", line)
                    out.append(chr(code))
                    j = end + 1
                    continue
                if e in "xu":  # \xHH and \uHHHH: exactly 2 or 4 hex digits
                    width = 2 if e == "x" else 4
                    digits = src[j + 1 : j + 1 + width]
                    if len(digits) != width or not set(digits) <= _HEX:
                        raise self.fail(f"invalid \\{e} escape in a string", line)
                    out.append(chr(int(digits, 16)))
                    j += 1 + width
                    continue
                out.append(_ESCAPES.get(e, e))
                j += 1
                continue
            if ch == "\n":
                if quote != "`":
                    raise self.fail("unterminated string literal", start_line)
                line += 1
            elif ch == "$" and quote == "`" and src.startswith("${", j):
                raise self.fail(
                    'unsupported zod construct "${...}" (template literals with substitutions '
                    "are not static; use a plain string)",
                    line,
                    construct="${...}",
                )
            out.append(ch)
            j += 1
        text = "".join(out)
        try:  # join UTF-16 surrogate pairs written as two \u escapes
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        except UnicodeError:  # pragma: no cover - defensive
            pass
        return text, j, line

    def _regex(self, i: int, line: int) -> tuple[_Regex, str, int]:
        src, n = self.src, len(self.src)
        j = i + 1
        in_class = False
        while True:
            if j >= n or src[j] in "\r\n":
                raise self.fail("unterminated regular expression literal", line)
            ch = src[j]
            if ch == "\\":
                j += 2
                continue
            if ch == "[":
                in_class = True
            elif ch == "]":
                in_class = False
            elif ch == "/" and not in_class:
                break
            j += 1
        body = src[i + 1 : j]
        j += 1
        k = j
        while k < n and (src[k].isascii() and src[k].isalpha()):
            k += 1
        flags = src[j:k]
        return _Regex(body, flags), src[i:k], k
