"""What a `/v1/responses` call answers: the `ResponseResource` with every field the
specification requires, and its stream events, from the one event encoder every stream of
Gambit uses (`gambit.core.provider.ResponseEventEncoder`; docs/decisions.md, "One event
encoder").

The stream is the specification's sequence (created, in_progress, output_item.added,
content_part.added, output_text.delta..., output_text.done, content_part.done,
output_item.done, completed | failed | incomplete), every event numbered. Extension items a
run produces (a deck's `ctx.emit_output_item`, a provider's namespaced items) are output
items of the response, streamed with output_item.added / done; their type is namespaced
(`gambit:<type>` unless it already is, as `[[responseItemExtensions]]` types are).
"""

from __future__ import annotations

import re
import time
from typing import Any

from endpoint.schemas import CreateResponseBody
from gambit.core import new_id
from gambit.core.provider import ResponseEventEncoder

Event = dict[str, Any]

# Item types the specification defines; any other type is an extension item and must be
# namespaced with a slug (`slug:name`, the specification's "Items are extensible").
SPEC_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "compaction"}
)
EXTENSION_NAMESPACE = "gambit"
_NAMESPACED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:[A-Za-z0-9][A-Za-z0-9_.:-]*$")
# Sampling values a response reports when neither the request nor the deck set them (the
# values the Responses API documents as its defaults).
DEFAULT_SAMPLING = {
    "temperature": 1.0,
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


def is_namespaced(kind: Any) -> bool:
    return isinstance(kind, str) and bool(_NAMESPACED.match(kind))


def extension_item(raw: dict[str, Any]) -> dict[str, Any]:
    """An extension item as the response carries it: a namespaced type (`gambit:<type>` for a
    bare one), an id, and a status of the item state machine."""
    item = dict(raw)
    kind = item.get("type")
    if not is_namespaced(kind):
        item["type"] = f"{EXTENSION_NAMESPACE}:{kind}"
    if not isinstance(item.get("id"), str) or not item["id"]:
        item["id"] = new_id("item")
    if item.get("status") not in ("completed", "incomplete"):
        item["status"] = "completed"
    return item


class ResponseEncoder:
    """One call's resource and events: the text as it streams, extension items, the client
    tool call a paused run hands back, the error and the terminal event."""

    def __init__(self, body: CreateResponseBody, response_id: str) -> None:
        self.body = body
        self.response_id = response_id
        self.created_at = int(time.time())
        self.completed_at: int | None = None  # set once: the stored resource is the answered one
        self.usage: dict[str, Any] | None = None
        # What the response reports as used: the request's values until the deck's own
        # `[modelParams]` are known (after it loads), then the effective ones.
        self.sampling: dict[str, Any] = {
            "temperature": body.temperature,
            "top_p": body.top_p,
            "presence_penalty": None,
            "frequency_penalty": None,
            "reasoning": None,
            "max_output_tokens": body.max_output_tokens,
        }
        self.events = ResponseEventEncoder()
        self._seen_items: set[str] = set()
        self._message: int | None = None  # the output index of the assistant message
        self.text = ""  # its text so far

    @property
    def output(self) -> list[dict[str, Any]]:
        return self.events.output

    def resource(self, status: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `ResponseResource`, with every field the specification requires."""
        done = status in ("completed", "failed", "incomplete")
        if done and self.completed_at is None:
            self.completed_at = int(time.time())
        body = self.body
        sampling = {
            key: float(self.sampling[key]) if self.sampling[key] is not None else default
            for key, default in DEFAULT_SAMPLING.items()
        }
        reasoning = self.sampling["reasoning"]
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": self.completed_at if done else None,
            "status": status,
            "incomplete_details": None,
            "model": body.model,
            "previous_response_id": body.previous_response_id,
            "instructions": body.instructions,
            "output": [dict(item) for item in self.output],
            "error": error,
            "tools": [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": t.strict,
                }
                for t in body.tools or []
            ],
            "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
            "truncation": "disabled",
            "parallel_tool_calls": False,
            "text": {"format": {"type": "text"}},
            **sampling,
            "top_logprobs": 0,
            "reasoning": {
                "effort": reasoning.get("effort"),
                "summary": reasoning.get("summary"),
            }
            if isinstance(reasoning, dict)
            else None,
            "usage": self.usage,
            "max_output_tokens": self.sampling["max_output_tokens"],
            "max_tool_calls": None,
            "store": body.store is not False,
            "background": False,
            "service_tier": "default",
            "metadata": body.metadata or {},
            "safety_identifier": body.safety_identifier,
            "prompt_cache_key": body.prompt_cache_key,
            "user": body.user,
        }

    def set_usage(self, usage: dict[str, Any]) -> None:
        """The run's usage (the trace's camelCase counts) as the response reports it."""
        self.usage = {
            "input_tokens": int(usage.get("promptTokens") or 0),
            "output_tokens": int(usage.get("completionTokens") or 0),
            "total_tokens": int(usage.get("totalTokens") or 0),
            "input_tokens_details": {
                "cached_tokens": int(usage.get("cachedTokens") or 0),
                "cache_write_tokens": 0,  # not counted; the openai SDK's type requires it
            },
            "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoningTokens") or 0)},
        }

    # -- events -----------------------------------------------------------------------------

    def opening(self) -> list[Event]:
        """`response.created` and `response.in_progress`."""
        return self.events.created(self.resource("in_progress"))

    def extension(self, raw: dict[str, Any]) -> list[Event]:
        """An extension item the run produced, whole (once per id)."""
        item = extension_item(raw)
        if item["id"] in self._seen_items:
            return []
        self._seen_items.add(item["id"])
        return self.events.item(item)

    def text_delta(self, delta: str) -> list[Event]:
        """Text of the answer; the assistant message opens with the first."""
        events: list[Event] = []
        if self._message is None:
            self._message, events = self.events.open_message()
        self.text += delta
        return events + self.events.text_delta(self._message, delta)

    def answer(self, final_text: str, paused: bool) -> list[Event]:
        """The run's answer is known: a message for a run that streamed nothing, the rest of
        a text that the stream did not carry whole, and the message closed. The text so far
        is whole even when the run then failed: an item ends `incomplete` only in an
        incomplete response (the specification's item rule)."""
        events: list[Event] = []
        if final_text and self._message is None and not paused:
            self._message, events = self.events.open_message()
        if self._message is None:
            return events
        if final_text and final_text.startswith(self.text) and final_text != self.text:
            events += self.text_delta(final_text[len(self.text) :])
        return events + self.events.close(self._message)

    def function_call(self, call_id: str, name: str, arguments: str) -> list[Event]:
        """The client tool call a deck made: the run stops there and hands it over."""
        index, events = self.events.open_function_call(call_id, name)
        events += self.events.arguments_delta(index, arguments)
        return events + self.events.close(index)

    def error(self, type_: str, error: dict[str, Any], param: str | None) -> Event:
        """The specification's `error` event; "any error incurred while streaming will be
        followed by a response.failed event"."""
        message = error.get("message") or "the response failed"
        return self.events.error(type_, error.get("code"), message, param)

    def terminal(self, final: dict[str, Any]) -> Event:
        return self.events.terminal(final)
