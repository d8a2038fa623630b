"""What a model request offers: the tools, the structured output format and the model.

Mixed into `_LlmExecution` (see `_llm`); computed once per deck execution, except the model,
which is resolved again for every pass (a resolver may pick another one).

The tools are, in order: the built-in workspace tools the deck's permissions allow,
`gambit_end` (when `allowEnd`), `gambit_respond` (when the deck has `respond`; its `payload`
parameter carries the responseSchema as JSON Schema), the deck's actions, then its external
tools.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .._builtin_tools import offered_tools, tool_definition
from .._deck import Deck
from .._openresponses import (
    ResponseFunctionDefinition,
    ResponseTextConfig,
    ResponseToolDefinition,
    json_schema_text_format,
)
from .._permissions import EffectivePermissions
from .._provider import ResolvedModel
from ._common import END_TOOL, RESPOND_TOOL, RunError
from ._run import _Run


class _RequestParts:
    """Builds the parts of a model request for `_LlmExecution`."""

    run: _Run
    deck: Deck
    permissions: EffectivePermissions | None

    def _builtin_tools(self) -> list[str]:
        """The built-in workspace tools this deck's permissions allow (none by default)."""
        if self.permissions is None:
            return []
        declared = {a.name for a in self.deck.actions} | {t.name for t in self.deck.tools}
        return [n for n in offered_tools(self.permissions.permissions) if n not in declared]

    def _tools(self) -> list[ResponseToolDefinition]:
        deck = self.deck
        tools: list[ResponseToolDefinition] = [
            _tool(d["name"], d["description"], d["parameters"])
            for d in map(tool_definition, self._builtin_tools())
        ]
        envelope_props: dict[str, Any] = {
            "status": {"type": "number", "description": "HTTP-like status, 200 when all went well"},
            "message": {"type": "string"},
            "code": {"type": "string"},
            "meta": {"type": "object"},
        }
        if deck.allow_end:
            tools.append(
                _tool(
                    END_TOOL,
                    "End the whole session once all goals are complete or it must not continue.",
                    {
                        "type": "object",
                        "properties": {**envelope_props, "payload": {}},
                        "additionalProperties": True,
                    },
                )
            )
        if deck.respond:
            payload = (
                deck.response_schema.to_json_schema() if deck.response_schema is not None else {}
            )
            params: dict[str, Any] = {
                "type": "object",
                "properties": {"payload": payload, **envelope_props},
                "additionalProperties": False,
            }
            if deck.response_schema is not None and not deck.response_schema.is_optional:
                params["required"] = ["payload"]
            tools.append(
                _tool(RESPOND_TOOL, "Finish the current deck with a structured response.", params)
            )
        for action in deck.actions:
            schema = action.context_schema
            parameters = (
                schema.to_tool_parameters()
                if schema is not None
                else {"type": "object", "properties": {}}
            )
            tools.append(_tool(action.name, action.description or None, parameters))
        for tool in deck.effective_tools:
            parameters = (
                tool.input_schema.to_tool_parameters()
                if tool.input_schema is not None
                else {"type": "object", "additionalProperties": True}
            )
            tools.append(_tool(tool.name, tool.description, parameters))
        return tools

    def _text_config(self) -> ResponseTextConfig | None:
        schema = self.deck.response_schema
        if self.deck.respond or schema is None or not _is_structured(schema.to_json_schema()):
            return None
        return json_schema_text_format(_format_name(self.deck), schema.to_json_schema())

    def _resolve_model(self) -> ResolvedModel:
        deck = self.deck
        params = deck.model_params.provider_params() or None
        models = deck.model_params.models or []
        # A resolver gets one model as a string, and a fallback list only when there is one.
        candidate: str | list[str] | None = (
            self.run.model_override
            or (models[0] if len(models) == 1 else list(models) or None)
            or self.run.default_model
        )
        if not candidate and self.run.resolver is None:
            raise RunError(
                f"No model configured for deck {deck.path} and no --model provided",
                code="no_model",
                deck_path=deck.path,
            )
        if self.run.resolver is not None:
            # No model at all reaches the resolver as an empty list: the router answers it
            # with its offline fallback when it has one, else raises "No model configured".
            candidate = candidate or []
            resolved = self.run.resolver.resolve_model(
                candidate, params=params, deck_path=deck.path
            )
            if resolved.params is None:
                resolved.params = params
            return resolved
        assert candidate  # checked above when there is no resolver
        model = candidate if isinstance(candidate, str) else candidate[0]
        return ResolvedModel(model=model, params=params)


def _tool(name: str, description: str | None, parameters: dict[str, Any]) -> ResponseToolDefinition:
    return ResponseToolDefinition(
        function=ResponseFunctionDefinition(
            name=name, description=description, parameters=parameters
        )
    )


def _is_structured(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind != "string"
    if isinstance(kind, list):
        return not all(k == "string" for k in kind)
    return isinstance(schema.get("properties"), dict)


def _format_name(deck: Deck) -> str:
    base = deck.label or Path(deck.path).stem.split(".")[0]
    if Path(deck.path).name == "PROMPT.md" and not deck.label:
        base = Path(deck.path).parent.name
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")[:64]
    return name or "gambit_response"
