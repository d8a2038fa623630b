"""Built-in schemas: `gambit://schemas/...` (docs/decks.md, "Graders").

The TypeScript Gambit ships these as Zod modules; here they are hand-written JSON Schema
dicts with the same shapes and the same Zod behaviour: every object is a plain `z.object`, so
unknown keys are stripped (`additionalProperties: false`) except in the `meta` records.

URIs are canonical under `gambit://schemas/<path>.zod.ts`. Two legacy forms still resolve,
with a deprecation reason the loader turns into a warning (an error under `--strict`):
`.ts` instead of `.zod.ts`, and `contexts/...` instead of `graders/contexts/...`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ._errors import GambitError
from ._schema import OPTIONAL_KEY, Schema, deep_compatibility_problems

__all__ = [
    "BUILTIN_SCHEMA_PATHS",
    "GRADER_CONTEXT_SCHEMA_URIS",
    "GRADER_OUTPUT_SCHEMA_URI",
    "PLAIN_CHAT_INPUT_OPTIONAL_URI",
    "PLAIN_CHAT_OUTPUT_URI",
    "RESPOND_SCHEMA_URI",
    "SCHEMA_URI_PREFIX",
    "BuiltinSchemaRef",
    "UnknownBuiltinSchema",
    "builtin_schema",
    "grader_compatibility_problems",
    "resolve_builtin_schema_uri",
]

SCHEMA_URI_PREFIX = "gambit://schemas/"

_ANY: dict[str, Any] = {}
_RECORD: dict[str, Any] = {"type": "object", "additionalProperties": {}}


def _message(*, with_tools: bool) -> dict[str, Any]:
    # `Msg = {role: string, content?: any, name?: string}` (plus `tool_calls?` in the *_tools
    # schemas). Like the TypeScript built-in (a plain z.object), a message is a CLOSED object:
    # any other key of a message is stripped by validation. That includes `tool_call_id`, the
    # `tool_calls` of assistant messages when the schema is not a *_tools one, and the
    # `messageRefId` the simulator adds to `messageToGrade`. A grader that needs such keys
    # must declare them (as optional fields) in its own context schema, as the grader
    # compatibility rule allows (docs/decks.md, "Graders").
    properties: dict[str, Any] = {
        "role": {"type": "string"},
        "content": {},
        "name": {"type": "string"},
    }
    if with_tools:
        properties["tool_calls"] = {"type": "array", "items": _tool_call()}
    return {
        "type": "object",
        "properties": properties,
        "required": ["role"],
        "additionalProperties": False,
    }


def _tool_call() -> dict[str, Any]:
    # `ToolCall = {id?: string, type?: string, function: {name: string, arguments?: string}}`;
    # `arguments` is the JSON-encoded argument string, as in Chat Completions.
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string"},
            "function": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "arguments": {"type": "string"},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        "required": ["function"],
        "additionalProperties": False,
    }


def _session(*, with_tools: bool) -> dict[str, Any]:
    # The runtime passes a bigger session (runId, messageRefs, feedback, traces, ...); like the
    # TypeScript schema, validation keeps only these three keys.
    return {
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": _message(with_tools=with_tools)},
            "meta": dict(_RECORD),
            "notes": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }


def _conversation(*, with_tools: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"session": _session(with_tools=with_tools)},
        "required": ["session"],
        "additionalProperties": False,
    }


def _turn(*, with_tools: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "session": _session(with_tools=with_tools),
            "messageToGrade": _message(with_tools=with_tools),
        },
        "required": ["session", "messageToGrade"],
        "additionalProperties": False,
    }


_RESPOND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "payload": {},
        "status": {"type": "integer"},
        "message": {"type": "string"},
        "code": {"type": "string"},
        "meta": dict(_RECORD),
    },
    "additionalProperties": False,
}

_GRADER_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {
            "type": "integer",
            "minimum": -3,
            "maximum": 3,
            "description": "Integer score from -3 (worst) to 3 (best).",
        },
        "reason": {"type": "string", "description": "Why this score was given."},
        "evidence": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Quotes or observations supporting the score.",
        },
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}

_BUILTIN_JSON: dict[str, dict[str, Any]] = {
    "graders/respond.zod.ts": _RESPOND,
    "graders/grader_output.zod.ts": _GRADER_OUTPUT,
    "graders/contexts/conversation.zod.ts": _conversation(with_tools=False),
    "graders/contexts/turn.zod.ts": _turn(with_tools=False),
    "graders/contexts/conversation_tools.zod.ts": _conversation(with_tools=True),
    "graders/contexts/turn_tools.zod.ts": _turn(with_tools=True),
    # Alias of turn_tools (a re-export in the TypeScript repo, not part of the deck format).
    "graders/contexts/tools.zod.ts": _turn(with_tools=True),
    "scenarios/plain_chat_output.zod.ts": {"type": "string"},
    # `string | undefined` (repo addition): a scenario may start without any input.
    "scenarios/plain_chat_input_optional.zod.ts": {"type": "string", OPTIONAL_KEY: True},
}

BUILTIN_SCHEMA_PATHS: tuple[str, ...] = tuple(_BUILTIN_JSON)

RESPOND_SCHEMA_URI = SCHEMA_URI_PREFIX + "graders/respond.zod.ts"
GRADER_OUTPUT_SCHEMA_URI = SCHEMA_URI_PREFIX + "graders/grader_output.zod.ts"
# In a fixed order; `grader_compatibility_problems` prefers the earlier one on a tie.
GRADER_CONTEXT_SCHEMA_URIS: tuple[str, ...] = (
    SCHEMA_URI_PREFIX + "graders/contexts/turn.zod.ts",
    SCHEMA_URI_PREFIX + "graders/contexts/turn_tools.zod.ts",
    SCHEMA_URI_PREFIX + "graders/contexts/conversation_tools.zod.ts",
    SCHEMA_URI_PREFIX + "graders/contexts/conversation.zod.ts",
)
PLAIN_CHAT_OUTPUT_URI = SCHEMA_URI_PREFIX + "scenarios/plain_chat_output.zod.ts"
PLAIN_CHAT_INPUT_OPTIONAL_URI = SCHEMA_URI_PREFIX + "scenarios/plain_chat_input_optional.zod.ts"


class UnknownBuiltinSchema(GambitError, ValueError, LookupError):
    """A `gambit://schemas/...` URI that names no built-in schema (or an empty one)."""


@dataclass(frozen=True)
class BuiltinSchemaRef:
    """A resolved built-in schema URI."""

    canonical_uri: str
    deprecated_reason: str | None = None

    @property
    def path(self) -> str:
        """The canonical relative path, e.g. `graders/respond.zod.ts`."""
        return self.canonical_uri[len(SCHEMA_URI_PREFIX) :]


def _available() -> str:
    return ", ".join(SCHEMA_URI_PREFIX + p for p in BUILTIN_SCHEMA_PATHS)


def resolve_builtin_schema_uri(uri: str) -> BuiltinSchemaRef:
    """Resolve a built-in schema URI, rewriting the deprecated forms.

    `gambit://schemas/contexts/<x>` becomes `gambit://schemas/graders/contexts/<x>`, and a
    `.ts` suffix (not `.zod.ts`) becomes `.zod.ts`; both may apply to one URI. A rewritten URI
    comes back with `deprecated_reason` set. Raises `UnknownBuiltinSchema` (a ValueError)
    listing the available URIs when nothing matches.
    """
    if not isinstance(uri, str) or not uri.startswith(SCHEMA_URI_PREFIX):
        raise UnknownBuiltinSchema(
            f"{uri!r} is not a built-in schema URI (they start with {SCHEMA_URI_PREFIX}); "
            f"available: {_available()}"
        )
    rel = uri[len(SCHEMA_URI_PREFIX) :]
    if not rel:
        raise UnknownBuiltinSchema(
            f"Invalid gambit schema specifier: {uri}; available: {_available()}"
        )
    canonical = rel
    if canonical.startswith("contexts/"):
        canonical = "graders/" + canonical
    if canonical.endswith(".ts") and not canonical.endswith(".zod.ts"):
        canonical = canonical[: -len(".ts")] + ".zod.ts"
    if canonical not in _BUILTIN_JSON:
        raise UnknownBuiltinSchema(f'Unknown built-in schema "{uri}"; available: {_available()}')
    canonical_uri = SCHEMA_URI_PREFIX + canonical
    reason = None
    if canonical != rel:
        reason = f'"{uri}" is deprecated; use "{canonical_uri}"'
    return BuiltinSchemaRef(canonical_uri=canonical_uri, deprecated_reason=reason)


def builtin_schema(uri: str) -> Schema:
    """The built-in schema for `uri` (legacy forms accepted), sourced at its canonical URI."""
    ref = resolve_builtin_schema_uri(uri)
    return Schema(json=copy.deepcopy(_BUILTIN_JSON[ref.path]), source=ref.canonical_uri)


def grader_compatibility_problems(context: Schema, response: Schema) -> tuple[list[str], list[str]]:
    """Check a grader deck's schemas against the built-in grader schemas (the deep rule).

    Returns `(context_problems, response_problems)`; both empty means compatible. The context
    schema is compared with each of the four built-in context schemas and the problems of the
    closest one (fewest problems; on a tie, the one with the fewest differences the other
    way round, then the order above) are returned, each naming that URI.
    """
    ranked = []
    for order, uri in enumerate(GRADER_CONTEXT_SCHEMA_URIS):
        base = builtin_schema(uri)
        problems = deep_compatibility_problems(context, base, base_label="the built-in schema")
        if not problems:
            return [], _response_problems(response)
        # Tie-break: the built-in that differs least the other way round (e.g. a grader that
        # extends turn_tools is closer to turn_tools than to turn), then the order above.
        distance = len(deep_compatibility_problems(base, context))
        ranked.append((len(problems), distance, order, uri, problems))
    _, _, _, context_uri, context_found = min(ranked)
    context_problems = [
        f"{problem} (compared with {context_uri}, the closest built-in context schema)"
        for problem in context_found
    ]
    return context_problems, _response_problems(response)


def _response_problems(response: Schema) -> list[str]:
    base = builtin_schema(GRADER_OUTPUT_SCHEMA_URI)
    return [
        f"{problem} (compared with {GRADER_OUTPUT_SCHEMA_URI})"
        for problem in deep_compatibility_problems(response, base, base_label="the built-in schema")
    ]
