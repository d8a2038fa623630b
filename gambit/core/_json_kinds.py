"""What kind of JSON value a Python value is: the JSON Schema type name, and the words an error
message uses for it ("must be a string, not an array"). One table for the loader, the JSON
Schema checks, deck modules, the built-in tools and the zod reader."""

from __future__ import annotations

from typing import Any

# (Python types, JSON Schema type, words in a message); bool before int, which it subclasses
_KINDS: tuple[tuple[type | tuple[type, ...], str, str], ...] = (
    (bool, "boolean", "a boolean"),
    (int, "integer", "a number"),
    (float, "number", "a number"),
    (str, "string", "a string"),
    ((list, tuple), "array", "an array"),
    (dict, "object", "an object"),
)


def json_type(value: Any) -> str | None:
    """The JSON Schema type of `value` ("integer" for an int, "number" for a float), or None
    for a value JSON has no type for."""
    if value is None:
        return "null"
    for types, name, _words in _KINDS:
        if isinstance(value, types):
            return name
    return None


def kind_words(value: Any, *, dict_words: str = "an object") -> str:
    """ "a boolean", "a number", "a string", "an array", "an object" (`dict_words`: a TOML
    file calls it "a table") or "null"; another value by its Python type's name."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return dict_words
    for types, _name, words in _KINDS:
        if isinstance(value, types):
            return words
    return type(value).__name__
