"""The one error of the translator, and the limits that bound its work.

Every problem in a `.zod.ts` file, from an unterminated string to an unsupported method, is a
`ZodTranslationError` naming the file, the 1-based line and (when there is one) the construct.
The lexer, the parser and the evaluator build theirs through `_FileErrors`, which knows the file.
"""

from __future__ import annotations

from typing import Any

from .._errors import DeckError

MAX_NESTING = 64
MAX_SCHEMA_NODES = 20_000


class ZodTranslationError(DeckError):
    """A `.zod.ts` file uses something the static translator cannot express.

    `str(error)` is `"<file>:<line>: <message>"` (`"<file>: <message>"` when no line applies).
    `construct` names the offending construct (e.g. `".refine(...)"`) when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str,
        line: int | None = None,
        construct: str | None = None,
    ):
        super().__init__(message, file=file, line=line)
        self.message = message
        self.construct = construct

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}: {self.message}"

    def __reduce__(self) -> tuple[Any, tuple[str, str, int | None, str | None]]:
        return (_rebuild_error, (self.message, self.file, self.line, self.construct))


def _rebuild_error(
    message: str, file: str, line: int | None, construct: str | None
) -> ZodTranslationError:
    return ZodTranslationError(message, file=file, line=line, construct=construct)


class _FileErrors:
    """Builds the `ZodTranslationError`s of one file (a base of the lexer, parser and evaluator)."""

    def __init__(self, file: str):
        self.file = file

    def fail(
        self, message: str, line: int | None, construct: str | None = None
    ) -> ZodTranslationError:
        return ZodTranslationError(message, file=self.file, line=line, construct=construct)

    def unsupported(self, construct: str, line: int | None, why: str) -> ZodTranslationError:
        return self.fail(f'unsupported zod construct "{construct}" ({why})', line, construct)
