"""Forms generated from a deck's JSON schema: real fields instead of raw JSON.

`fields(schema)` turns an object schema into field descriptions (text, number, checkbox,
select for enums, nested objects as fieldsets, lists and anything else as a JSON box),
pre-filled from `default` and `examples`. `read(schema, form, prefix)` assembles the submitted
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


def _kind(spec: dict[str, Any]) -> str:
    if spec.get("enum"):
        return "select"
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" and isinstance(spec.get("properties"), dict):
        return "object"
    return {"string": "text", "integer": "number", "number": "number", "boolean": "checkbox"}.get(
        kind or "", "json"
    )


def _initial(spec: dict[str, Any]) -> Any:
    if "default" in spec:
        return spec["default"]
    examples = spec.get("examples")
    return examples[0] if isinstance(examples, list) and examples else None


def fields(schema: dict[str, Any] | None, prefix: str = "ctx", depth: int = 0) -> list[dict]:
    """Field descriptions for an object schema (an empty list for anything else)."""
    if not isinstance(schema, dict) or _kind(schema) != "object" or depth > MAX_DEPTH:
        return []
    required = set(schema.get("required") or [])
    out = []
    for name, spec in schema["properties"].items():
        spec = spec if isinstance(spec, dict) else {}
        kind = _kind(spec)
        initial = _initial(spec)
        field = {
            "name": f"{prefix}.{name}",
            "label": name,
            "kind": kind,
            "required": name in required,
            "description": spec.get("description"),
            "value": json.dumps(initial) if kind == "json" and initial is not None else initial,
            "options": [str(v) for v in spec.get("enum") or []],
            "step": "1" if spec.get("type") == "integer" else "any",
        }
        if kind == "object":
            field["children"] = fields(spec, f"{prefix}.{name}", depth + 1)
        out.append(field)
    return out


def read(schema: dict[str, Any] | None, form: Any, prefix: str = "ctx") -> Any:
    """The value the form describes, or None when nothing was given. Raises FormError."""
    raw = (form.get(f"{prefix}__json") or "").strip()
    if raw:
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise FormError(f"the JSON context is not valid JSON: {exc}") from None
        except RecursionError:
            raise FormError("the JSON context is nested too deeply") from None
    if not isinstance(schema, dict) or _kind(schema) != "object":
        text = (form.get(prefix) or "").strip()
        return text or None
    value, missing = _read_object(schema, form, prefix, 0)
    if missing:
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
                missing.append(key.removeprefix("ctx.").removeprefix("persona."))
            continue
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                raise FormError(f"{key}: {text!r} is not a number") from None
            value[name] = (
                int(number) if spec.get("type") == "integer" and number.is_integer() else number
            )
        elif kind == "json":
            try:
                value[name] = json.loads(text)
            except (ValueError, RecursionError):
                raise FormError(f"{key}: not valid JSON (or nested too deeply)") from None
        else:
            value[name] = text
    return value, missing


def deck_context_schema(workspace: Any, deck_path: str) -> Any:
    """The deck's context schema (a `Schema`), or None."""
    from decks_app.services.workspaces import PathOutsideWorkspace, jailed_path
    from gambit.core import check_deck_tree

    try:
        tree, _ = check_deck_tree(jailed_path(workspace, deck_path))
    except PathOutsideWorkspace:
        return None
    return tree.root.context_schema if tree is not None else None


def validate_context(workspace: Any, deck_path: str, context: Any, *, optional: bool) -> Any:
    """Validate a context against the deck's schema before anything runs; FormError names
    the fields at fault. `optional`: an empty context is fine (a scenario fills it in)."""
    from gambit.core import SchemaValidationError

    schema = deck_context_schema(workspace, deck_path)
    if schema is None or (context is None and (optional or schema.is_optional)):
        return context
    if context is None and not schema.required_fields():
        return context
    try:
        return schema.validate(context if context is not None else {})
    except SchemaValidationError as exc:
        raise FormError(f"the context does not match {deck_path}'s contextSchema: {exc}") from None
