"""What zod factories and methods need from the evaluator: checked arguments, measured values.

`_Arguments` is the base of `_Evaluator`; the functions in `_factories.py` and `_methods.py`
receive the evaluator as `ev` and only use what is defined here:

- `arity`, the `want_*` checks, `params` and `check_options` turn a bad argument into a
  `ZodTranslationError` naming the construct (`z.enum(...)`, `.min(...)`);
- `register` and `measure` keep the depth, the size once inlined and the JSON-ness of every
  array and object literal the evaluator builds, so that limits are checked without walking a
  value twice (`.default(v)` and `.meta({...})` add the size of their argument to the schema).
"""

from __future__ import annotations

from typing import Any

from ._errors import MAX_NESTING, MAX_SCHEMA_NODES, _FileErrors
from ._schema import _Schema
from ._values import _describe_value, _is_number

# Keys of the optional "params" argument of factories, and of the message argument of checks.
_PARAM_KEYS = frozenset(
    ["description", "message", "error", "required_error", "invalid_type_error", "abort"]
)
_CHECK_OPTION_KEYS = frozenset(["message", "error", "abort", "offset", "local", "precision"])


class _Arguments(_FileErrors):
    def __init__(self, file: str):
        super().__init__(file)
        # id(list|dict) -> (value, depth, size, is_json) for array/object literals
        self.literals: dict[int, tuple[Any, int, int, bool]] = {}

    # ---- literal sizes -------------------------------------------------------------------------

    def register(self, value: list | dict, line: int) -> Any:
        children = value.values() if isinstance(value, dict) else value
        depth, size, is_json = 1, 1, True
        for child in children:
            d, s, j = self.measure(child)
            depth = max(depth, d + 1)
            size += s
            is_json = is_json and j
        if depth > MAX_NESTING or size > MAX_SCHEMA_NODES:
            raise self.fail(
                f"this value is nested more than {MAX_NESTING} levels deep or is larger than "
                f"{MAX_SCHEMA_NODES} nodes once inlined",
                line,
                "size",
            )
        self.literals[id(value)] = (value, depth, size, is_json)
        return value

    def measure(self, value: Any) -> tuple[int, int, bool]:
        if isinstance(value, _Schema):
            return value.depth, value.size, False
        if isinstance(value, (list, dict)):
            _, depth, size, is_json = self.literals[id(value)]
            return depth, size, is_json
        is_json = value is None or isinstance(value, (str, int, float))
        return 0, 1, is_json

    # ---- argument helpers ----------------------------------------------------------------------

    def arity(self, args: list, lo: int, hi: int, line: int, construct: str) -> None:
        if not lo <= len(args) <= hi:
            expected = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.fail(
                f"{construct} takes {expected} argument(s), got {len(args)}", line, construct
            )

    def want_schema(self, value: Any, line: int, construct: str, what: str = "") -> _Schema:
        if not isinstance(value, _Schema):
            raise self.fail(
                f"{construct} expects a zod schema{what}, got {_describe_value(value)}",
                line,
                construct,
            )
        return value

    def want_shape(self, value: Any, line: int, construct: str) -> dict[str, _Schema]:
        if not isinstance(value, dict):
            raise self.fail(
                f"{construct} expects an object of zod schemas, got {_describe_value(value)}",
                line,
                construct,
            )
        for key, item in value.items():
            if not isinstance(item, _Schema):
                raise self.fail(
                    f'{construct}: key "{key}" is {_describe_value(item)}, not a zod schema',
                    line,
                    construct,
                )
        return value

    def want_mask(self, value: Any, line: int, construct: str, keys: tuple[str, ...]) -> list[str]:
        if not isinstance(value, dict) or not all(v is True for v in value.values()):
            raise self.fail(f"{construct} expects an object like {{ key: true }}", line, construct)
        for key in value:
            if key not in keys:
                raise self.fail(f'{construct}: unknown key "{key}"', line, construct)
        return list(value)

    def want_number(self, value: Any, line: int, construct: str) -> int | float:
        if not _is_number(value):
            raise self.fail(
                f"{construct} expects a number, got {_describe_value(value)}", line, construct
            )
        return value

    def want_count(self, value: Any, line: int, construct: str) -> int:
        if not _is_number(value) or value < 0 or value != int(value):
            raise self.fail(
                f"{construct} expects a non-negative integer, got {value!r}", line, construct
            )
        return int(value)

    def want_strings(self, value: Any, line: int, construct: str) -> list[str]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{construct} expects a non-empty array of strings", line, construct)
        return list(value)

    def want_options(self, value: Any, line: int, construct: str) -> tuple[_Schema, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                f"{construct} expects a non-empty array of zod schemas", line, construct
            )
        return tuple(self.want_schema(v, line, construct, " in the array") for v in value)

    def want_object(self, s: _Schema, line: int, construct: str) -> None:
        if s.kind != "object" or s.wrapped:
            raise self.fail(
                f"{construct} expects a z.object(...), got {_describe_value(s)}", line, construct
            )

    def want_json(self, value: Any, line: int, construct: str) -> Any:
        if not self.measure(value)[2]:
            raise self.fail(
                f"{construct} expects a JSON value, got {_describe_value(value)}", line, construct
            )
        return value

    def _object_of(
        self, value: Any, keys: frozenset[str], what: str, line: int, construct: str
    ) -> None:
        """Fail unless `value` is an object with no key but `keys` (`what`: its name)."""
        if not isinstance(value, dict) or not set(value) <= keys:
            raise self.fail(
                f"{construct}: unsupported {what} {_describe_value(value)} "
                f"(supported keys: {', '.join(sorted(keys))})",
                line,
                construct,
            )

    def params(self, args: list, start: int, line: int, construct: str) -> dict[str, Any]:
        """The optional trailing params object of a factory; returns meta (description)."""
        if len(args) <= start:
            return {}
        self.arity(args, start, start + 1, line, construct)
        value = args[start]
        if isinstance(value, str):
            return {}
        self._object_of(value, _PARAM_KEYS, "parameters", line, construct)
        description = value.get("description")
        if description is None:
            return {}
        if not isinstance(description, str):
            raise self.fail(f"{construct}: description must be a string", line, construct)
        return {"description": description}

    def check_options(self, args: list, start: int, line: int, construct: str) -> None:
        """Accept and ignore the optional message argument of a check (`"msg"` or `{message}`)."""
        self.arity(args, start, start + 1, line, construct)
        if len(args) == start:
            return
        value = args[start]
        if isinstance(value, str):
            return
        self._object_of(value, _CHECK_OPTION_KEYS, "options", line, construct)
