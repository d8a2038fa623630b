"""The internal schema type: JSON Schema with Zod-like validation (docs/decks.md, "Schemas").

Every schema a deck uses (built-in `gambit://schemas/...` URIs, `.json` files, pydantic models,
translated `.zod.ts` files) becomes one `Schema`: a fully inlined JSON Schema dict (no `$ref`)
plus the place it came from.

Validation mirrors Zod's `parse`: the value is first *coerced* by walking it with the schema
(unknown keys of closed objects are stripped, defaults are filled in, union branches are tried
in order and the first that validates wins), then the coerced value is checked with
`jsonschema`'s Draft 2020-12 validator. Failures raise `SchemaValidationError`, whose text is
`Schema validation failed: <dotted path|(root)>: <message>`.

Conventions used in `Schema.json`:

- a closed object (`additionalProperties: false`) strips unknown keys, like `z.object`;
- an object whose `additionalProperties` is absent or `true` keeps unknown keys (passthrough);
- a record is an object whose `additionalProperties` is a schema (its values are coerced);
- `{}` accepts any value;
- `"x-gambit-optional": true` marks a schema that also accepts a missing value (`None`), like
  Zod's `.optional()` on a non-object schema (e.g. `plain_chat_input_optional`). Every
  `x-gambit-*` key is internal and is removed by `to_json_schema()` / `to_tool_parameters()`.

`allOf` is validated but not coerced (a one-element `allOf` is merged into its parent by
`schema_from_json`). Treat `Schema.json` as read-only: a `Schema` caches its validators.
"""

from __future__ import annotations

import copy
import dataclasses
import json as _json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._errors import GambitError
from ._json_kinds import json_type, kind_words

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "OPTIONAL_KEY",
    "Schema",
    "SchemaValidationError",
    "deep_compatibility_problems",
    "deep_match_problems",
    "schema_from_json",
    "schema_from_pydantic",
]

OPTIONAL_KEY = "x-gambit-optional"
# The most values (objects, arrays and scalars) a schema may hold, as written and once its
# `$ref`s are inlined (docs/decks.md, "Bounds"). Checking a schema against its metaschema
# takes about 60 microseconds a value, so this is about a second; it leaves room for a tool
# schema at OpenAI's cap of 5,000 properties with a type and a description each (about
# 15,000 values; https://platform.openai.com/docs/guides/structured-outputs#supported-schemas).
MAX_SCHEMA_VALUES = 20_000
_INTERNAL_PREFIX = "x-gambit-"

# Keys that do not change which values a schema accepts, or that the deep comparisons ignore
# (the deck format compares fields, types and requiredness; bounds and annotations may differ).
_IGNORED_FOR_COMPARISON = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$id",
        "$schema",
        "$anchor",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "contentMediaType",
        "contentEncoding",
        "discriminator",
    }
)


# ---------------------------------------------------------------------------------------------
# Errors


class SchemaValidationError(GambitError, ValueError):
    """A value does not match a schema.

    `path` is the dotted path of the first issue (`"session.messages.0.role"`), or `"(root)"`;
    `detail` is the validator's message. `str(e)` is
    `Schema validation failed: <path>: <detail>`.
    """

    def __init__(self, path: str, detail: str, *, source: str | None = None):
        self.path = path or "(root)"
        self.detail = detail
        self.source = source
        super().__init__(f"Schema validation failed: {self.path}: {detail}")


class _BranchError(SchemaValidationError):
    """Raised inside union coercion; carries the structured failure for branch ranking."""

    def __init__(self, failure: _Failure, source: str | None):
        super().__init__(_render_path(failure.path), failure.detail, source=source)
        self.failure = failure


def _render_path(parts: Iterable[Any]) -> str:
    """Dotted path; a segment starting with "[" (a union option) attaches without a dot."""
    text = ""
    for part in parts:
        part = str(part)
        text += part if (not text or part.startswith("[")) else "." + part
    return text or "(root)"


# ---------------------------------------------------------------------------------------------
# Walking subschemas

_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE_KEYS = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
)
_SCHEMA_LIST_KEYS = ("prefixItems", "anyOf", "oneOf", "allOf")


def _map_subschemas(schema: dict, fn: Callable[[Any], Any]) -> dict:
    """A shallow copy of `schema` with `fn` applied to every direct subschema."""
    out: dict = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        elif (key in _SCHEMA_LIST_KEYS or key == "items") and isinstance(value, list):
            # (`items` as a list is the draft-07 tuple form)
            out[key] = [fn(sub) for sub in value]
        elif key in _SCHEMA_ONE_KEYS and isinstance(value, dict | bool):
            out[key] = fn(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _strip_internal(schema: Any) -> Any:
    """Remove every `x-gambit-*` key, recursively (property *names* are left alone)."""
    if not isinstance(schema, dict):
        return copy.deepcopy(schema)
    cleaned = {k: v for k, v in schema.items() if not k.startswith(_INTERNAL_PREFIX)}
    return _map_subschemas(cleaned, _strip_internal)


def _close_objects(schema: Any) -> Any:
    """Give every object schema with `properties` and no `additionalProperties` a `false` one."""
    if not isinstance(schema, dict):
        return schema
    out = _map_subschemas(schema, _close_objects)
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _optional_as_nullable(schema: Any) -> Any:
    """The validation form of a schema: `x-gambit-optional` becomes `anyOf [schema, null]`."""
    if not isinstance(schema, dict):
        return schema
    if schema.get(OPTIONAL_KEY) is True:
        inner = {k: v for k, v in schema.items() if k not in (OPTIONAL_KEY, "default")}
        wrapper: dict = {"anyOf": [_optional_as_nullable(inner), {"type": "null"}]}
        if "default" in schema:
            wrapper["default"] = copy.deepcopy(schema["default"])
        return wrapper
    return _map_subschemas(schema, _optional_as_nullable)


# ---------------------------------------------------------------------------------------------
# The schema type


def _inferred_type(schema: dict) -> str | None:
    """The single JSON type a schema accepts, or None (union, any, or unknown)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        return declared[0] if len(declared) == 1 and isinstance(declared[0], str) else None
    values: list[Any] | None = None
    if "const" in schema:
        values = [schema["const"]]
    elif isinstance(schema.get("enum"), list) and schema["enum"]:
        values = schema["enum"]
    if values is not None:
        types = {json_type(v) for v in values}
        if types <= {"integer", "number"} and len(types) == 2:
            return "number"
        return types.pop() if len(types) == 1 else None
    if isinstance(schema.get("properties"), dict):
        return "object"
    return None


def _may_be(schema: dict, json_type: str) -> bool:
    declared = schema.get("type")
    if declared is None:
        return True
    if isinstance(declared, str):
        return declared == json_type or (json_type == "integer" and declared == "number")
    if isinstance(declared, list):
        return json_type in declared
    return False


def _copy_value(value: Any) -> Any:
    """A deep copy of a JSON-like value (tuples become lists)."""
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_value(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)


@dataclass(frozen=True)
class _Failure:
    """The best error found while trying a union branch."""

    path: tuple[Any, ...]
    detail: str
    mismatched_type: bool  # the branch rejected the value's type outright at its root
    missing: bool  # the error is about a missing key (weaker than one about a present value)
    count: int

    def rank(self) -> tuple:
        """Higher is better: deeper errors on values that are there mean a closer branch."""
        return (not self.mismatched_type, len(self.path), not self.missing, -self.count)


@dataclass(frozen=True)
class Schema:
    """A JSON Schema (fully inlined) and where it came from.

    `source` is a `gambit://schemas/...` URI or an absolute file path (possibly with a
    `#key` suffix naming where in the file the schema was declared).
    """

    json: dict
    source: str
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.json, dict):
            raise TypeError(f"Schema.json must be a dict, not {type(self.json).__name__}")

    def __hash__(self) -> int:
        return hash((_json.dumps(self.json, sort_keys=True, default=repr), self.source))

    # ---- shape -------------------------------------------------------------------------------

    @property
    def type(self) -> str | None:
        """The top-level JSON type ("object", "string", "array", ...); None for a union or any."""
        return _inferred_type(self.json)

    @property
    def is_object(self) -> bool:
        return self.type == "object"

    @property
    def is_string(self) -> bool:
        return self.type == "string"

    @property
    def is_optional(self) -> bool:
        """True when a missing value (None) is valid (`x-gambit-optional`)."""
        return self.json.get(OPTIONAL_KEY) is True

    def field_names(self) -> list[str]:
        """Property names of an object schema, in declaration order; [] otherwise."""
        props = self.json.get("properties")
        if not self.is_object or not isinstance(props, dict):
            return []
        return list(props)

    def has_field(self, name: str) -> bool:
        return name in self.field_names()

    def required_fields(self) -> list[str]:
        if not self.is_object:
            return []
        required = self.json.get("required")
        return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []

    # ---- export ------------------------------------------------------------------------------

    def to_json_schema(self) -> dict:
        """A clean copy without the internal `x-gambit-*` keys (structured output, payloads)."""
        return _strip_internal(self.json)

    @property
    def wraps_tool_input(self) -> bool:
        """True when `to_tool_parameters()` wraps this schema under an `input` property."""
        return not self.is_object

    def to_tool_parameters(self) -> dict:
        """A JSON Schema usable as function-tool `parameters` (which must be an object).

        Object schemas are returned as they are (minus `x-gambit-*` keys). Any other schema
        (string, array, union, any) is wrapped as
        `{"type": "object", "properties": {"input": <schema>}, "required": ["input"],
        "additionalProperties": false}` (`required` is empty when the schema is optional);
        `unwrap_tool_arguments()` takes the value back out of the model's arguments.
        """
        clean = self.to_json_schema()
        if not self.wraps_tool_input:
            return clean
        clean.pop("$schema", None)
        return {
            "type": "object",
            "properties": {"input": clean},
            "required": [] if self.is_optional else ["input"],
            "additionalProperties": False,
        }

    def unwrap_tool_arguments(self, arguments: Any) -> Any:
        """The value to validate from tool-call arguments built with `to_tool_parameters()`."""
        if self.wraps_tool_input and isinstance(arguments, dict):
            return arguments.get("input")
        return arguments

    # ---- fragments ---------------------------------------------------------------------------

    def merge_fragment(self, fragment: Schema) -> Schema:
        """Union of the fields of two object schemas; this schema's fields win on a conflict.

        Mirrors the TypeScript loader (`{...fragment.shape, ...base.shape}`): the fragment's
        fields come first, then this schema's other fields. A field's requiredness comes from
        the schema whose definition wins. The result keeps this schema's `additionalProperties`
        and annotations; its source is this schema's.
        """
        if not self.is_object:
            raise ValueError("base schema must be an object schema to merge fragments")
        if not fragment.is_object:
            raise ValueError("fragment schema must be an object schema to merge fragments")
        base_props = self.json.get("properties") or {}
        frag_props = fragment.json.get("properties") or {}
        base_required = set(self.required_fields())
        frag_required = set(fragment.required_fields())
        merged: dict[str, Any] = {}
        for name, sub in frag_props.items():
            merged[name] = base_props.get(name, sub)
        for name, sub in base_props.items():
            merged[name] = sub
        required = [
            name
            for name in merged
            if (name in base_required if name in base_props else name in frag_required)
        ]
        out = copy.deepcopy(
            {k: v for k, v in self.json.items() if k not in ("properties", "required")}
        )
        out["type"] = "object"
        out["properties"] = copy.deepcopy(merged)
        if required:
            out["required"] = required
        return Schema(json=out, source=self.source)

    # ---- validation --------------------------------------------------------------------------

    def validate(self, value: Any) -> Any:
        """Coerce then validate `value`; returns the coerced copy (the input is never mutated).

        Raises `SchemaValidationError` naming the dotted path of the first issue.
        """
        fast: Callable[[Any], Any] | Literal[False] | None = self._cache.get("fast")
        if fast is None:
            fast = self._cache["fast"] = _compile_fast(self._validation_json()) or False
        if fast:
            try:
                return fast(value)
            except _Unsure:
                pass  # invalid, or outside what the fast check knows: the full path decides
        return self._validate_fully(value)

    def _validate_fully(self, value: Any) -> Any:
        root = self._validation_json()
        value = _copy_value(value)
        if value is None and "default" in root:
            value = copy.deepcopy(root["default"])
        try:
            coerced = self._coerce(value, root, ())
        except _BranchError as exc:
            raise SchemaValidationError(exc.path, exc.detail, source=self.source) from None
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(root).iter_errors(coerced))
        if error is not None:
            failure = self._failure(error, ())
            raise SchemaValidationError(
                _render_path(failure.path), failure.detail, source=self.source
            )
        return coerced

    def is_valid(self, value: Any) -> bool:
        try:
            self.validate(value)
        except SchemaValidationError:
            return False
        return True

    def _validation_json(self) -> dict:
        cached = self._cache.get("validation_json")
        if cached is None:
            cached = _optional_as_nullable(self.json)
            self._cache["validation_json"] = cached
        return cached

    def _validator(self, schema: Any) -> Draft202012Validator:
        validators = self._cache.setdefault("validators", {})
        key = id(schema)
        entry = validators.get(key)
        if entry is None or entry[0] is not schema:
            from jsonschema import Draft202012Validator

            entry = (schema, Draft202012Validator(schema))
            validators[key] = entry
        return entry[1]

    @staticmethod
    def _failure(error: ValidationError, prefix: tuple[Any, ...]) -> _Failure:
        path = prefix + tuple(error.absolute_path)
        detail = error.message
        missing_key = False
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [
                name
                # set whenever `validator` is (the stub's Unset is the "not given" default)
                for name in (error.validator_value or [])  # type: ignore[union-attr]
                if isinstance(name, str) and name not in error.instance
            ]
            if missing:
                path = (*path, missing[0])
                missing_key = True
        mismatched = not error.absolute_path and error.validator in ("type", "const", "enum")
        return _Failure(path, detail, mismatched, missing_key, 1)

    def _coerce(self, value: Any, schema: Any, path: tuple[Any, ...]) -> Any:
        if not isinstance(schema, dict):
            return value
        if isinstance(value, dict) and _may_be(schema, "object"):
            value = self._coerce_object(value, schema, path)
        elif isinstance(value, list) and _may_be(schema, "array"):
            value = self._coerce_array(value, schema, path)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                value = self._pick_branch(value, branches, path)
        return value

    def _coerce_object(self, value: dict, schema: dict, path: tuple[Any, ...]) -> dict:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, dict) else {}
        extra = schema.get("additionalProperties", True)
        out: dict = {}
        for name, sub in props.items():
            if name in value:
                out[name] = self._coerce(value[name], sub, (*path, name))
            elif isinstance(sub, dict) and "default" in sub:
                out[name] = self._coerce(copy.deepcopy(sub["default"]), sub, (*path, name))
        for name, item in value.items():
            if name in props:
                continue
            matched = [sub for pattern, sub in patterns.items() if _search(pattern, name)]
            if matched:
                for sub in matched:
                    item = self._coerce(item, sub, (*path, name))
                out[name] = item
            elif extra is False:
                continue  # strip, like z.object()
            elif isinstance(extra, dict):
                out[name] = self._coerce(item, extra, (*path, name))
            else:
                out[name] = item
        return out

    def _coerce_array(self, value: list, schema: dict, path: tuple[Any, ...]) -> list:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items")
        out = []
        for index, item in enumerate(value):
            if index < len(prefix):
                out.append(self._coerce(item, prefix[index], (*path, index)))
            elif isinstance(items, dict):
                out.append(self._coerce(item, items, (*path, index)))
            else:
                out.append(item)
        return out

    def _pick_branch(self, value: Any, branches: list, path: tuple[Any, ...]) -> Any:
        """The first branch whose coerced value validates wins (Zod's union semantics)."""
        failures: list[_Failure] = []
        for branch in branches:
            try:
                candidate = self._coerce(value, branch, path)
            except _BranchError as exc:
                failures.append(exc.failure)
                continue
            errors = list(self._validator(branch).iter_errors(candidate))
            if not errors:
                return candidate
            from jsonschema.exceptions import best_match

            best = best_match(errors)
            assert best is not None
            failure = self._failure(best, path)
            failures.append(dataclasses.replace(failure, count=len(errors)))
        best_failure = max(failures, key=_Failure.rank)  # max() keeps the first on ties
        raise _BranchError(best_failure, self.source)


# ---------------------------------------------------------------------------------------------
# The fast path of `Schema.validate`
#
# Most schemas decks use are plain: typed objects, arrays and scalars. For those, coercing
# and checking a JSON value takes one walk over it instead of a copy, a coercing walk and a
# jsonschema pass (15-20 µs for a two-field object, a few times per action call). The fast
# check is compiled from schemas that use only the keywords below (and a number's bounds, and
# an additionalProperties schema made of them); it returns exactly what
# the full path returns for a value it accepts, and gives up (`_Unsure`) on anything else:
# an invalid value (the full path then reports the error), a type other than dict, list, str,
# int, float, bool or None, a key that is not a string.

_FAST_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "examples",
        "$comment",
        "$schema",
        "$id",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",  # an annotation: the validator is built without a format checker
    }
)
_FAST_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})


class _Unsure(Exception):
    """The fast check cannot vouch for a value; the full path decides."""


def _fast_copy(value: Any) -> Any:
    """What the full path makes of a value under `{}`: a deep copy (JSON values only)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unsure
            out[key] = _fast_copy(item)
        return out
    if kind is list:
        return [_fast_copy(item) for item in value]
    raise _Unsure


def _compile_fast(schema: Any) -> Callable[[Any], Any] | None:
    """The fast check of a schema, or None when it uses anything else than plain types,
    `properties`, `required`, a boolean `additionalProperties`, `items` and annotations."""
    if not isinstance(schema, dict):
        return None
    keys = {k for k in schema if k not in _FAST_ANNOTATIONS and not k.startswith(_INTERNAL_PREFIX)}
    kind = schema.get("type")
    if not keys:
        return _fast_copy
    if kind == "object":
        return _compile_fast_object(schema) if keys <= _FAST_OBJECT_KEYS else None
    if kind == "array":
        if not keys <= {"type", "items"}:
            return None
        item_check = _compile_fast(schema["items"]) if "items" in schema else _fast_copy
        if item_check is None:
            return None

        def check_array(value: Any) -> Any:
            if type(value) is not list:
                raise _Unsure
            return [item_check(item) for item in value]

        return check_array
    if kind in ("number", "integer") and keys - {"type"} <= _FAST_BOUNDS.keys():
        return _compile_fast_number(schema)
    if keys != {"type"}:
        return None
    return _FAST_SCALARS.get(kind) if isinstance(kind, str) else None


# A number's bounds, as Draft 2020-12 reads them: each keyword's test of an accepted value.
_FAST_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda value, bound: value >= bound,
    "maximum": lambda value, bound: value <= bound,
    "exclusiveMinimum": lambda value, bound: value > bound,
    "exclusiveMaximum": lambda value, bound: value < bound,
}


def _compile_fast_number(schema: dict) -> Callable[[Any], Any] | None:
    """A number or integer with bounds (a grader's score from -3 to 3)."""
    bounds = [(_FAST_BOUNDS[k], v) for k, v in schema.items() if k in _FAST_BOUNDS]
    if not all(type(bound) is int or type(bound) is float for _, bound in bounds):
        return None
    accepts_type = _FAST_SCALARS[schema["type"]]

    def check_number(value: Any) -> Any:
        accepts_type(value)
        for accepts, bound in bounds:
            if not accepts(value, bound):
                raise _Unsure
        return value

    return check_number


def _compile_fast_object(schema: dict) -> Callable[[Any], Any] | None:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (
        isinstance(props, dict)
        and isinstance(required, list)
        and all(isinstance(name, str) for name in required)
        and isinstance(extra, bool | dict)
    ):
        return None
    # Keys beyond `properties` are checked by the additionalProperties schema (a session's
    # `meta: {additionalProperties: {}}`), copied when it is `true`, refused when `false`.
    extra_check: Callable[[Any], Any] = _fast_copy
    if isinstance(extra, dict):
        compiled = _compile_fast(extra)
        if compiled is None:
            return None
        extra_check, extra = compiled, True
    checks = []
    for name, sub in props.items():
        check = _compile_fast(sub)
        if check is None:
            return None
        checks.append((name, check))

    def check_object(value: Any) -> Any:
        if type(value) is not dict:
            raise _Unsure
        # The full path's order: declared properties first, then the other keys (kept when
        # the object is open, stripped when it is closed).
        out = {}
        for name, check in checks:
            if name in value:
                out[name] = check(value[name])
        for name, item in value.items():
            if type(name) is not str:
                raise _Unsure
            if extra and name not in props:
                out[name] = extra_check(item)
        for name in required:
            if name not in out:
                raise _Unsure
        return out

    return check_object


def _fast_scalar(accepts: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not accepts(value):
            raise _Unsure
        return value

    return check


_FAST_SCALARS: dict[str, Callable[[Any], Any]] = {
    "string": _fast_scalar(lambda v: type(v) is str),
    # jsonschema's number and integer exclude bool; an integral float is an integer.
    "number": _fast_scalar(lambda v: type(v) is int or type(v) is float),
    "integer": _fast_scalar(lambda v: type(v) is int or (type(v) is float and v.is_integer())),
    "boolean": _fast_scalar(lambda v: type(v) is bool),
    "null": _fast_scalar(lambda v: v is None),
}


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except (re.error, TypeError):
        return False


# ---------------------------------------------------------------------------------------------
# Constructors


def _check_schema(json_schema: dict) -> None:
    import jsonschema  # imported on first use: a deck without schemas starts 40 ms sooner
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    dialect = json_schema.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        # validator_for looks it up in a table: a list or a table is unhashable there.
        raise ValueError(
            f"$schema must be a string (the URI of a JSON Schema draft), not "
            f"{kind_words(dialect)} (at the schema root)"
        )
    cls = jsonschema.validators.validator_for(json_schema, default=Draft202012Validator)
    try:
        cls.check_schema(json_schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)  # check_schema reports the best match
        raise ValueError(
            f"{exc.message} (at schema location #/{where})"
            if where
            else f"{exc.message} (at the schema root)"
        ) from None


def _resolve_pointer(root: dict, ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise ValueError(
            f"$ref {ref!r} is not supported: only references inside the same schema (#/...) "
            "can be inlined"
        )
    node: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ValueError(f"$ref {ref!r} points at nothing")
    return node


def check_schema_values(json_schema: dict) -> None:
    """Raise ValueError for a schema of more than MAX_SCHEMA_VALUES values, or with a key that
    is not a string (a Python dict can have one; JSON cannot).

    The values are counted as the validators will walk them: an object a Python module puts
    in two places counts twice. The count stops at the limit, so a module's dict that shares
    itself at every level (2**40 values to walk) is refused as fast as a small one is read.
    """
    count = 0
    pending: list[tuple[Any, str]] = [(json_schema, "")]
    while pending:
        node, path = pending.pop()
        count += 1
        if count > MAX_SCHEMA_VALUES:
            raise ValueError(f"the schema has more than {MAX_SCHEMA_VALUES:,} values")
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise ValueError(
                        f"key {key!r} must be a string, not {kind_words(key)} "
                        f"(at schema location #{path})"
                    )
                pending.append((value, f"{path}/{key}"))
        elif isinstance(node, list | tuple):
            pending.extend((item, f"{path}/{index}") for index, item in enumerate(node))


def _check_inlined_size(root: dict) -> None:
    """Raise ValueError when inlining the `$ref`s would give more than MAX_SCHEMA_VALUES values
    (or a `$ref` refers to itself).

    Each `$ref` target's inlined size is counted once and remembered, so a chain of
    definitions each using the one before twice (2**n values once inlined) is measured in
    n steps rather than walked 2**n times; the count stops at the limit.
    """
    sizes: dict[str, int] = {}

    def size(node: Any, stack: tuple[str, ...]) -> int:
        if isinstance(node, dict):
            total = 1
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref in stack:
                    _recursive_ref(ref, stack)
                if ref not in sizes:
                    sizes[ref] = size(_resolve_pointer(root, ref), (*stack, ref))
                total += sizes[ref]
            children: Iterable[Any] = (
                v for k, v in node.items() if k not in ("$ref", "$defs", "definitions")
            )
        elif isinstance(node, list):
            total, children = 1, iter(node)
        else:
            return 1
        for child in children:
            if total > MAX_SCHEMA_VALUES:
                break
            total += size(child, stack)
        if total > MAX_SCHEMA_VALUES:
            raise ValueError(
                f"the schema expands to more than {MAX_SCHEMA_VALUES:,} values once its "
                "$refs are inlined"
            )
        return total

    size(root, ())


def _recursive_ref(ref: str, stack: tuple[str, ...]) -> None:
    chain = " -> ".join((*stack[stack.index(ref) :], ref))
    raise ValueError(
        f"recursive $ref {ref!r} is not supported ({chain}): Gambit schemas are "
        "inlined, so they must not refer to themselves"
    )


def _inline_refs(root: dict) -> dict:
    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        for dynamic in ("$dynamicRef", "$recursiveRef"):
            if dynamic in node:
                raise ValueError(
                    f"{dynamic} is not supported (recursive schemas cannot be inlined)"
                )
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                _recursive_ref(ref, stack)
            target = walk(_resolve_pointer(root, ref), (*stack, ref))
            rest = walk({k: v for k, v in node.items() if k != "$ref"}, stack)
            if target is True:
                target = {}
            elif target is False:
                target = {"not": {}}
            return {**target, **rest}
        # Definitions are only reached through a $ref (unused ones are dropped unchecked).
        body = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        return _map_subschemas(body, lambda sub: walk(sub, stack))

    return walk(root, ())


def _modernise(schema: Any) -> Any:
    """Rewrite older-draft forms into their Draft 2020-12 equivalents.

    - tuple `items: [...]` (+ `additionalItems`) becomes `prefixItems` (+ `items`);
    - draft-04 boolean `exclusiveMinimum`/`exclusiveMaximum` become numbers;
    - a one-element `allOf` (older pydantic: `allOf: [{$ref}]` beside a description) is
      merged into its parent, so coercion (strip, defaults) sees through it.
    """
    if not isinstance(schema, dict):
        return schema
    out = _map_subschemas(schema, _modernise)
    if isinstance(out.get("items"), list):
        out["prefixItems"] = out.pop("items")
        if "additionalItems" in out:
            out["items"] = out.pop("additionalItems")
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(exclusive)
        if not isinstance(flag, bool):
            continue
        del out[exclusive]
        if flag and bound in out:
            out[exclusive] = out.pop(bound)
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        rest = {k: v for k, v in out.items() if k != "allOf"}
        if not set(rest) & (set(all_of[0]) - _IGNORED_FOR_COMPARISON):
            out = {**all_of[0], **rest}
    return out


def schema_from_json(json_schema: dict, *, source: str) -> Schema:
    """Normalise a JSON Schema dict into a `Schema`.

    The schema is checked against its metaschema (its `$schema`, Draft 2020-12 by default);
    local `$ref`s are inlined and `$defs`/`definitions` dropped; the draft-07 tuple form of
    `items` is rewritten to `prefixItems`; the root `$schema` is dropped (validation always
    uses Draft 2020-12). Everything else is kept, so objects without `additionalProperties`
    stay open. Raises ValueError for an invalid schema, a remote or dangling `$ref`, a
    recursive one, a key that is not a string, or a schema of more than MAX_SCHEMA_VALUES
    values (as written or once inlined).
    """
    if not isinstance(json_schema, dict):
        raise ValueError(f"a JSON Schema must be an object, not {type(json_schema).__name__}")
    check_schema_values(json_schema)
    _check_schema(json_schema)
    _check_inlined_size(json_schema)
    inlined = _inline_refs(json_schema)
    normalised = _modernise(inlined)
    normalised.pop("$schema", None)
    return Schema(json=normalised, source=source)


def schema_from_pydantic(model: Any, *, source: str) -> Schema:
    """A `Schema` from a pydantic model class (or any type pydantic's TypeAdapter accepts).

    Uses the validation-mode JSON Schema, inlines `$ref`s, and closes object schemas that do
    not say otherwise (`additionalProperties: false`): pydantic's default `extra="ignore"`
    drops unknown keys, which is exactly the strip behaviour. `extra="allow"` models keep
    their `additionalProperties: true`.
    """
    try:
        if isinstance(model, type) and hasattr(model, "model_json_schema"):
            raw = model.model_json_schema()
        else:
            import pydantic

            raw = pydantic.TypeAdapter(model).json_schema()
    except Exception as exc:  # pydantic raises several error types here
        name = getattr(model, "__name__", repr(model))
        raise ValueError(f"cannot build a JSON Schema from {name}: {exc}") from exc
    schema = schema_from_json(raw, source=source)
    return Schema(json=_close_objects(schema.json), source=source)


# ---------------------------------------------------------------------------------------------
# Deep comparisons (docs/decks.md, "Graders" and "Actions and their results")


def _as_json(schema: Schema | dict | bool) -> Any:
    return schema.json if isinstance(schema, Schema) else schema


def _norm(schema: Any) -> dict:
    """A comparison form: booleans as dicts, `type: [a, b]` as a union, 1-branch unions flat."""
    if schema is True or schema is None:
        return {}
    if schema is False:
        return {"not": {}}
    if not isinstance(schema, dict):
        return {}
    declared = schema.get("type")
    if isinstance(declared, list):
        if len(declared) == 1:
            schema = {**schema, "type": declared[0]}
        elif len(declared) > 1 and "anyOf" not in schema and "oneOf" not in schema:
            rest = {k: v for k, v in schema.items() if k != "type"}
            return {"anyOf": [{**rest, "type": t} for t in declared]}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and len(branches) == 1:
            rest = {k: v for k, v in schema.items() if k != key}
            return _norm({**_norm(branches[0]), **rest})
    return schema


def _is_any(schema: dict) -> bool:
    return all(k in _IGNORED_FOR_COMPARISON or k.startswith(_INTERNAL_PREFIX) for k in schema)


def _union(schema: dict) -> list | None:
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            return branches
    return None


def _describe(schema: dict) -> str:
    if _union(schema) is not None:
        return "a union"
    if _is_any(schema):
        return "any"
    return _inferred_type(schema) or "unknown"


def _quote_type(described: str) -> str:
    if described == "any":
        return "any value"
    if described == "a union":
        return described
    return f'"{described}"'


def _allowed_values(schema: dict) -> list[str] | None:
    if "const" in schema:
        values = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        values = schema["enum"]
    else:
        return None
    return sorted({_json.dumps(v, sort_keys=True) for v in values})


def _extra_schema(schema: dict) -> Any:
    """`additionalProperties` as a schema: absent/true -> {} (any), false -> False."""
    extra = schema.get("additionalProperties", True)
    if extra is True:
        return {}
    return extra


def _is_record(schema: dict) -> bool:
    if isinstance(schema.get("additionalProperties"), dict):
        return True
    return not schema.get("properties") and schema.get("additionalProperties", True) is not False


def _required(schema: dict) -> set[str]:
    required = schema.get("required")
    return {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()


class _Comparer:
    """Recursive schema comparison in one of two modes.

    - `compat` (grader rule): `a` is the candidate, `b` the base. Extra candidate fields must
      be optional; enum/const values must be equal; `{}` in the base accepts only `{}`.
    - `match` (execute actions): fields, types and requiredness must be identical both ways.
    """

    def __init__(self, mode: str, a_label: str, b_label: str):
        self.mode = mode
        self.a_label = a_label
        self.b_label = b_label
        self.problems: list[str] = []

    def report(self, path: tuple[str, ...], message: str) -> None:
        self.problems.append(f'"{_render_path(path)}": {message}')

    def type_problem(self, path: tuple[str, ...], a: str, b: str) -> None:
        found, expected = _quote_type(a), _quote_type(b)
        if self.mode == "compat":
            self.report(path, f"type is {found}, expected {expected}")
        else:
            self.report(path, f"type is {found} in {self.a_label} but {expected} in {self.b_label}")

    def compare(self, a_raw: Any, b_raw: Any, path: tuple[str, ...]) -> None:
        a, b = _norm(a_raw), _norm(b_raw)
        if self.mode == "compat" and not path:
            a_opt, b_opt = a.get(OPTIONAL_KEY) is True, b.get(OPTIONAL_KEY) is True
            if a_opt != b_opt:
                if b_opt:
                    self.report(path, f"optional in {self.b_label} but required here")
                else:
                    self.report(path, f"required in {self.b_label} but optional here")
        a_union, b_union = _union(a), _union(b)
        if a_union is not None or b_union is not None:
            self.compare_unions(a, b, a_union, b_union, path)
            return
        a_any, b_any = _is_any(a), _is_any(b)
        if a_any or b_any:
            if a_any != b_any:
                self.type_problem(path, _describe(a), _describe(b))
            return
        a_type, b_type = _inferred_type(a), _inferred_type(b)
        if a_type != b_type:
            self.type_problem(path, a_type or "unknown", b_type or "unknown")
            return
        if self.mode == "compat":
            a_values, b_values = _allowed_values(a), _allowed_values(b)
            if a_values != b_values:
                found = "[" + ", ".join(a_values) + "]" if a_values else f"any {a_type}"
                expected = "[" + ", ".join(b_values) + "]" if b_values else f"any {b_type}"
                self.report(path, f"allowed values are {found}, expected {expected}")
        if a_type == "object":
            self.compare_objects(a, b, path)
        elif a_type == "array":
            self.compare_arrays(a, b, path)

    def count_problem(
        self, path: tuple[str, ...], what: str, a_count: int, b_count: int, unit: str
    ) -> None:
        """The two sides have a different number of union options or tuple items."""
        if self.mode == "compat":
            self.report(path, f"{what} {a_count} {unit}, expected {b_count}")
        else:
            self.report(
                path, f"{what} {a_count} {unit} in {self.a_label} but {b_count} in {self.b_label}"
            )

    def compare_unions(
        self, a: dict, b: dict, a_union: list | None, b_union: list | None, path: tuple[str, ...]
    ) -> None:
        if a_union is None or b_union is None:
            self.type_problem(path, _describe(a), _describe(b))
            return
        if len(a_union) != len(b_union):
            self.count_problem(path, "union has", len(a_union), len(b_union), "options")
            return
        in_order: list[list[str]] = []
        for index, (a_branch, b_branch) in enumerate(zip(a_union, b_union, strict=True)):
            sub = _Comparer(self.mode, self.a_label, self.b_label)
            sub.compare(a_branch, b_branch, (*path, f"[option {index + 1}]"))
            in_order.append(sub.problems)
        if not any(in_order):
            return
        if len(a_union) <= 8 and self._permutation_matches(a_union, b_union):
            return  # same options in another order
        for problems in in_order:
            self.problems.extend(problems)

    def _permutation_matches(self, a_union: list, b_union: list) -> bool:
        def ok(x: Any, y: Any) -> bool:
            sub = _Comparer(self.mode, self.a_label, self.b_label)
            sub.compare(x, y, ())
            return not sub.problems

        fits = [[ok(x, y) for y in b_union] for x in a_union]
        used: set[int] = set()

        def assign(i: int) -> bool:
            if i == len(a_union):
                return True
            for j in range(len(b_union)):
                if j not in used and fits[i][j]:
                    used.add(j)
                    if assign(i + 1):
                        return True
                    used.discard(j)
            return False

        return assign(0)

    def compare_objects(self, a: dict, b: dict, path: tuple[str, ...]) -> None:
        a_props = a.get("properties")
        a_props = a_props if isinstance(a_props, dict) else {}
        b_props = b.get("properties")
        b_props = b_props if isinstance(b_props, dict) else {}
        a_req, b_req = _required(a), _required(b)
        for name, b_sub in b_props.items():
            sub_path = (*path, name)
            if name not in a_props:
                if self.mode == "compat":
                    self.report(sub_path, f"missing; {self.b_label} defines it")
                else:
                    self.report(sub_path, f"only in {self.b_label}")
                continue
            if (name in a_req) != (name in b_req):
                if self.mode == "compat":
                    if name in b_req:
                        self.report(sub_path, f"required in {self.b_label} but optional here")
                    else:
                        self.report(sub_path, f"optional in {self.b_label} but required here")
                else:
                    a_state = "required" if name in a_req else "optional"
                    b_state = "required" if name in b_req else "optional"
                    self.report(
                        sub_path,
                        f"{a_state} in {self.a_label} but {b_state} in {self.b_label}",
                    )
            self.compare(a_props[name], b_sub, sub_path)
        for name in a_props:
            if name in b_props:
                continue
            sub_path = (*path, name)
            if self.mode == "compat":
                if name in a_req:
                    self.report(sub_path, "added fields must be optional")
            else:
                self.report(sub_path, f"only in {self.a_label}")
        if _is_record(b) or (self.mode == "match" and _is_record(a)):
            a_extra, b_extra = _extra_schema(a), _extra_schema(b)
            if a_extra is False or b_extra is False:
                if a_extra is not b_extra:
                    self.type_problem(
                        path,
                        "object" if a_extra is False else "record",
                        "object" if b_extra is False else "record",
                    )
                return
            self.compare(a_extra, b_extra, (*path, "*"))

    def compare_arrays(self, a: dict, b: dict, path: tuple[str, ...]) -> None:
        a_prefix = a.get("prefixItems")
        a_prefix = a_prefix if isinstance(a_prefix, list) else []
        b_prefix = b.get("prefixItems")
        b_prefix = b_prefix if isinstance(b_prefix, list) else []
        if len(a_prefix) != len(b_prefix):
            self.count_problem(path, "tuple has", len(a_prefix), len(b_prefix), "items")
            return
        for index, (a_item, b_item) in enumerate(zip(a_prefix, b_prefix, strict=True)):
            self.compare(a_item, b_item, (*path, str(index)))
        self.compare(a.get("items", {}), b.get("items", {}), (*path, str(len(b_prefix))))


def deep_compatibility_problems(
    candidate: Schema | dict, base: Schema | dict, *, base_label: str = "the base schema"
) -> list[str]:
    """Why `candidate` is not deeply compatible with `base` (the graders' rule); [] if it is.

    Recursively, every base field must exist in the candidate with the same type, allowed
    values and required/optional status; array items, record values and union branches
    (same count, in any order) are compared the same way; `{}` in the base accepts only `{}`.
    Extra candidate fields must be optional. Descriptions, defaults, titles, formats and
    bounds are ignored. Each problem names a dotted path (array items appear as `.0`, record
    values as `.*`), e.g. `"session.messages.0.role": type is "number", expected "string"`.
    """
    comparer = _Comparer("compat", "the candidate schema", base_label)
    comparer.compare(_as_json(candidate), _as_json(base), ())
    return comparer.problems


def deep_match_problems(
    a: Schema | dict,
    b: Schema | dict,
    *,
    a_label: str = "the inline schema",
    b_label: str = "the target's schema",
) -> list[str]:
    """Why two declarations of one action schema differ (inline and in its module); [] if equal.

    Object schemas must have the same fields, types and requiredness, recursively, with no
    extra field on either side. Non-object schemas only need the same top-level type.
    """
    a_json, b_json = _norm(_as_json(a)), _norm(_as_json(b))
    a_type = None if _union(a_json) is not None or _is_any(a_json) else _inferred_type(a_json)
    b_type = None if _union(b_json) is not None or _is_any(b_json) else _inferred_type(b_json)
    comparer = _Comparer("match", a_label, b_label)
    if a_type == "object" and b_type == "object":
        comparer.compare(a_json, b_json, ())
    elif a_type != b_type:
        comparer.type_problem((), a_type or _describe(a_json), b_type or _describe(b_json))
    return comparer.problems
