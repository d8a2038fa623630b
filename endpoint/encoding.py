"""What a `/v1/responses` call answers: the `ResponseResource` with every field the
specification requires, and its stream events, from the one event encoder every stream of
Gambit uses (`gambit.core.provider.ResponseEventEncoder`; docs/decisions.md, "One event
encoder").

The stream is the specification's sequence (created, in_progress, output_item.added,
content_part.added, output_text.delta..., output_text.done, content_part.done,
output_item.done, completed | failed | incomplete), every event numbered. Extension items a
run produces (a deck's `ctx.emit_output_item`, a provider's namespaced items) are output
items of the response, streamed with output_item.added / done; their type is namespaced
(`gambit:<type>` unless it already is, as `[[responseItemExtensions]]` types are). A
reasoning item keeps its type and fields (`summary`, `encrypted_content`) as received.

A proxied provider model's stream is relayed item by item (`relay`), in the upstream's
order: each item's added event, its text and argument deltas, its reasoning summary events
and its done event, renumbered into this response's stream.
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
# Upstream events relayed as they are (renumbered, the output index ours): the events of an
# item's parts that the encoder does not build itself.
RELAYED_EVENTS = frozenset(
    {
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning.delta",
        "response.reasoning.done",
        "response.refusal.delta",
        "response.refusal.done",
        "response.output_text.annotation.added",
    }
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
    """An item as the response carries it: a reasoning item as it is, any other type that
    the specification does not define namespaced (`gambit:<type>` for a bare one); an id,
    and a status of the item state machine."""
    item = dict(raw)
    kind = item.get("type")
    if kind == "reasoning":
        item.setdefault("summary", [])
    elif not is_namespaced(kind):
        item["type"] = f"{EXTENSION_NAMESPACE}:{kind}"
    if not isinstance(item.get("id"), str) or not item["id"]:
        item["id"] = new_id("rs" if kind == "reasoning" else "item")
    if item.get("status") not in ("completed", "incomplete"):
        item["status"] = "completed"
    return item


def output_item(raw: dict[str, Any]) -> dict[str, Any]:
    """An upstream's output item in the shape the response carries: the specification's
    required fields filled in (an id, a status; a text part's `annotations` and
    `logprobs`), any other type as `extension_item` makes it."""
    item = dict(raw)
    kind = item.get("type")
    if kind == "message":
        item.setdefault("role", "assistant")
        item["content"] = [_output_part(part) for part in item.get("content") or []]
    elif kind == "function_call":
        item.setdefault("arguments", "")
    elif kind != "function_call_output":
        return extension_item(item)
    if not isinstance(item.get("id"), str) or not item["id"]:
        item["id"] = new_id("msg" if kind == "message" else "fc")
    if item.get("status") not in ("in_progress", "completed", "incomplete"):
        item["status"] = "completed"
    return item


def _output_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "output_text":
        return {"annotations": [], "logprobs": [], **part}
    return part


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
        # A proxied stream: the upstream's output index -> ours, for the items relayed.
        self._relayed: dict[int, int] = {}
        # Why the response stopped short (`{"reason": "max_output_tokens"}`), if it did.
        self.incomplete: dict[str, Any] | None = None

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
            "incomplete_details": self.incomplete if status == "incomplete" else None,
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
            "parallel_tool_calls": body.parallel_tool_calls is not False,
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
            "max_tool_calls": body.max_tool_calls,
            "store": body.store is not False,
            "background": False,
            "service_tier": "default",
            "metadata": body.metadata or {},
            "safety_identifier": body.safety_identifier,
            "prompt_cache_key": body.prompt_cache_key,
            "user": body.user,
        }

    @property
    def relayed(self) -> bool:
        """Whether a proxied model's stream was relayed."""
        return bool(self._relayed)

    def report_deck_sampling(self, own: dict[str, Any]) -> None:
        """A deck's own `[modelParams]` values under the request's (what the run will use,
        `running.Runner._model_params` makes the same choice)."""
        for key, source in (
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("presence_penalty", "presence_penalty"),
            ("frequency_penalty", "frequency_penalty"),
            ("reasoning", "reasoning"),
            ("max_output_tokens", "max_tokens"),
        ):
            if self.sampling.get(key) is None and own.get(source) is not None:
                self.sampling[key] = own[source]

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
        """An extension or reasoning item the run produced, whole (once per id)."""
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
        incomplete response, and only as its last item (the specification's item rule)."""
        events: list[Event] = []
        if final_text and self._message is None and not paused:
            self._message, events = self.events.open_message()
        if self._message is None:
            return events
        if final_text and final_text.startswith(self.text) and final_text != self.text:
            events += self.text_delta(final_text[len(self.text) :])
        last = self._message == len(self.output) - 1 and not paused
        status = "incomplete" if self.incomplete is not None and last else "completed"
        return events + self.events.close(self._message, status=status)

    # -- a proxied provider model's stream ------------------------------------------------

    def relay(self, event: dict[str, Any]) -> list[Event]:
        """One event of the upstream's stream, as this response's events: items open, grow
        and close as the upstream's do, in its order."""
        kind = event.get("type")
        upstream = event.get("output_index")
        if not isinstance(upstream, int) or isinstance(upstream, bool):
            return []
        if kind == "response.output_item.added":
            item = event.get("item")
            if not isinstance(item, dict) or upstream in self._relayed:
                return []
            index, events = self._open_relayed(item)
            self._relayed[upstream] = index
            return events
        found = self._relayed.get(upstream)
        if found is None or not self.events.is_open(found):
            return []
        index = found
        if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            part = event.get("content_index")
            part = part if isinstance(part, int) and not isinstance(part, bool) else 0
            return self.events.text_delta(index, event["delta"], content_index=part)
        if kind == "response.function_call_arguments.delta" and isinstance(event.get("delta"), str):
            return self.events.arguments_delta(index, event["delta"])
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            final = self._final_relayed(index, event["item"])
            return self.events.close(index, status=final["status"], item=final)
        if kind in RELAYED_EVENTS:
            fields = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
            fields["output_index"] = index
            if "item_id" in fields:
                fields["item_id"] = self.output[index].get("id")
            return [self.events.event(kind, **fields)]
        return []  # parts' own added/done events: the encoder makes them

    def relay_rest(self, output: list[dict[str, Any]]) -> list[Event]:
        """The upstream's final output: the items its stream did not carry (all of them for
        an upstream that answered without streaming) are emitted whole, in place; items
        still open are closed as the final output has them."""
        events: list[Event] = []
        for upstream, raw in enumerate(output):
            index = self._relayed.get(upstream)
            if index is None:
                index, opened = self._open_relayed(raw)
                self._relayed[upstream] = index
                events += opened
                item = self.output[index]
                if item["type"] == "message":
                    for number, part in enumerate(raw.get("content") or []):
                        text = part.get("text") if isinstance(part, dict) else None
                        if isinstance(text, str) and text:
                            events += self.events.text_delta(index, text, content_index=number)
                elif item["type"] == "function_call" and raw.get("arguments"):
                    events += self.events.arguments_delta(index, str(raw["arguments"]))
            if self.events.is_open(index):
                final = self._final_relayed(index, raw)
                events += self.events.close(index, status=final["status"], item=final)
        return events + self.events.close_all()

    def _open_relayed(self, raw: dict[str, Any]) -> tuple[int, list[Event]]:
        kind = raw.get("type")
        item_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        if kind == "message":
            return self.events.open_message({"id": item_id} if item_id else None)
        if kind == "function_call":
            return self.events.open_function_call(
                str(raw.get("call_id") or raw.get("id") or new_id("call")),
                str(raw.get("name") or ""),
                item_id=item_id,
            )
        item = output_item(raw)
        self._seen_items.add(item["id"])
        return self.events.open_item(item)

    def _final_relayed(self, index: int, raw: dict[str, Any]) -> dict[str, Any]:
        """The upstream's done item, with what the stream gave it here (its id and type)."""
        current = self.output[index]
        final = output_item({**raw, "id": current["id"], "type": current["type"]})
        if final["type"] == "message" and not final.get("content"):
            final["content"] = [dict(part) for part in current.get("content") or []]
        if final["type"] == "function_call" and not raw.get("arguments"):
            final["arguments"] = current.get("arguments", "")
        return final

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
