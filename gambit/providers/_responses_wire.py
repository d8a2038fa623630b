"""Open Responses wire mapping: request bodies, response parsing and stream aggregation.

Shared by every adapter that talks to a `/responses` endpoint (OpenAI, OpenRouter, Ollama,
generic Open Responses servers). Adapter differences are `WireOptions`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gambit.core.provider import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    MessageItem,
    ResponseError,
    ResponseStatus,
    ResponseToolDefinition,
    ResponseUsage,
    UnknownItem,
    item_from_dict,
    item_to_dict,
)

__all__ = [
    "CONTEXT_TOOL_NAMES",
    "ResponsesAccumulator",
    "WireOptions",
    "context_stub_tools",
    "parse_response",
    "parse_usage",
    "responses_body",
]

CONTEXT_TOOL_NAMES = ("gambit_context", "gambit_init")

_PROVIDER_ID = re.compile(r"^[A-Za-z]+_[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class WireOptions:
    """How one adapter shapes its requests."""

    # Add stub tools for gambit_context/gambit_init calls replayed in the input (OpenRouter).
    stub_context_tools: bool = False
    # Force `text.format.strict` to this value (OpenRouter: False); None keeps it.
    text_strict: bool | None = None
    # Drop `ns:type` extension items from the input (OpenAI rejects unknown item types).
    drop_extension_items: bool = False
    # Keep only item ids that look like the provider's own (`msg_...`, `fc_...`, `rs_...`).
    provider_ids_only: bool = False
    # Send `verbosity` as `text.verbosity` (OpenAI Responses) instead of top level.
    verbosity_in_text: bool = False


def context_stub_tools(
    items: Iterable[Any], tools: list[dict[str, Any]], *, flat: bool
) -> list[dict[str, Any]]:
    """Stub definitions for synthetic context calls in `items` that `tools` lacks."""
    have = {tool.get("name") or (tool.get("function") or {}).get("name") for tool in tools}
    stubs: list[dict[str, Any]] = []
    for item in items:
        name = getattr(item, "name", None) if isinstance(item, FunctionCallItem) else None
        if name in CONTEXT_TOOL_NAMES and name not in have:
            have.add(name)
            params = {"type": "object", "properties": {}, "additionalProperties": False}
            fn = {
                "name": name,
                "description": "Synthetic Gambit context payload.",
                "parameters": params,
            }
            stubs.append(
                {"type": "function", **fn, "strict": False}
                if flat
                else {"type": "function", "function": fn}
            )
    return stubs


def _normalise_parameters(parameters: Any) -> dict[str, Any]:
    if not isinstance(parameters, Mapping):
        return {"type": "object", "properties": {}}
    params = dict(parameters)
    if params.get("type") == "object":
        props = params.get("properties")
        if not isinstance(props, Mapping):
            props = params["properties"] = {}
        if isinstance(params.get("required"), list):
            params["required"] = [key for key in params["required"] if key in props]
    return params


def flat_tool(tool: ResponseToolDefinition) -> dict[str, Any]:
    """Nested form `{type, function:{name, description, parameters}}` -> Responses flat form."""
    fn = tool.function
    out: dict[str, Any] = {"type": "function", "name": fn.name}
    if fn.description is not None:
        out["description"] = fn.description
    out["parameters"] = _normalise_parameters(fn.parameters)
    strict = (fn.model_extra or {}).get("strict")
    out["strict"] = bool(strict) if strict is not None else False
    return out


def _wire_input_item(item: Any, options: WireOptions) -> dict[str, Any] | None:
    data = item_to_dict(item)
    if isinstance(item, MessageItem):
        part_type = "output_text" if item.role == "assistant" else "input_text"
        content = []
        for part in data.get("content") or []:
            if part.get("type") in ("input_text", "output_text"):
                part = {**part, "type": part_type}
            content.append(part)
        data["content"] = content
    elif isinstance(item, UnknownItem) and options.drop_extension_items and ":" in item.type:
        return None
    item_id = data.get("id")
    if options.provider_ids_only and isinstance(item_id, str) and not _PROVIDER_ID.match(item_id):
        data.pop("id")
    return data


def wire_input(items: Iterable[Any], options: WireOptions) -> list[dict[str, Any]]:
    out = []
    for item in items:
        wired = _wire_input_item(item, options)
        if wired is not None:
            out.append(wired)
    return out


def _tool_choice(choice: Any) -> Any:
    if choice is None or isinstance(choice, str):
        return choice
    return {"type": "function", "name": choice.function.name}


def request_extras(request: CreateResponseRequest) -> dict[str, Any]:
    """Top-level request fields outside the declared ones (store, include, ...)."""
    return {k: v for k, v in (request.model_extra or {}).items() if v is not None}


def responses_body(
    request: CreateResponseRequest,
    *,
    model: str,
    options: WireOptions = WireOptions(),
    input_items: list[Any] | None = None,
) -> dict[str, Any]:
    """The JSON body for `POST /responses`.

    `params` first (so explicit request fields win), with `max_tokens` ->
    `max_output_tokens`; then extra top-level request fields; then the declared fields.
    """
    params = dict(request.params or {})
    body: dict[str, Any] = {}
    max_tokens = params.pop("max_tokens", None)
    verbosity = params.pop("verbosity", None) if options.verbosity_in_text else None
    body.update(params)
    if max_tokens is not None and "max_output_tokens" not in body:
        body["max_output_tokens"] = max_tokens
    body.update(request_extras(request))
    body["model"] = model
    items = request.input if input_items is None else input_items
    body["input"] = wire_input(items, options)
    if request.instructions is not None:
        body["instructions"] = request.instructions
    tools = [flat_tool(tool) for tool in request.tools or []]
    if options.stub_context_tools:
        tools += context_stub_tools(request.input, tools, flat=True)
    if tools:
        body["tools"] = tools
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.stream:
        body["stream"] = True
    else:
        body.pop("stream", None)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if request.metadata is not None:
        body["metadata"] = request.metadata
    if request.previous_response_id is not None:
        body["previous_response_id"] = request.previous_response_id
    text = dict(body.get("text") or {}) if isinstance(body.get("text"), Mapping) else {}
    if request.text is not None:
        text.update(request.text.to_dict())
    fmt = text.get("format")
    if (
        options.text_strict is not None
        and isinstance(fmt, Mapping)
        and fmt.get("type") == "json_schema"
    ):
        text["format"] = {**fmt, "strict": options.text_strict}
    if verbosity is not None:
        text["verbosity"] = verbosity
    if text:
        body["text"] = text
    return {k: v for k, v in body.items() if v is not None}


# --------------------------------------------------------------------------- responses


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_usage(data: Any) -> ResponseUsage | None:
    """Open Responses (`input_tokens`...) or chat (`prompt_tokens`...) usage -> ResponseUsage."""
    if not isinstance(data, Mapping):
        return None
    prompt = _int(data.get("input_tokens", data.get("prompt_tokens"))) or 0
    completion = _int(data.get("output_tokens", data.get("completion_tokens"))) or 0
    total = _int(data.get("total_tokens"))
    in_details = data.get("input_tokens_details") or data.get("prompt_tokens_details") or {}
    out_details = data.get("output_tokens_details") or data.get("completion_tokens_details") or {}
    cached = _int(in_details.get("cached_tokens")) if isinstance(in_details, Mapping) else None
    reasoning = (
        _int(out_details.get("reasoning_tokens")) if isinstance(out_details, Mapping) else None
    )
    extra: dict[str, Any] = {}
    cost = data.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        extra["costUsd"] = float(cost)
    # Every value is normalised above, so the model is built without its validator (whose
    # first build costs a one-turn run several milliseconds).
    return ResponseUsage.model_construct(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        reasoning_tokens=reasoning,
        cached_tokens=cached,
        **extra,
    )


def parse_output_item(raw: Any) -> Any:
    """One output item; anything that does not validate is kept verbatim as `UnknownItem`."""
    if not isinstance(raw, Mapping):
        return UnknownItem(type="unknown", value=raw)
    data = dict(raw)
    if data.get("type") == "function_call" and not isinstance(data.get("arguments"), str):
        data["arguments"] = json.dumps(data.get("arguments") or {})
    if data.get("type") == "function_call" and not data.get("call_id") and data.get("id"):
        data["call_id"] = data["id"]
    try:
        return item_from_dict(data)
    except ValidationError:
        return UnknownItem(**{**data, "type": str(data.get("type") or "unknown")})


_STATUS: dict[str, ResponseStatus] = {
    "completed": "completed",
    "in_progress": "in_progress",
    "queued": "in_progress",
    "incomplete": "incomplete",
    "failed": "failed",
    "cancelled": "failed",
}

_KEEP_FIELDS = ("incomplete_details", "previous_response_id")


def parse_response(data: Any, *, fallback_id: str = "resp_unknown") -> CreateResponseResponse:
    """An Open Responses `response` object -> `CreateResponseResponse`."""
    if not isinstance(data, Mapping):
        data = {}
    status = data.get("status")
    extras = {key: data[key] for key in _KEEP_FIELDS if data.get(key) is not None}
    error = data.get("error")
    model, created = data.get("model"), data.get("created_at", data.get("created"))
    fields: dict[str, Any] = {
        "id": str(data.get("id") or fallback_id),
        "model": model,
        "created": created,
        "status": _STATUS.get(status, "failed") if isinstance(status, str) else None,
        "output": [parse_output_item(item) for item in data.get("output") or []],
        "usage": parse_usage(data.get("usage")),
        "error": ResponseError(code=error.get("code"), message=error.get("message"))
        if isinstance(error, Mapping)
        else None,
        **extras,
    }
    # All but `model` and `created` are normalised above. When those two have their declared
    # types the response is built without the validator (its first build, with pydantic's
    # search of every installed package for plugins, cost a one-turn run several
    # milliseconds); otherwise validation says what is wrong with them.
    if (model is None or type(model) is str) and (created is None or type(created) in _NUMBER):
        return CreateResponseResponse.model_construct(**fields)
    return CreateResponseResponse(**fields)


_NUMBER = (int, float)


# --------------------------------------------------------------------------- streaming


class ResponsesAccumulator:
    """Aggregates an Open Responses event stream into the final response.

    The terminal event's `response` is authoritative when it carries output; otherwise the
    output is rebuilt from the item, content-part, text and argument events. `partial_text`
    is every `output_text` delta seen so far (what the user already saw).
    """

    TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")

    def __init__(self) -> None:
        self.events = 0
        self.response: dict[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.done_items: set[int] = set()
        self.texts: dict[tuple[int, int], list[str]] = {}
        self.args: dict[int, list[str]] = {}
        self.summaries: dict[tuple[int, int], list[str]] = {}
        self._partial: list[str] = []
        self.terminal: str | None = None
        self.final: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None

    @property
    def partial_text(self) -> str:
        return "".join(self._partial)

    def feed(self, event: Mapping[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                key = (_int(event.get("output_index")) or 0, _int(event.get("content_index")) or 0)
                self.texts.setdefault(key, []).append(delta)
                self._partial.append(delta)
        elif kind == "response.function_call_arguments.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                self.args.setdefault(_int(event.get("output_index")) or 0, []).append(delta)
        elif kind == "response.output_text.done":
            key = (_int(event.get("output_index")) or 0, _int(event.get("content_index")) or 0)
            if isinstance(event.get("text"), str):
                if key not in self.texts:
                    self._partial.append(event["text"])
                self.texts[key] = [event["text"]]
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
        ):
            key = (_int(event.get("output_index")) or 0, _int(event.get("summary_index")) or 0)
            if kind.endswith(".delta") and isinstance(event.get("delta"), str):
                self.summaries.setdefault(key, []).append(event["delta"])
            elif isinstance(event.get("text"), str):
                self.summaries[key] = [event["text"]]
        elif kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                self.args[_int(event.get("output_index")) or 0] = [event["arguments"]]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, Mapping):
                index = _int(event.get("output_index"))
                if index is None:
                    index = len(self.items)
                self.items[index] = dict(item)
                if kind == "response.output_item.done":
                    self.done_items.add(index)
        elif kind == "response.content_part.added" or kind == "response.content_part.done":
            index = _int(event.get("output_index")) or 0
            part = event.get("part")
            item = self.items.get(index)
            if item is not None and isinstance(part, Mapping) and index not in self.done_items:
                content = list(item.get("content") or [])
                cidx = _int(event.get("content_index")) or 0
                while len(content) <= cidx:
                    content.append({"type": part.get("type", "output_text"), "text": ""})
                content[cidx] = dict(part)
                item["content"] = content
        elif kind in ("response.created", "response.in_progress"):
            if isinstance(event.get("response"), Mapping):
                self.response = dict(event["response"])
        elif kind in self.TERMINAL:
            self.terminal = kind
            if isinstance(event.get("response"), Mapping):
                self.final = dict(event["response"])
            if kind == "error":
                nested = event.get("error")
                if isinstance(nested, Mapping):
                    self.error = dict(nested)
                else:  # OpenAI's flat form: {"type": "error", "code", "message", "param"}
                    self.error = {k: event[k] for k in ("code", "message", "param") if k in event}
            elif kind == "response.failed":
                err = (self.final or {}).get("error") or event.get("error")
                self.error = dict(err) if isinstance(err, Mapping) else {}

    def rebuilt_output(self) -> list[dict[str, Any]]:
        output = []
        for index in sorted(self.items):
            item = dict(self.items[index])
            if index not in self.done_items:
                if item.get("type") == "message":
                    item["content"] = _streamed_parts(
                        item.get("content"), self.texts.items(), index, "output_text"
                    )
                elif item.get("type") == "function_call" and index in self.args:
                    item["arguments"] = "".join(self.args[index])
                elif item.get("type") == "reasoning":
                    item["summary"] = _streamed_parts(
                        item.get("summary"), sorted(self.summaries.items()), index, "summary_text"
                    )
                item["status"] = item.get("status") or "in_progress"
            output.append(item)
        return output

    def result(self) -> CreateResponseResponse:
        data = dict(self.final or self.response)
        if not data.get("output"):
            data["output"] = self.rebuilt_output()
        return parse_response(data)


def _streamed_parts(
    parts: Any,
    pieces: Iterable[tuple[tuple[int, int], list[str]]],
    index: int,
    part_type: str,
) -> list[dict[str, Any]]:
    """The parts (content or summary) of the output item at `index` of a stream cut short,
    each with the text its deltas brought so far (`pieces` by (item, part) index); a part
    only deltas announced is added as `part_type`."""
    rebuilt = [dict(p) for p in parts or []]
    for (out_idx, part_idx), texts in pieces:
        if out_idx != index:
            continue
        while len(rebuilt) <= part_idx:
            rebuilt.append({"type": part_type, "text": ""})
        rebuilt[part_idx]["text"] = "".join(texts)
    return rebuilt
