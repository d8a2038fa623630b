"""Schema references: a built-in `gambit://schemas/...` URI, or a local `.json`, `.py` or
`.zod.ts` file (docs/decks.md, "Schemas"), and the schema values a Python module hands over.

A schema nested past MAX_SCHEMA_DEPTH is an error naming the file and the limit.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .._builtin_schemas import builtin_schema, resolve_builtin_schema_uri
from .._depth import json_depth
from .._schema import (
    MAX_SCHEMA_VALUES,
    Schema,
    check_schema_values,
    schema_from_json,
    schema_from_pydantic,
)
from .imports import import_module
from .load import Load
from .paths import read_text, referenced
from .values import type_name

MAX_SCHEMA_DEPTH = 128  # levels of JSON nesting in a schema file (two per nested object property)
# The largest .zod.ts file translated (docs/decks.md, "Bounds"): room for some 2,000
# described fields. The translator reads about 300,000 characters a second, even when every
# character is a token (`![(![(...`), so this is a third of a second at most.
MAX_ZOD_FILE_BYTES = 100_000


def resolve_schema(load: Load, ref: Any, file: str, key: str) -> Schema | None:
    if not isinstance(ref, str) or not ref.strip():
        load.diag.error(
            f"must be a schema path string, not {type_name(ref)}",
            file=file,
            key=key,
            hint='e.g. "./schemas/input.json" or "gambit://schemas/graders/grader_output.zod.ts"',
        )
        return None
    ref = ref.strip()
    if ref.startswith("gambit://"):
        if not ref.startswith("gambit://schemas/"):
            load.diag.error(
                f"{ref!r} is not a schema URI",
                file=file,
                key=key,
                hint="built-in schemas live under gambit://schemas/",
            )
            return None
        try:
            resolved = resolve_builtin_schema_uri(ref)
        except ValueError as exc:
            load.diag.error(str(exc), file=file, key=key)
            return None
        if resolved.deprecated_reason:
            load.diag.deprecated(resolved.deprecated_reason, file=file, key=key)
        return builtin_schema(resolved.canonical_uri)
    target = referenced(load, ref, file, key)
    if target is None:
        return None
    if not target.is_file():
        load.diag.error(
            f"schema file {ref!r} does not exist ({target})",
            file=file,
            key=key,
            hint="check the path; it is relative to this file",
        )
        return None
    name = target.name
    if name.endswith(".json"):
        text = read_text(load, str(target))
        if text is None:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            load.diag.error(
                f"invalid JSON: {exc.msg} (column {exc.colno})",
                file=str(target),
                line=exc.lineno,
                key=key,
                hint=f"fix the JSON there; {key} of {file.rsplit('/', 1)[-1]} reads this file",
            )
            return None
        except RecursionError:  # far deeper than the limit
            load.diag.error(
                f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
                file=str(target),
                hint="flatten it, or split it with $defs and $ref",
            )
            return None
        except ValueError:  # int("1" * 5000): Python's limit on digits in an integer
            load.diag.error(
                f"invalid JSON: a number has more than {sys.get_int_max_str_digits()} digits",
                file=str(target),
            )
            return None
        if not isinstance(data, dict):
            load.diag.error("a JSON Schema file must hold an object", file=str(target))
            return None
        if not _shallow_enough(load, data, str(target)):
            return None
        try:
            return schema_from_json(data, source=str(target))
        except ValueError as exc:
            load.diag.error(f"invalid JSON Schema: {exc}", file=str(target))
            return None
    if name.endswith(".py"):
        module = import_module(load, str(target))
        if module is None:
            return None
        if not hasattr(module, "schema"):
            load.diag.error(
                "a Python schema module must define `schema` (a pydantic model class or a JSON Schema dict)",
                file=str(target),
                key="schema",
            )
            return None
        return schema_from_spec(load, module.schema, str(target), "schema")
    if name.endswith(".ts"):
        if target.stat().st_size > MAX_ZOD_FILE_BYTES:
            load.diag.error(
                f"the zod file is larger than {MAX_ZOD_FILE_BYTES:,} bytes (the limit)",
                file=str(target),
                hint="split the schema, or write it as JSON Schema (a .json file)",
            )
            return None
        # The zod translator is imported only for decks that have a .zod.ts schema.
        from .._zod import ZodTranslationError, translate_zod_file

        try:
            translated = translate_zod_file(target)
            if not _shallow_enough(load, translated, str(target)):
                return None
            return schema_from_json(translated, source=str(target))
        except RecursionError:
            load.diag.error(
                f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
                file=str(target),
                hint="flatten it, or split it with $defs and $ref",
            )
            return None
        except ZodTranslationError as exc:
            load.diag.error(
                exc.message,
                file=exc.file,
                line=exc.line,
                hint="port this TypeScript: write the schema as JSON Schema (a .json file) "
                "or in the static zod subset docs/decks.md lists",
            )
            return None
        except ValueError as exc:
            load.diag.error(f"translated schema is invalid: {exc}", file=str(target))
            return None
    load.diag.error(
        f"unsupported schema file type {target.suffix or name!r}",
        file=file,
        key=key,
        hint="use a .json JSON Schema, a .py module exporting `schema`, a .zod.ts file or a gambit://schemas/ URI",
    )
    return None


def schema_from_spec(load: Load, spec: Any, file: str, key: str) -> Schema | None:
    """A schema a Python module hands over: a Schema, a path, a JSON Schema dict or a
    pydantic model class."""
    if spec is None:
        return None
    if isinstance(spec, Schema):
        return spec
    if isinstance(spec, str):
        return resolve_schema(load, spec, file, key)
    if isinstance(spec, dict):
        if not _shallow_enough(load, spec, file, key):
            return None
        try:
            return schema_from_json(spec, source=f"{file}#{key}")
        except ValueError as exc:
            load.diag.error(f"invalid JSON Schema: {exc}", file=file, key=key)
            return None
    if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
        try:
            return schema_from_pydantic(spec, source=f"{file}#{key}")
        except Exception as exc:
            load.diag.error(
                f"cannot convert the pydantic model {spec.__name__}: {exc}", file=file, key=key
            )
            return None
    load.diag.error(
        f"must be a pydantic model class, a JSON Schema dict or a schema path, not {type_name(spec)}",
        file=file,
        key=key,
    )
    return None


def _shallow_enough(load: Load, data: Any, file: str, key: str | None = None) -> bool:
    """A schema nested past MAX_SCHEMA_DEPTH is an error naming the file and the limit
    (deeper ones would exhaust the recursion of the validators); so is one of more than
    MAX_SCHEMA_VALUES values or with a key that is not a string, checked first, as a
    module's dict that shares itself at every level has more paths to walk than atoms."""
    if isinstance(data, dict):
        try:
            check_schema_values(data)
        except ValueError as exc:
            load.diag.error(
                f"invalid JSON Schema: {exc}",
                file=file,
                key=key,
                hint=f"keep a schema under {MAX_SCHEMA_VALUES:,} values, with string keys",
            )
            return False
    depth = json_depth(data, MAX_SCHEMA_DEPTH + 1)
    if depth > MAX_SCHEMA_DEPTH:
        load.diag.error(
            f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
            file=file,
            key=key,
            hint="flatten it, or split it with $defs and $ref",
        )
        return False
    return True
