"""Zod methods (`schema.min(1)`, `.optional()`, `.extend({...})`, ...) as functions on `_Schema`.

Each method is a function `(ev, s, args, line, construct) -> _Schema`: `ev` is the evaluator
(for argument checks and errors, see `_arguments.py`), `s` the schema the method is called on,
`args` the evaluated arguments and `construct` the spelling for messages (`".min(...)"`). It
returns a new schema; schemas are never changed in place.

Which methods a schema has depends on its kind (`_METHODS`, plus `_COMMON_METHODS` for every
schema; after `.optional()`, `.default()` or `.readonly()` only the common ones remain, as in
Zod). `_apply_method` dispatches through `_METHOD_HANDLERS`; string formats (`.email()`, ...),
`.trim()` and `.finite()` need no function of their own.

`.describe()` and `.default()` apply to the schema they are called on: after `.nullable()` they
sit on the `anyOf` wrapper, before it on the inner branch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from ._arguments import _Arguments
from ._schema import _enum_schema, _Schema
from ._values import _Regex

_COMMON_METHODS = (
    "optional",
    "nullable",
    "nullish",
    "default",
    "describe",
    "meta",
    "array",
    "or",
    "readonly",
)
_METHODS: dict[str, tuple[str, ...]] = {
    "string": (
        "min",
        "max",
        "length",
        "nonempty",
        "email",
        "url",
        "uuid",
        "regex",
        "datetime",
        "date",
        "time",
        "trim",
    ),
    "number": (
        "int",
        "min",
        "max",
        "gt",
        "gte",
        "lt",
        "lte",
        "positive",
        "nonnegative",
        "negative",
        "nonpositive",
        "multipleOf",
        "step",
        "finite",
    ),
    "array": ("min", "max", "length", "nonempty"),
    "object": (
        "extend",
        "merge",
        "partial",
        "required",
        "pick",
        "omit",
        "strict",
        "passthrough",
        "strip",
        "catchall",
        "keyof",
    ),
    "enum": ("extract", "exclude"),
    "tuple": ("rest",),
}
_STRING_FORMATS = {
    "email": "email",
    "url": "uri",
    "uuid": "uuid",
    "datetime": "date-time",
    "date": "date",
    "time": "time",
}
_REGEX_FLAGS_OK = frozenset("gud")


def _methods_for(s: _Schema) -> tuple[str, ...]:
    if s.wrapped:
        return _COMMON_METHODS
    return _METHODS.get(s.kind, ()) + _COMMON_METHODS


def _apply_method(
    ev: _Arguments, s: _Schema, name: str, args: list, line: int, construct: str
) -> _Schema:
    handler = _METHOD_HANDLERS.get(name)
    if handler is not None:
        return handler(ev, s, args, line, construct)
    if s.kind == "string" and name in _STRING_FORMATS:
        ev.check_options(args, 0, line, construct)
        return _constrain(s, "format", _STRING_FORMATS[name])
    if name in ("trim", "finite"):
        ev.check_options(args, 0, line, construct)
        return s
    raise ev.unsupported(construct, line, "not implemented")  # pragma: no cover


# ---- every schema (_COMMON_METHODS) ------------------------------------------------------------


def _m_optional(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    return replace(s, opt_self=True, wrapped=True)


def _m_nullable(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    return _Schema("nullable", children=(s,))


def _m_nullish(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    return replace(_Schema("nullable", children=(s,)), opt_self=True, wrapped=True)


def _m_default(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    value = ev.want_json(args[0], line, construct)
    size = ev.measure(value)[1]
    return replace(
        s,
        meta={**s.meta, "default": value},
        default_self=True,
        wrapped=True,
        own_size=s.own_size + size,
    )


def _m_describe(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    if not isinstance(args[0], str):
        raise ev.fail(f"{construct} expects a string", line, construct)
    return replace(s, meta={**s.meta, "description": args[0]})


def _m_meta(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    value = args[0]
    if not isinstance(value, dict):
        raise ev.fail(f"{construct} expects an object", line, construct)
    ev.want_json(value, line, construct)
    extra = {k: v for k, v in value.items() if k != "id"}
    return replace(s, meta={**s.meta, **extra}, own_size=s.own_size + ev.measure(value)[1])


def _m_array(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    return _Schema("array", children=(s,))


def _m_or(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    other = ev.want_schema(args[0], line, construct)
    if s.kind == "union" and not s.meta and not s.wrapped:
        return _Schema("union", children=(*s.children, other))
    return _Schema("union", children=(s, other))


def _m_readonly(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    return replace(s, wrapped=True)


# ---- strings, numbers and arrays: bounds, formats, patterns ------------------------------------


def _bound(s: _Schema, key: str, value: Any, *, lower: bool) -> _Schema:
    keywords = dict(s.keywords)
    if key in keywords:
        value = max(keywords[key], value) if lower else min(keywords[key], value)
    keywords[key] = value
    return replace(s, keywords=keywords)


def _constrain(s: _Schema, key: str, value: Any) -> _Schema:
    keywords = dict(s.keywords)
    if key not in keywords:
        keywords[key] = value
    elif keywords[key] != value:
        keywords["allOf"] = [*keywords.get("allOf", []), {key: value}]
    return replace(s, keywords=keywords)


def _size_bound(
    ev: _Arguments, s: _Schema, args: list, line: int, construct: str, lower: bool
) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    ev.check_options(args, 1, line, construct)
    if s.kind == "number":
        number = ev.want_number(args[0], line, construct)
        return _bound(s, "minimum" if lower else "maximum", number, lower=lower)
    count = ev.want_count(args[0], line, construct)
    prefix = "min" if lower else "max"
    key = f"{prefix}Length" if s.kind == "string" else f"{prefix}Items"
    return _bound(s, key, count, lower=lower)


def _m_min(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _size_bound(ev, s, args, line, construct, lower=True)


def _m_max(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _size_bound(ev, s, args, line, construct, lower=False)


def _m_length(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _size_bound(
        ev, _size_bound(ev, s, args, line, construct, True), args, line, construct, False
    )


def _m_nonempty(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.check_options(args, 0, line, construct)
    key = "minLength" if s.kind == "string" else "minItems"
    return _bound(s, key, 1, lower=True)


def _m_regex(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    ev.check_options(args, 1, line, construct)
    regex = args[0]
    if not isinstance(regex, _Regex):
        raise ev.fail(f"{construct} expects a regular expression literal /.../", line, construct)
    bad_flags = sorted(set(regex.flags) - _REGEX_FLAGS_OK)
    if bad_flags:
        literal = f"/{regex.source}/{regex.flags}"
        raise ev.unsupported(
            literal,
            line,
            f"the regex flag(s) {''.join(bad_flags)} cannot be expressed by a JSON Schema "
            "pattern; rewrite the pattern without them",
        )
    try:
        re.compile(regex.source)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ev.unsupported(
            f"/{regex.source}/",
            line,
            f"this regular expression cannot be used as a JSON Schema pattern here: {exc}",
        ) from None
    return _constrain(s, "pattern", regex.source)


def _m_int(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.check_options(args, 0, line, construct)
    return replace(s, keywords={**s.keywords, "type": "integer"})


def _number_check(
    ev: _Arguments, s: _Schema, args: list, line: int, construct: str, key: str, lower: bool
) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    ev.check_options(args, 1, line, construct)
    return _bound(s, key, ev.want_number(args[0], line, construct), lower=lower)


def _m_gt(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, args, line, construct, "exclusiveMinimum", True)


def _m_gte(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, args, line, construct, "minimum", True)


def _m_lt(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, args, line, construct, "exclusiveMaximum", False)


def _m_lte(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, args, line, construct, "maximum", False)


def _m_positive(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, [0, *args], line, construct, "exclusiveMinimum", True)


def _m_nonnegative(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, [0, *args], line, construct, "minimum", True)


def _m_negative(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, [0, *args], line, construct, "exclusiveMaximum", False)


def _m_nonpositive(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _number_check(ev, s, [0, *args], line, construct, "maximum", False)


def _m_multipleOf(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    ev.check_options(args, 1, line, construct)
    step = ev.want_number(args[0], line, construct)
    if step <= 0:
        raise ev.fail(f"{construct} expects a positive number", line, construct)
    return _constrain(s, "multipleOf", step)


# ---- objects -----------------------------------------------------------------------------------


def _shape_of(s: _Schema) -> dict[str, _Schema]:
    return dict(zip(s.keys, s.children, strict=True))


def _with_shape(s: _Schema, shape: dict[str, _Schema], extra: Any = None) -> _Schema:
    return replace(
        s,
        keys=tuple(shape),
        children=tuple(shape.values()),
        extra=s.extra if extra is None else extra,
    )


def _m_extend(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    shape = _shape_of(s)
    shape.update(ev.want_shape(args[0], line, construct))
    return _with_shape(s, shape)


def _m_merge(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    other = ev.want_schema(args[0], line, construct)
    ev.want_object(other, line, construct)
    shape = _shape_of(s)
    shape.update(_shape_of(other))
    return _with_shape(s, shape, other.extra)


def _optionality(
    ev: _Arguments, s: _Schema, args: list, line: int, construct: str, optional: bool
) -> _Schema:
    ev.arity(args, 0, 1, line, construct)
    shape = _shape_of(s)
    keys = ev.want_mask(args[0], line, construct, s.keys) if args else list(shape)
    for key in keys:
        shape[key] = replace(shape[key], opt_self=optional, wrapped=optional)
    return _with_shape(s, shape)


def _m_pick(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    shape = _shape_of(s)
    keys = ev.want_mask(args[0], line, construct, s.keys)
    return _with_shape(s, {k: shape[k] for k in keys})


def _m_omit(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    drop = set(ev.want_mask(args[0], line, construct, s.keys))
    return _with_shape(s, {k: v for k, v in _shape_of(s).items() if k not in drop})


def _unknown_keys(
    ev: _Arguments, s: _Schema, args: list, line: int, construct: str, mode: str
) -> _Schema:
    ev.check_options(args, 0, line, construct)
    return replace(s, extra=mode)


def _m_strict(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _unknown_keys(ev, s, args, line, construct, "strict")


def _m_strip(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _unknown_keys(ev, s, args, line, construct, "strip")


def _m_passthrough(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    return _unknown_keys(ev, s, args, line, construct, "passthrough")


def _m_catchall(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    return replace(s, extra=ev.want_schema(args[0], line, construct))


def _m_keyof(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 0, 0, line, construct)
    if not s.keys:
        raise ev.fail(f"{construct} of an object without keys", line, construct)
    return _enum_schema(list(s.keys))


# ---- enums and tuples --------------------------------------------------------------------------


def _enum_subset(
    ev: _Arguments, s: _Schema, args: list, line: int, construct: str, keep: bool
) -> _Schema:
    ev.arity(args, 1, 2, line, construct)
    values = ev.want_strings(args[0], line, construct)
    current = s.keywords["enum"]
    for value in values:
        if value not in current:
            raise ev.fail(f'{construct}: "{value}" is not in the enum', line, construct)
    remaining = [v for v in current if (v in values) == keep]
    if not remaining:
        raise ev.fail(f"{construct} leaves no values", line, construct)
    return _enum_schema(remaining, dict(s.meta))


def _m_rest(ev: _Arguments, s: _Schema, args: list, line: int, construct: str) -> _Schema:
    ev.arity(args, 1, 1, line, construct)
    return replace(s, extra=ev.want_schema(args[0], line, construct))


# ---- dispatch ----------------------------------------------------------------------------------

# Method name -> function; string formats, `.trim()` and `.finite()` are handled in `_apply_method`.
_METHOD_HANDLERS: dict[str, Callable[..., _Schema]] = {
    "optional": _m_optional,
    "nullable": _m_nullable,
    "nullish": _m_nullish,
    "default": _m_default,
    "describe": _m_describe,
    "meta": _m_meta,
    "array": _m_array,
    "or": _m_or,
    "readonly": _m_readonly,
    "min": _m_min,
    "max": _m_max,
    "length": _m_length,
    "nonempty": _m_nonempty,
    "regex": _m_regex,
    "int": _m_int,
    "gt": _m_gt,
    "gte": _m_gte,
    "lt": _m_lt,
    "lte": _m_lte,
    "positive": _m_positive,
    "nonnegative": _m_nonnegative,
    "negative": _m_negative,
    "nonpositive": _m_nonpositive,
    "multipleOf": _m_multipleOf,
    "step": _m_multipleOf,
    "extend": _m_extend,
    "merge": _m_merge,
    "pick": _m_pick,
    "omit": _m_omit,
    "strict": _m_strict,
    "strip": _m_strip,
    "passthrough": _m_passthrough,
    "catchall": _m_catchall,
    "keyof": _m_keyof,
    "rest": _m_rest,
    # one function, two methods each
    "partial": partial(_optionality, optional=True),
    "required": partial(_optionality, optional=False),
    "extract": partial(_enum_subset, keep=True),
    "exclude": partial(_enum_subset, keep=False),
}
