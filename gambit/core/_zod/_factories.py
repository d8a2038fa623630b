"""Zod factories (`z.object({...})`, `z.string()`, `z.enum([...])`, ...) as functions.

Each factory is a function `(ev, path, args, line, construct) -> _Schema`: `ev` is the evaluator
(argument checks and errors, see `_arguments.py`), `path` the factory's name in the zod
namespace (`"object"`, `"iso.date"`), `args` the evaluated arguments and `construct` the
spelling for messages (`"z.object(...)"`). `_FACTORIES` maps each supported path to its
function; any other `z.<name>(...)` is an error listing them (`_SUPPORTED_FACTORIES`).

The optional trailing "params" argument of a factory (`z.string({ description: "..." })`) is
read by `ev.params`: a description is kept, messages are accepted and ignored.
"""

from __future__ import annotations

from typing import Any

from ._arguments import _Arguments
from ._methods import _apply_method
from ._schema import _enum_schema, _Schema
from ._values import _describe_value, _literal_type

_LEAVES: dict[str, tuple[str, dict[str, Any]]] = {
    "string": ("string", {"type": "string"}),
    "number": ("number", {"type": "number"}),
    "int": ("number", {"type": "integer"}),
    "boolean": ("boolean", {"type": "boolean"}),
    "null": ("null", {"type": "null"}),
    "any": ("any", {}),
    "unknown": ("unknown", {}),
    "email": ("string", {"type": "string", "format": "email"}),
    "url": ("string", {"type": "string", "format": "uri"}),
    "uuid": ("string", {"type": "string", "format": "uuid"}),
    "iso.datetime": ("string", {"type": "string", "format": "date-time"}),
    "iso.date": ("string", {"type": "string", "format": "date"}),
    "iso.time": ("string", {"type": "string", "format": "time"}),
}


def _object_schema(
    shape: dict[str, _Schema], extra: Any, meta: dict[str, Any] | None = None
) -> _Schema:
    return _Schema(
        "object",
        keys=tuple(shape),
        children=tuple(shape.values()),
        extra=extra,
        meta=meta or {},
    )


def _f_object(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 2, line, construct)
    shape = ev.want_shape(args[0], line, construct) if args else {}
    extra = {"strictObject": "strict", "looseObject": "passthrough"}.get(path, "strip")
    return _object_schema(shape, extra, ev.params(args, 1, line, construct))


def _f_leaf(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    kind, keywords = _LEAVES[path]
    meta = ev.params(args, 0, line, construct)
    return _Schema(kind, keywords=dict(keywords), meta=meta)


def _f_array(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    item = ev.want_schema(args[0], line, construct)
    return _Schema("array", children=(item,), meta=ev.params(args, 1, line, construct))


def _f_tuple(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 3, line, construct)
    if not isinstance(args[0], list):
        raise ev.fail(f"{construct} expects an array of zod schemas", line, construct)
    items = tuple(ev.want_schema(v, line, construct) for v in args[0])
    rest = None
    start = 1
    if len(args) > 1 and isinstance(args[1], _Schema):
        rest = args[1]
        start = 2
    meta = ev.params(args, start, line, construct)
    return _Schema("tuple", children=items, extra=rest, meta=meta)


def _f_enum(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    values = ev.want_strings(args[0], line, construct)
    return _enum_schema(values, ev.params(args, 1, line, construct))


def _f_literal(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    value = args[0]
    meta = ev.params(args, 1, line, construct)
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ev.fail(f"{construct} needs at least one value", line, construct)
    types = []
    for item in values:
        json_type = _literal_type(item)
        if json_type is None:
            raise ev.fail(
                f"{construct} expects a string, number, boolean or null, got "
                f"{_describe_value(item)}",
                line,
                construct,
            )
        types.append(json_type)
    if isinstance(value, list):
        keywords: dict[str, Any] = {"enum": list(values)}
        if len(set(types)) == 1:
            keywords = {"type": types[0], **keywords}
    else:
        keywords = {"type": types[0], "const": value}
    return _Schema("literal", keywords=keywords, meta=meta, own_size=1 + len(values))


def _f_union(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    options = ev.want_options(args[0], line, construct)
    return _Schema("union", children=options, meta=ev.params(args, 1, line, construct))


def _f_discriminated_union(
    ev: _Arguments, path: str, args: list, line: int, construct: str
) -> _Schema:
    ev.arity(args, 2, 3, line, construct)
    key = args[0]
    if not isinstance(key, str):
        raise ev.fail(
            f"{construct} expects the discriminator key as its first argument",
            line,
            construct,
        )
    options = ev.want_options(args[1], line, construct)
    for option in options:
        if option.kind != "object" or option.wrapped:
            raise ev.fail(f"{construct}: every option must be a z.object(...)", line, construct)
        if key not in option.keys:
            raise ev.fail(
                f'{construct}: an option has no discriminator key "{key}"', line, construct
            )
    return _Schema("union", children=options, meta=ev.params(args, 2, line, construct))


def _f_record(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 3, line, construct)
    if len(args) >= 2 and isinstance(args[1], _Schema):
        key = ev.want_schema(args[0], line, construct)
        value = args[1]
        start = 2
    else:
        key = None
        value = ev.want_schema(args[0], line, construct)
        start = 1
    meta = ev.params(args, start, line, construct)
    names = None
    if key is not None:
        if key.kind == "enum" and not key.wrapped:
            names = {"enum": list(key.keywords["enum"])}
        elif key.kind != "string" or key.wrapped:
            raise ev.fail(
                f"{construct}: the key schema must be z.string() or z.enum([...]), got "
                f"{_describe_value(key)}",
                line,
                construct,
            )
    return _Schema("record", children=(value,), extra=names, meta=meta)


def _f_wrap(ev: _Arguments, path: str, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    inner = ev.want_schema(args[0], line, construct)
    return _apply_method(ev, inner, path, [], line, construct)


_FACTORIES = {
    "object": _f_object,
    "strictObject": _f_object,
    "looseObject": _f_object,
    "string": _f_leaf,
    "number": _f_leaf,
    "int": _f_leaf,
    "boolean": _f_leaf,
    "null": _f_leaf,
    "any": _f_leaf,
    "unknown": _f_leaf,
    "email": _f_leaf,
    "url": _f_leaf,
    "uuid": _f_leaf,
    "iso.datetime": _f_leaf,
    "iso.date": _f_leaf,
    "iso.time": _f_leaf,
    "array": _f_array,
    "tuple": _f_tuple,
    "enum": _f_enum,
    "literal": _f_literal,
    "union": _f_union,
    "discriminatedUnion": _f_discriminated_union,
    "record": _f_record,
    "optional": _f_wrap,
    "nullable": _f_wrap,
}
_SUPPORTED_FACTORIES = ", ".join(f"z.{name}" for name in _FACTORIES)
