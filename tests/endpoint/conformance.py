"""Validation of what `/v1/responses` emits against the Open Responses specification's schemas.

The schemas are those of `openresponses-types` (Apache-2.0, mozilla.ai): pydantic models
generated mechanically from the specification's own OpenAPI document (the package records
the spec version and hash it was generated from; see docs/decisions.md, "Libraries").

Validation is strict in three ways beyond the models' defaults:

- the wire JSON is validated in pydantic's strict JSON mode (no coercion: a number where a
  string is due, or a string where an integer is due, fails);
- a key the schema does not know is reported (the generated models would silently ignore
  it), so a misspelt or invented field cannot slip through; the few extra keys we send on
  purpose are listed in `DELIBERATE_EXTRAS` with the reason;
- every event type has its own model (the generated file has no union of events), so an
  event whose `type` the specification does not define fails.

Extension items (types namespaced `<slug>:<name>`) are defined by the specification's prose
("Items are extensible": a provider's own item types MUST be prefixed with its slug), not by
the OpenAPI document, whose output-item unions list only the common items. They are checked
against that rule (namespaced type, an `id`, a `status` of the item state machine) and the
event or resource around them is validated with the item set aside.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openresponses_types as spec
from pydantic import BaseModel, ValidationError

EVENT_MODELS: dict[str, type[BaseModel]] = {
    "response.created": spec.ResponseCreatedStreamingEvent,
    "response.queued": spec.ResponseQueuedStreamingEvent,
    "response.in_progress": spec.ResponseInProgressStreamingEvent,
    "response.completed": spec.ResponseCompletedStreamingEvent,
    "response.failed": spec.ResponseFailedStreamingEvent,
    "response.incomplete": spec.ResponseIncompleteStreamingEvent,
    "response.output_item.added": spec.ResponseOutputItemAddedStreamingEvent,
    "response.output_item.done": spec.ResponseOutputItemDoneStreamingEvent,
    "response.content_part.added": spec.ResponseContentPartAddedStreamingEvent,
    "response.content_part.done": spec.ResponseContentPartDoneStreamingEvent,
    "response.output_text.delta": spec.ResponseOutputTextDeltaStreamingEvent,
    "response.output_text.done": spec.ResponseOutputTextDoneStreamingEvent,
    "response.output_text.annotation.added": spec.ResponseOutputTextAnnotationAddedStreamingEvent,
    "response.refusal.delta": spec.ResponseRefusalDeltaStreamingEvent,
    "response.refusal.done": spec.ResponseRefusalDoneStreamingEvent,
    "response.reasoning.delta": spec.ResponseReasoningDeltaStreamingEvent,
    "response.reasoning.done": spec.ResponseReasoningDoneStreamingEvent,
    "response.reasoning_summary_part.added": spec.ResponseReasoningSummaryPartAddedStreamingEvent,
    "response.reasoning_summary_part.done": spec.ResponseReasoningSummaryPartDoneStreamingEvent,
    "response.reasoning_summary_text.delta": spec.ResponseReasoningSummaryDeltaStreamingEvent,
    "response.reasoning_summary_text.done": spec.ResponseReasoningSummaryDoneStreamingEvent,
    "response.function_call_arguments.delta": spec.ResponseFunctionCallArgumentsDeltaStreamingEvent,
    "response.function_call_arguments.done": spec.ResponseFunctionCallArgumentsDoneStreamingEvent,
    "error": spec.ErrorStreamingEvent,
}
ITEM_MODELS: dict[str, type[BaseModel]] = {
    "message": spec.Message,
    "function_call": spec.FunctionCall,
    "function_call_output": spec.FunctionCallOutput,
    "reasoning": spec.ReasoningBody,
    "compaction": spec.CompactionBody,
}
EXTENSION_TYPE = re.compile(r"^[a-z0-9][a-z0-9_.-]*:[a-z0-9][a-z0-9_.:-]*$", re.IGNORECASE)
ITEM_STATES = {"in_progress", "completed", "incomplete"}
TERMINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete"}
# Keys the endpoint sends although these schemas do not define them (JSON Schema allows
# extra keys; our check does not, except for these), by the dotted tail of their path.
DELIBERATE_EXTRAS = {
    # The official `openai` SDK's Response type requires it (a client must parse us).
    "usage.input_tokens_details.cache_write_tokens",
    # Required by later revisions of the specification's ResponseResource (nullable).
    "response.user",
}


class NonConformance(AssertionError):
    pass


def _strict(model: type[BaseModel], data: Any, where: str) -> BaseModel:
    try:
        parsed = model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise NonConformance(f"{where} does not validate as {model.__name__}:\n{exc}") from None
    unknown = [
        key
        for key in _unknown_keys(data, parsed.model_dump(mode="json", by_alias=True), where)
        if not any(key.endswith("." + extra) or key == extra for extra in DELIBERATE_EXTRAS)
    ]
    if unknown:
        raise NonConformance(f"{where}: keys the specification does not define: {unknown}")
    return parsed


def _unknown_keys(sent: Any, kept: Any, path: str) -> list[str]:
    """Keys of `sent` that validation dropped (the generated models ignore unknown keys)."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        out = []
        for key, value in sent.items():
            if key not in kept:
                out.append(f"{path}.{key}")
            else:
                out.extend(_unknown_keys(value, kept[key], f"{path}.{key}"))
        return out
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        out = []
        for index, (a, b) in enumerate(zip(sent, kept, strict=True)):
            out.extend(_unknown_keys(a, b, f"{path}[{index}]"))
        return out
    return []


def is_extension(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") not in ITEM_MODELS


def validate_extension_item(item: Any, where: str) -> None:
    """The specification's rule for a provider's own item types ("Items are extensible")."""
    if not isinstance(item, dict):
        raise NonConformance(f"{where}: an item must be an object, not {item!r}")
    kind = item.get("type")
    if not isinstance(kind, str) or not EXTENSION_TYPE.match(kind):
        raise NonConformance(
            f"{where}: item type {kind!r} is neither an item of the specification nor "
            "namespaced with a provider slug (`slug:name`)"
        )
    if not isinstance(item.get("id"), str) or not item["id"]:
        raise NonConformance(f"{where}: extension item {kind!r} has no id")
    if item.get("status") not in ITEM_STATES:
        raise NonConformance(
            f"{where}: extension item {kind!r} has status {item.get('status')!r}, "
            f"not one of {sorted(ITEM_STATES)}"
        )


def _reasoning_as_specified(item: Any, where: str) -> Any:
    """A reasoning item without its `status`: the item state machine ("Items have status",
    the specification's streaming rules) gives every item one, while the OpenAPI document's
    ReasoningBody does not list it; the Responses API sends it. Checked here, then set aside."""
    if not isinstance(item, dict) or item.get("type") != "reasoning" or "status" not in item:
        return item
    if item["status"] not in ITEM_STATES:
        raise NonConformance(f"{where}: reasoning item status {item['status']!r}")
    return {k: v for k, v in item.items() if k != "status"}


def validate_item(item: Any, where: str = "item") -> None:
    if is_extension(item):
        validate_extension_item(item, where)
    else:
        _strict(ITEM_MODELS[item["type"]], _reasoning_as_specified(item, where), where)


def validate_response(resource: Any, where: str = "response") -> Any:
    """A `ResponseResource`; returns the parsed model (extension items set aside)."""
    if not isinstance(resource, dict):
        raise NonConformance(f"{where} is not an object")
    output = resource.get("output")
    if isinstance(output, list):
        for index, item in enumerate(output):
            if is_extension(item):
                validate_extension_item(item, f"{where}.output[{index}]")
        resource = {
            **resource,
            "output": [
                _reasoning_as_specified(item, f"{where}.output[{index}]")
                for index, item in enumerate(output)
                if not is_extension(item)
            ],
        }
    return _strict(spec.ResponseResource, resource, where)


def validate_error_body(body: Any, where: str = "error body") -> None:
    """An HTTP error body: `{"error": {type, code, param, message}}` (every key present)."""
    if not isinstance(body, dict) or set(body) != {"error"}:
        raise NonConformance(f"{where} must be exactly {{'error': {{...}}}}, not {body!r}")
    _strict(spec.ErrorPayload, body["error"], f"{where}.error")


def validate_item_list(body: Any, where: str = "input item list") -> list[dict[str, Any]]:
    """`GET /v1/responses/{id}/input_items`. The specification's OpenAPI document defines no
    list object; the shape is the Responses API's (`object: "list"`, `data`, `first_id`,
    `last_id`, `has_more`), checked exactly, and every item against the specification's item
    schemas. Returns the items."""
    keys = {"object", "data", "first_id", "last_id", "has_more"}
    if not isinstance(body, dict) or set(body) != keys:
        raise NonConformance(f"{where} must have exactly the keys {sorted(keys)}: {body!r}")
    if body["object"] != "list" or not isinstance(body["has_more"], bool):
        raise NonConformance(f"{where}: object must be 'list' and has_more a boolean")
    data = body["data"]
    if not isinstance(data, list):
        raise NonConformance(f"{where}: data must be a list")
    for index, item in enumerate(data):
        validate_item(item, f"{where}.data[{index}]")
    ids = [item["id"] for item in data]
    expected = (ids[0], ids[-1]) if ids else (None, None)
    if (body["first_id"], body["last_id"]) != expected:
        raise NonConformance(f"{where}: first_id / last_id are not the page's ends: {body!r}")
    return data


def validate_deletion(body: Any, response_id: str, where: str = "deletion") -> None:
    """`DELETE /v1/responses/{id}`: the Responses API's deletion object, exactly."""
    expected = {"id": response_id, "object": "response", "deleted": True}
    if body != expected:
        raise NonConformance(f"{where} must be {expected!r}, not {body!r}")


def validate_event(event: Any, where: str = "event") -> None:
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise NonConformance(f"{where} has no type: {event!r}")
    model = EVENT_MODELS.get(event["type"])
    if model is None:
        raise NonConformance(f"{where}: event type {event['type']!r} is not in the specification")
    if "response" in event:
        validate_response(event["response"], f"{where}.response")
        event = {**event, "response": _placeholder_response()}
    if is_extension(event.get("item")):
        validate_extension_item(event["item"], f"{where}.item")
        event = {**event, "item": None}
    elif "item" in event:
        event = {**event, "item": _reasoning_as_specified(event["item"], f"{where}.item")}
    _strict(model, event, where)


def validate_stream(frames: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """A whole SSE stream read as (event name, data) pairs: every event validates, `event:`
    equals the JSON type, sequence numbers run 1..n, every item follows its state machine
    (added before its deltas, done once, nothing after done), the last event is terminal and
    the stream ends with the literal `[DONE]`. Returns the decoded events."""
    if not frames or frames[-1] != (None, "[DONE]"):
        raise NonConformance("the stream does not end with a `data: [DONE]` frame")
    events = []
    for index, (name, data) in enumerate(frames[:-1]):
        event = json.loads(data)
        where = f"event #{index + 1} ({event.get('type')})"
        if name != event.get("type"):
            raise NonConformance(f"{where}: `event: {name}` differs from the JSON type")
        validate_event(event, where)
        events.append(event)
    numbers = [e["sequence_number"] for e in events]
    if numbers != list(range(1, len(events) + 1)):
        raise NonConformance(f"sequence numbers are not 1..n: {numbers}")
    _check_order(events)
    return events


def _check_order(events: list[dict[str, Any]]) -> None:
    kinds = [e["type"] for e in events]
    if kinds[:2] != ["response.created", "response.in_progress"]:
        raise NonConformance(f"the stream must open with created, in_progress: {kinds[:2]}")
    if kinds[-1] not in TERMINAL_EVENTS or sum(k in TERMINAL_EVENTS for k in kinds) != 1:
        raise NonConformance(f"exactly one terminal event, last: {kinds}")
    open_items: dict[int, dict[str, Any]] = {}
    done_items: dict[int, dict[str, Any]] = {}
    open_parts: set[tuple[int, int]] = set()
    for event in events[2:-1]:
        kind, index = event["type"], event.get("output_index")
        if kind == "error":
            continue
        if kind == "response.output_item.added":
            if (
                index in open_items
                or index in done_items
                or index != len(open_items) + len(done_items)
            ):
                raise NonConformance(f"output_item.added at index {index} out of order")
            if event["item"]["status"] != "in_progress":
                raise NonConformance(f"item {index} added with status {event['item']['status']}")
            open_items[index] = event["item"]
            continue
        if index not in open_items:
            raise NonConformance(f"{kind} for output_index {index}, which is not open")
        if kind == "response.content_part.added":
            open_parts.add((index, event["content_index"]))
        elif kind == "response.content_part.done":
            open_parts.discard((index, event["content_index"]))
        elif kind in ("response.output_text.delta", "response.output_text.done"):
            if (index, event["content_index"]) not in open_parts:
                raise NonConformance(f"{kind} outside an open content part")
        elif kind == "response.output_item.done":
            if any(i == index for i, _ in open_parts):
                raise NonConformance(f"item {index} done with a content part still open")
            if event["item"]["status"] == "in_progress":
                raise NonConformance(f"item {index} done while still in_progress")
            if event["item"]["status"] == "incomplete" and final_status(events) != "incomplete":
                # "If an item ends in a terminal state [incomplete], it MUST be the last item
                # emitted, and the containing response also MUST be in an incomplete state."
                raise NonConformance(f"item {index} is incomplete in a response that is not")
            open_items.pop(index)
            done_items[index] = event["item"]
    if open_items:
        raise NonConformance(f"items never done: {sorted(open_items)}")
    final = events[-1]["response"]
    if [i.get("id") for i in final["output"]] != [
        done_items[i].get("id") for i in sorted(done_items)
    ]:
        raise NonConformance("the final response's output differs from the items streamed")
    if final["output"] != [done_items[i] for i in sorted(done_items)]:
        raise NonConformance("an item in the final response differs from its output_item.done")


def final_status(events: list[dict[str, Any]]) -> str:
    return events[-1]["response"]["status"]


def _placeholder_response() -> dict[str, Any]:
    """A minimal valid resource standing in for one already validated on its own."""
    return {
        "id": "resp",
        "object": "response",
        "created_at": 0,
        "completed_at": None,
        "status": "in_progress",
        "incomplete_details": None,
        "model": "m",
        "previous_response_id": None,
        "instructions": None,
        "output": [],
        "error": None,
        "tools": [],
        "tool_choice": "auto",
        "truncation": "disabled",
        "parallel_tool_calls": False,
        "text": {"format": {"type": "text"}},
        "top_p": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": 1.0,
        "reasoning": None,
        "usage": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "store": True,
        "background": False,
        "service_tier": "default",
        "metadata": {},
        "safety_identifier": None,
        "prompt_cache_key": None,
    }
