"""How deep a JSON value may nest where it enters a run: a context or message, a saved state,
a model's tool arguments. Validating, tracing and saving walk values recursively, so a value
nested deeper than MAX_VALUE_DEPTH is refused with the limit named instead of exhausting
Python's recursion (a RecursionError that names nothing)."""

from __future__ import annotations

from typing import Any

MAX_VALUE_DEPTH = 256  # levels of JSON nesting (an array or an object is one level)


def json_depth(value: Any, stop: int) -> int:
    """Nesting depth of a JSON value, counted without recursion (stops counting at `stop`)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > deepest:
            deepest = depth
            if deepest >= stop:
                return deepest
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list | tuple):
            pending.extend((child, depth + 1) for child in item)
    return deepest


def too_deep(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """True when `value` nests more than `limit` levels."""
    return json_depth(value, limit + 1) > limit
