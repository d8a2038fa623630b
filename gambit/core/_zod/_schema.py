"""`_Schema`: one Zod schema as an immutable value, and its rendering to JSON Schema.

The evaluator builds `_Schema` values bottom-up (factories and methods return new ones; values
are shared, never mutated). Each knows its depth, its size once inlined and whether it accepts
a missing value, so that limits and `required` lists are decided without walking the tree.
`_render` turns the default export into the JSON Schema dict at the very end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class _Schema:
    """One Zod schema, rendered lazily to JSON Schema (values are immutable and shared)."""

    kind: str  # string number boolean null any unknown enum literal array tuple object record union nullable
    keywords: dict[str, Any] = field(default_factory=dict)
    children: tuple[_Schema, ...] = ()
    keys: tuple[str, ...] = ()  # object: property names, parallel to `children`
    extra: Any = (
        None  # object: "strip"|"strict"|"passthrough"|_Schema; tuple: rest; record: propertyNames
    )
    meta: dict[str, Any] = field(default_factory=dict)  # description, default, ...
    opt_self: bool = False  # `.optional()` was applied to this schema
    default_self: bool = False  # `.default(v)` was applied
    wrapped: bool = False  # ZodOptional/ZodDefault/ZodReadonly: only the common methods remain
    own_size: int = 1
    depth: int = field(init=False)
    size: int = field(init=False)
    optional: bool = field(init=False)  # accepts a missing value because of `.optional()`
    undefined_ok: bool = field(init=False)  # accepts a missing value at all (not required)

    def __post_init__(self) -> None:
        subs = list(self.children)
        if isinstance(self.extra, _Schema):
            subs.append(self.extra)
        depth = 1 + max((s.depth for s in subs), default=0)
        size = self.own_size + sum(s.size for s in subs)
        optional = self.opt_self
        undefined_ok = self.opt_self or self.default_self or self.kind in ("any", "unknown")
        if self.kind in ("union", "nullable"):
            optional = optional or any(c.optional for c in self.children)
            undefined_ok = undefined_ok or any(c.undefined_ok for c in self.children)
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "optional", optional)
        object.__setattr__(self, "undefined_ok", undefined_ok)


def _copy_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    return value


def _render(s: _Schema) -> dict:
    kind = s.kind
    if kind == "object":
        props: dict[str, Any] = {}
        required: list[str] = []
        for key, child in zip(s.keys, s.children, strict=True):
            props[key] = _render(child)
            if not child.undefined_ok:
                required.append(key)
        out: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        extra = s.extra
        out["additionalProperties"] = (
            _render(extra) if isinstance(extra, _Schema) else extra == "passthrough"
        )
    elif kind == "array":
        out = {"type": "array", "items": _render(s.children[0]), **_copy_json(s.keywords)}
    elif kind == "tuple":
        items = [_render(c) for c in s.children]
        needed = 0
        for index, child in enumerate(s.children):
            if not child.undefined_ok:
                needed = index + 1
        out = {"type": "array", "prefixItems": items, "minItems": needed}
        if isinstance(s.extra, _Schema):
            out["items"] = _render(s.extra)
        else:
            out["maxItems"] = len(items)
    elif kind == "union":
        out = {"anyOf": [_render(c) for c in s.children]}
    elif kind == "nullable":
        out = {"anyOf": [_render(s.children[0]), {"type": "null"}]}
    elif kind == "record":
        out = {"type": "object"}
        if s.extra is not None:
            out["propertyNames"] = _copy_json(s.extra)
        out["additionalProperties"] = _render(s.children[0])
    else:
        out = _copy_json(s.keywords)
    for key, value in s.meta.items():
        out[key] = _copy_json(value)
    return out


_KIND_LABELS = {
    "string": "a string",
    "number": "a number",
    "boolean": "a boolean",
    "null": "a null",
    "any": "an any",
    "unknown": "an unknown",
    "enum": "an enum",
    "literal": "a literal",
    "array": "an array",
    "tuple": "a tuple",
    "object": "an object",
    "record": "a record",
    "union": "a union",
    "nullable": "a nullable",
}


def _kind_label(s: _Schema) -> str:
    if s.wrapped:
        return "an optional/default/readonly"
    return _KIND_LABELS.get(s.kind, f"a {s.kind}")


def _enum_schema(values: list[str], meta: dict[str, Any] | None = None) -> _Schema:
    """`z.enum(values)`; also what `.keyof()`, `.extract()` and `.exclude()` return."""
    return _Schema(
        "enum",
        keywords={"type": "string", "enum": list(values)},
        meta=meta or {},
        own_size=1 + len(values),
    )
