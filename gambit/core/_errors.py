"""Errors and diagnostics shared by the loader and the runtime.

Every problem a deck author can cause carries the file it is in, the key where there is one,
and a hint saying how to fix it. The loader collects problems instead of stopping at the
first, then raises one `DeckLoadError` holding all of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One error or warning about a deck file."""

    message: str
    file: str | None = None
    key: str | None = None
    hint: str | None = None
    severity: Severity = "error"
    line: int | None = None

    def render(self) -> str:
        """One human line: `file[:line]: [key] message (hint)`."""
        where = self.file or "<unknown file>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        text = f"{where}: "
        if self.key:
            text += f"{self.key}: "
        text += self.message
        if self.hint:
            text += f" (fix: {self.hint})"
        return text

    def to_json(self) -> dict[str, str | None]:
        message = self.message
        if self.key:
            message = f"{self.key}: {message}"
        if self.hint:
            message = f"{message} (fix: {self.hint})"
        if self.line is not None:
            message = f"line {self.line}: {message}"
        return {"message": message, "file": self.file}


class GambitError(Exception):
    """Base class of every error this project raises on purpose."""


class DeckError(GambitError):
    """A deck (or a file it references) cannot be used.

    `file` is always set: it names the file the first problem is in.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str,
        key: str | None = None,
        hint: str | None = None,
        line: int | None = None,
    ):
        self.problem = Problem(message=message, file=file, key=key, hint=hint, line=line)
        self.file = file
        self.key = key
        self.hint = hint
        self.line = line
        super().__init__(self.problem.render())

    @property
    def problems(self) -> list[Problem]:
        return [self.problem]


class DeckLoadError(DeckError):
    """Loading found one or more errors; `problems` lists all of them (warnings included)."""

    def __init__(self, problems: list[Problem]):
        errors = [p for p in problems if p.severity == "error"]
        if not errors:
            raise ValueError("DeckLoadError needs at least one error")
        self.all_problems = list(problems)
        first = errors[0]
        super().__init__(
            first.message,
            file=first.file or "<unknown file>",
            key=first.key,
            hint=first.hint,
            line=first.line,
        )
        lines = [p.render() for p in errors]
        if len(lines) > 1:
            self.args = (f"{len(lines)} problems:\n  " + "\n  ".join(lines),)

    @property
    def problems(self) -> list[Problem]:
        return [p for p in self.all_problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.all_problems if p.severity == "warning"]


@dataclass
class Diagnostics:
    """Collects problems while loading a deck tree."""

    problems: list[Problem] = field(default_factory=list)
    strict: bool = False
    _seen: set[tuple] = field(default_factory=set)

    def error(
        self,
        message: str,
        *,
        file: str | None,
        key: str | None = None,
        hint: str | None = None,
        line: int | None = None,
    ) -> None:
        self._add(Problem(message, file, key, hint, "error", line))

    def warn(
        self, message: str, *, file: str | None, key: str | None = None, hint: str | None = None
    ) -> None:
        self._add(Problem(message, file, key, hint, "warning"))

    def deprecated(
        self, message: str, *, file: str | None, key: str | None = None, hint: str | None = None
    ) -> None:
        """A deprecated form: a warning below 1.0, an error under --strict (the 1.0 rules)."""
        self._add(Problem(message, file, key, hint, "error" if self.strict else "warning"))

    def _add(self, problem: Problem) -> None:
        ident = (problem.message, problem.file, problem.key, problem.severity, problem.line)
        if ident in self._seen:
            return
        self._seen.add(ident)
        self.problems.append(problem)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise DeckLoadError(self.problems)


def read_text_file(path: str | os.PathLike[str], error: Callable[..., Exception], what: str) -> str:
    """A UTF-8 file's text; else `error(message, file=path)` saying why, with the file
    called `what` ("state file", "trace file")."""
    name = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} not found", file=name) from None
    except IsADirectoryError:
        raise error(f"is a directory, not a {what}", file=name) from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text ({exc.reason})", file=name) from None
    except OSError as exc:
        raise error(f"cannot read {what} ({exc.strerror or exc})", file=name) from None
