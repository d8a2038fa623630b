"""Checking what goes into and comes out of a deck, and the action result envelope.

- `_validate` checks a deck's context input against its contextSchema.
- `_validate_output` applies the output rule: validate against the responseSchema,
  and try a string that fails once more as JSON.
- An action's result reaches the calling model as an envelope
  `{payload, status?, message?, code?, meta?}`; `_normalise_result` makes one of whatever a
  child returned.
- `check_extension_item` enforces `[[responseItemExtensions]]` dataSchemas on items a deck
  produces.
"""

from __future__ import annotations

import json
from typing import Any

from .._deck import Deck
from .._schema import Schema, SchemaValidationError
from ._common import _MISSING, RunError, is_end_signal

ENVELOPE_KEYS = frozenset({"payload", "status", "message", "code", "meta"})
_ENVELOPE_KEYS = ("status", "message", "code", "meta")


def _validate(schema: Schema | None, value: Any, *, what: str, deck_path: str, code: str) -> Any:
    if schema is None:
        return value
    try:
        return schema.validate(value)
    except SchemaValidationError as exc:
        raise RunError(f"{what} of {deck_path}: {exc}", code=code, deck_path=deck_path) from None


def _validate_output(schema: Schema | None, value: Any, *, deck_path: str, is_root: bool) -> Any:
    """The output rule: validate; a string that fails is tried again as JSON."""
    if schema is None:
        if is_root and not isinstance(value, str) and value is not None:
            return json.dumps(value, ensure_ascii=False)
        return value
    try:
        return schema.validate(value)
    except SchemaValidationError as exc:
        error = exc
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = _MISSING
        if parsed is not _MISSING:
            try:
                return schema.validate(parsed)
            except SchemaValidationError as exc:
                error = exc
    raise RunError(
        f"output of {deck_path} does not match its responseSchema: {error}",
        code="invalid_output",
        deck_path=deck_path,
    )


def _envelope_fields(source: dict[str, Any]) -> dict[str, Any]:
    """The optional envelope fields of `source`, kept only when they have the envelope's types."""
    fields: dict[str, Any] = {}
    status = source.get("status")
    if isinstance(status, int | float) and not isinstance(status, bool):
        fields["status"] = status
    for key in ("message", "code"):
        if isinstance(source.get(key), str):
            fields[key] = source[key]
    if isinstance(source.get("meta"), dict):
        fields["meta"] = source["meta"]
    return fields


def check_extension_item(deck: Deck, item: Any, source: str) -> None:
    """Validate the `data` of an extension item whose type the deck declares.

    Undeclared types pass unchanged (nothing a provider produced is dropped); a declared one
    without `data`, or whose `data` does not match its dataSchema, fails the run.
    """
    data = item if isinstance(item, dict) else item.model_dump(mode="json", exclude_none=True)
    kind = data.get("type")
    schema = deck.item_extensions.get(kind) if isinstance(kind, str) else None
    if schema is None:
        return
    if "data" not in data:
        raise RunError(
            f"{deck.path} emitted extension item {kind!r} without data ({source})",
            code="invalid_output",
            deck_path=deck.path,
        )
    try:
        schema.validate(data["data"])
    except SchemaValidationError as exc:
        raise RunError(
            f"{deck.path} emitted extension item {kind!r} ({source}) whose data does not match "
            f"its dataSchema: {exc}",
            code="invalid_output",
            deck_path=deck.path,
        ) from None


def _is_envelope(value: Any) -> bool:
    """`{payload, status?, message?, code?, meta?}`: an action result envelope."""
    return (
        isinstance(value, dict)
        and "payload" in value
        and set(value) <= ENVELOPE_KEYS
        and not is_end_signal(value)
    )


def _normalise_result(result: Any) -> dict[str, Any]:
    """A child's result as an envelope (docs/decks.md, "Actions and their results")."""
    if isinstance(result, dict) and not is_end_signal(result):
        payload = result.get("payload", result)
        return {"payload": payload, **_envelope_fields(result)}
    return {"payload": result}
