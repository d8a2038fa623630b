"""The values an expression can evaluate to, and how messages name them.

Besides plain Python values for JSON literals (str, int, float, bool, None, list, dict) and
`_Schema` (see `_schema.py`), an expression can evaluate to:

- `_Regex`: a regular expression literal `/source/flags` (only `.regex()` takes one);
- `_UNDEFINED`: JavaScript's `undefined`;
- `_ZodRef`: a reference into the zod namespace (`z`, `z.iso`, `z.string` before the call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._json_kinds import json_type, kind_words
from ._schema import _kind_label, _Schema


@dataclass(frozen=True, slots=True)
class _Regex:
    """A JavaScript regular expression literal, kept as its source and flags."""

    source: str
    flags: str


class _Undefined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"


_UNDEFINED = _Undefined()


@dataclass(frozen=True, slots=True)
class _ZodRef:
    """A reference into the zod namespace: `z` itself (path ""), `z.iso`, `z.string`, ..."""

    display: str  # how the source spells it, for messages
    path: str

    def child(self, name: str) -> _ZodRef:
        return _ZodRef(f"{self.display}.{name}", f"{self.path}.{name}" if self.path else name)


def _describe_value(value: Any) -> str:
    if isinstance(value, _Schema):
        return f"{_kind_label(value)} schema"
    if isinstance(value, _ZodRef):
        return f"{value.display} (not called)"
    if value is _UNDEFINED:
        return "undefined"
    if isinstance(value, _Regex):
        return "a regular expression"
    return kind_words(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _literal_type(value: Any) -> str | None:
    """The JSON type of a z.literal() value: a string, number, boolean or null; else None."""
    json_type_name = json_type(value)
    return None if json_type_name in ("array", "object") else json_type_name
