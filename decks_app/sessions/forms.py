"""Forms generated from a deck's JSON schema: real fields instead of raw JSON.

`fields(schema)` turns a schema into field descriptions (text, number, checkbox, select
for enums, nested objects as fieldsets, lists of plain values one per line, anything else as
a JSON box pre-filled with a sample of its shape), pre-filled from `default` and `examples`. `read(schema, form, prefix)` assembles the submitted
fields back into a value (numbers and booleans typed by the schema; empty optional fields
left out) and validates it; a JSON escape hatch (`<prefix>__json`) wins when filled. Missing
required fields are named before anything runs.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 6


class FormError(ValueError):
    pass


def _type(spec: dict[str, Any]) -> str | None:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


SCALAR_KINDS = {"string": "text", "integer": "number", "number": "number", "boolean": "checkbox"}


def _kind(spec: dict[str, Any]) -> str:
    if spec.get("enum"):
        return "select"
    kind = _type(spec)
    if kind == "object" and isinstance(spec.get("properties"), dict):
        return "object"
    if kind == "array":
        items = spec.get("items")
        items = items if isinstance(items, dict) else {}
        # A list of plain values is one value per line; anything else stays JSON.
        if items.get("enum") or _type(items) in ("string", "integer", "number"):
            return "lines"
    return SCALAR_KINDS.get(kind or "", "json")


def _initial(spec: dict[str, Any]) -> Any:
    if "default" in spec:
        return spec["default"]
    examples = spec.get("examples")
    return examples[0] if isinstance(examples, list) and examples else None


def sample(spec: Any, depth: int = 0) -> Any:
    """A value shaped like the schema, from defaults and examples (recursively; a list gets
    one sample item), for pre-filling a JSON box. None when nothing is known."""
    if not isinstance(spec, dict) or depth > MAX_DEPTH:
        return None
    initial = _initial(spec)
    if initial is not None:
        return initial
    kind = _type(spec)
    if kind == "object" and isinstance(spec.get("properties"), dict):
        out = {}
        for name, child in spec["properties"].items():
            value = sample(child, depth + 1)
            if value is not None:
                out[name] = value
        return out or None
    if kind == "array":
        item = sample(spec.get("items"), depth + 1)
        return [item] if item is not None else None
    return None


def _field(name: str, label: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    kind = _kind(spec)
    initial = _initial(spec)
    if kind == "json" and initial is None:
        initial = sample(spec)
    if kind == "lines":
        value = "\n".join(str(v) for v in initial) if isinstance(initial, list) else None
    elif kind == "json":
        value = json.dumps(initial) if initial is not None else None
    else:
        value = initial
    items = spec.get("items")
    items = items if isinstance(items, dict) else {}
    return {
        "name": name,
        "label": label,
        "kind": kind,
        "required": required,
        "description": spec.get("description"),
        "value": value,
        "options": [str(v) for v in spec.get("enum") or []],
        "step": "1" if spec.get("type") == "integer" else "any",
        "itemType": _type(items) if kind == "lines" else None,
    }


def fields(schema: dict[str, Any] | None, prefix: str = "ctx", depth: int = 0) -> list[dict]:
    """Field descriptions for a schema: one per property of an object schema, or a single
    field named `prefix` for a plain value (a string, a number, a list...)."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return []
    if _kind(schema) != "object":
        if depth or _type(schema) is None and not schema.get("enum"):
            return []  # no schema, or one without a type: the JSON box alone
        return [_field(prefix, "input", schema, False)]
    required = set(schema.get("required") or [])
    out = []
    for name, spec in schema["properties"].items():
        spec = spec if isinstance(spec, dict) else {}
        kind = _kind(spec)
        field = _field(f"{prefix}.{name}", name, spec, name in required)
        if kind == "object":
            field["children"] = fields(spec, f"{prefix}.{name}", depth + 1)
        out.append(field)
    return out


def read(
    schema: dict[str, Any] | None, form: Any, prefix: str = "ctx", *, allow_missing: bool = False
) -> Any:
    """The value the form describes, or None when nothing was given. Raises FormError, also
    for missing required fields unless `allow_missing` (a scenario's persona fills them in)."""
    raw = (form.get(f"{prefix}__json") or "").strip()
    if raw:
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise FormError(f"the JSON context is not valid JSON: {exc}") from None
        except RecursionError:
            raise FormError("the JSON context is nested too deeply") from None
    if not isinstance(schema, dict) or _kind(schema) != "object":
        spec = schema if isinstance(schema, dict) else {}
        if _kind(spec) == "checkbox":
            return form.get(prefix) in ("on", "true", "1") if prefix in form else None
        text = (form.get(prefix) or "").strip()
        return _typed(spec, text, prefix) if text else None
    value, missing = _read_object(schema, form, prefix, 0)
    if missing and not allow_missing:
        raise FormError("fill the required fields: " + ", ".join(missing))
    return value or None


def _read_object(schema: dict, form: Any, prefix: str, depth: int) -> tuple[dict, list[str]]:
    value: dict[str, Any] = {}
    missing: list[str] = []
    required = set(schema.get("required") or [])
    for name, spec in schema["properties"].items():
        spec = spec if isinstance(spec, dict) else {}
        key = f"{prefix}.{name}"
        kind = _kind(spec)
        if kind == "object" and depth < MAX_DEPTH:
            child, child_missing = _read_object(spec, form, key, depth + 1)
            if child:
                value[name] = child
            missing += child_missing if (child or name in required) else []
            continue
        if kind == "checkbox":
            if key in form or name in required:
                value[name] = form.get(key) in ("on", "true", "1")
            continue
        text = (form.get(key) or "").strip()
        if not text:
            if name in required:
                missing.append(key.split(".", 1)[1])  # without the form's prefix
            continue
        value[name] = _typed(spec, text, key)
    return value, missing


def _number(spec: dict[str, Any], text: str, key: str) -> int | float:
    try:
        number = float(text)
    except ValueError:
        raise FormError(f"{key}: {text!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise FormError(f"{key}: {text!r} is not a finite number")
    return int(number) if _type(spec) == "integer" and number.is_integer() else number


def _typed(spec: dict[str, Any], text: str, key: str) -> Any:
    """A submitted field's text as the value its schema describes."""
    kind = _kind(spec)
    if kind == "number":
        return _number(spec, text, key)
    if kind == "lines":
        items = spec.get("items")
        items = items if isinstance(items, dict) else {}
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if _type(items) in ("integer", "number"):
            return [_number(items, line, f"{key}[{i}]") for i, line in enumerate(lines)]
        return lines
    if kind == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise FormError(f"{key}: not valid JSON (or nested too deeply)") from None
    return text


def deck_context_schema(workspace: Any, deck_path: str, role: Any = "root") -> Any:
    """The deck's context schema (a `Schema`), or None."""
    from decks_app.workspaces.served import PathOutsideWorkspace, jailed_path, project_root
    from gambit.core import check_deck_tree

    try:
        tree, _ = check_deck_tree(
            jailed_path(workspace, deck_path), role=role, project_root=project_root(workspace)
        )
    except PathOutsideWorkspace:
        return None
    return tree.root.context_schema if tree is not None else None


def validate_context(
    workspace: Any,
    deck_path: str,
    context: Any,
    *,
    optional: bool,
    role: Any = "root",
    partial: bool = False,
) -> Any:
    """Validate a context against the deck's schema before anything runs; FormError names
    the fields at fault. `optional`: an empty context is fine (a scenario fills it in)."""
    from gambit.core import SchemaValidationError

    schema = deck_context_schema(workspace, deck_path, role)
    if schema is None or (context is None and (optional or schema.is_optional)):
        return context
    if context is None and not schema.required_fields():
        return context
    if partial and isinstance(context, dict) and schema.is_object:
        # A scenario's persona fills in the missing fields (init-fill): what is given must
        # still be right, so check it against the schema without its top-level `required`.
        from gambit.core import schema_from_json

        relaxed = {k: v for k, v in schema.to_json_schema().items() if k != "required"}
        schema = schema_from_json(relaxed, source=f"{deck_path} contextSchema")
    try:
        return schema.validate(context if context is not None else {})
    except SchemaValidationError as exc:
        raise FormError(f"the context does not match {deck_path}'s contextSchema: {exc}") from None
