"""Typed values read from front-matter tables: strings, booleans, numbers and tables.

Each reader returns the value, or None after reporting "must be ..., not <what it is>" at
the key; a missing key is None without a problem.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Iterable
from typing import Any

from .._json_kinds import kind_words
from .load import Load


def opt_str(load: Load, table: dict[str, Any], key: str, file: str, prefix: str = "") -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        load.diag.error(f"must be a string, not {type_name(value)}", file=file, key=prefix + key)
        return None
    return value


def opt_bool(
    load: Load, table: dict[str, Any], key: str, file: str, prefix: str = ""
) -> bool | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        load.diag.error(
            f"must be true or false, not {type_name(value)}",
            file=file,
            key=prefix + key,
            hint=f"{key} = true",
        )
        return None
    return value


def opt_number(
    load: Load,
    table: dict[str, Any],
    key: str,
    file: str,
    prefix: str,
    *,
    integer: bool = False,
    minimum: float | None = None,
) -> Any:
    value = table.get(key)
    if value is None:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or (isinstance(value, float) and not math.isfinite(value)):
        kind = "a whole number" if integer else "a finite number"
        # A number is shown as written (`not nan`, `not 0.5`): "not a number" would say nothing.
        shown = (
            repr(value)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else type_name(value)
        )
        example = f"{key} = {_example(minimum if (minimum or 0) > 0 else None, integer)}"
        load.diag.error(
            f"must be {kind}, not {shown}", file=file, key=prefix + key, hint=f"e.g. {example}"
        )
        return None
    if minimum is not None and value < minimum:
        load.diag.error(
            f"must be at least {minimum:g}, not {value}",
            file=file,
            key=prefix + key,
            hint=f"e.g. {key} = {_example(minimum, integer)}",
        )
        return None
    return value


def _example(minimum: float | None, integer: bool) -> str:
    """A value an author can paste: the minimum when there is one, else a plain number."""
    if minimum is not None:
        return f"{int(minimum) if integer or float(minimum).is_integer() else minimum:g}"
    return "1" if integer else "0.7"


def table(load: Load, value: Any, file: str, key: str) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        load.diag.error(
            f"must be a table, not {type_name(value)}",
            file=file,
            key=key,
            hint=f"write it as [{key}]",
        )
        return None
    return value


def type_name(value: Any) -> str:
    """What a TOML value is, in an error message (a TOML object is a table)."""
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return "a date/time"
    return kind_words(value, dict_words="a table")


def non_json_paths(value: Any, path: str) -> list[tuple[str, str]]:
    """Dotted paths of values JSON cannot carry (TOML dates and times, NaN, infinity)."""
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out.extend(non_json_paths(item, f"{path}.{key}"))
        return out
    if isinstance(value, list):
        out = []
        for index, item in enumerate(value):
            out.extend(non_json_paths(item, f"{path}.{index}"))
        return out
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return [(path, "TOML date/time")]
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, "non-finite number")]
    if value is None or isinstance(value, str | int | float | bool):
        return []
    return [(path, type(value).__name__)]


def flag_unknown_keys(
    report: Callable[..., None],
    keys: Iterable[str],
    known: tuple[str, ...],
    file: str,
    prefix: str,
    message: str,
    hint: str,
) -> None:
    """Report each of `keys` (a table's) that is not `known`, at `prefix` + the key, with
    `report`: `load.diag.warn` where an unknown key is ignored, `.error` where it is not."""
    for key in keys:
        if key not in known:
            report(message, file=file, key=prefix + key, hint=hint)


MAX_SUGGESTIONS = 50  # "did you mean" for the first unknown keys of a table


class Suggestions:
    """The closest known name to an unknown key, for a "did you mean" hint.

    Only the first MAX_SUGGESTIONS unknown keys of a table get one. Each takes difflib about
    0.1 ms, and front matter at its length bound can hold 10,000 unknown keys: a second of
    suggestions that nobody reads past the first few.
    """

    def __init__(self, known: Iterable[str]):
        self.known = sorted(known)
        self.left = MAX_SUGGESTIONS

    def closest(self, name: str) -> str | None:
        if self.left <= 0:
            return None
        self.left -= 1
        import difflib  # only for a deck with an unknown key: not worth 0.5 ms on every start

        close = difflib.get_close_matches(name, self.known, n=1)
        return close[0] if close else None
