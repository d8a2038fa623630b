"""The Open Responses stream of one response, built in one place.

`ResponseEventEncoder` numbers the events, opens and closes the output items and their content
parts, and writes the terminal event: every producer of a stream (the `/v1/responses`
endpoint, the Chat Completions stream converter, the offline providers, the agent bridges, a
third-party plugin) says *what* happens (text arrived, a tool call started, the response
ended) and gets back the event dicts to send, in the order and shape the specification
gives (https://www.openresponses.org/specification, "Streaming"):

    response.created, response.in_progress
    per output item:  response.output_item.added
      message:        response.content_part.added, response.output_text.delta...,
                      response.output_text.done, response.content_part.done
      reasoning:      response.reasoning_summary_part.added,
                      response.reasoning_summary_text.delta..., ...text.done, ...part.done
      function call:  response.function_call_arguments.delta..., ...arguments.done
                      response.output_item.done
    response.completed | response.failed | response.incomplete

`full=False` gives the shorter sequence the offline providers and the agent bridges have
always streamed (docs/offline-provider.md, "Streaming"): no `response.in_progress`, no
content-part events, no `logprobs`, and a whole item is added as it is.

The encoder holds no I/O: each method returns the events, and the caller sends them (yields
them, calls a callback, awaits one). The response resource inside `response.created` and the
terminal event is the caller's (each producer reports different fields); `output` is the
items as streamed, for that resource.
"""

from __future__ import annotations

from typing import Any

from ._ids import new_id

__all__ = ["TERMINAL_EVENTS", "ResponseEventEncoder"]

Event = dict[str, Any]

# The terminal event of each final status of a response.
TERMINAL_EVENTS = {
    "completed": "response.completed",
    "failed": "response.failed",
    "incomplete": "response.incomplete",
}


class ResponseEventEncoder:
    """The events of one streamed response, numbered 1, 2, ... (see the module doc).

    Items are addressed by their output index (what `open_*` returns), so several may be
    open at once (a chat stream's parallel tool calls); `close_all` closes what is left, in
    order.
    """

    def __init__(self, *, full: bool = True) -> None:
        self.full = full
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self._open: dict[int, str] = {}  # output index -> item kind, while it is open
        self._parts: dict[int, int] = {}  # output index -> its open content part

    # -- events ----------------------------------------------------------------------------

    def event(self, type_: str, **fields: Any) -> Event:
        """One event of this stream, with the next sequence number."""
        self.sequence += 1
        return {"type": type_, "sequence_number": self.sequence, **fields}

    def created(self, response: dict[str, Any]) -> list[Event]:
        """`response.created` (and `response.in_progress`) with the in-progress resource."""
        events = [self.event("response.created", response=response)]
        if self.full:
            events.append(self.event("response.in_progress", response=response))
        return events

    def terminal(self, response: dict[str, Any], **fields: Any) -> Event:
        """The last event, by the resource's status (`completed`, `failed`, `incomplete`)."""
        return self.event(TERMINAL_EVENTS[response["status"]], response=response, **fields)

    def error(self, type_: str, code: str | None, message: str, param: str | None = None) -> Event:
        """The `error` event; the specification has it followed by `response.failed`."""
        return self.event(
            "error", error={"type": type_, "code": code, "message": message, "param": param}
        )

    # -- items -----------------------------------------------------------------------------

    def is_open(self, index: int) -> bool:
        return index in self._open

    def _add(self, kind: str, item: dict[str, Any], shown: dict[str, Any]) -> tuple[int, Event]:
        index = len(self.output)
        self.output.append(item)
        self._open[index] = kind
        return index, self.event("response.output_item.added", output_index=index, item=shown)

    def open_message(self, item: dict[str, Any] | None = None) -> tuple[int, list[Event]]:
        """An assistant message starts (empty, `in_progress`); its first part opens with it
        (`full`). `item` gives the message's own fields (an id, say); the text arrives by
        `text_delta`."""
        message: dict[str, Any] = {"type": "message"}
        if self.full and not (item or {}).get("id"):
            message["id"] = new_id("msg")
        message.update({"role": "assistant", **(item or {}), "status": "in_progress"})
        message["content"] = []
        index, added = self._add("message", message, {**message, "content": []})
        return index, [added, *self._open_part(index, 0)]

    def _text_part(self) -> dict[str, Any]:
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        if self.full:
            part["logprobs"] = []
        return part

    def _item_fields(self, index: int, **fields: Any) -> dict[str, Any]:
        item_id = self.output[index].get("id")
        return {"item_id": item_id, **fields} if item_id is not None else fields

    def start_part(self, index: int, content_index: int) -> list[Event]:
        """The message at `index` goes on with the part `content_index` (the part before it,
        if any, closes); `text_delta` does this by itself for a part that gets text."""
        events = self._close_part(index) if index in self._parts else []
        return events + self._open_part(index, content_index)

    def _open_part(self, index: int, content_index: int) -> list[Event]:
        content = self.output[index]["content"]
        while len(content) <= content_index:
            content.append(self._text_part())
        self._parts[index] = content_index
        if not self.full:
            return []
        return [
            self.event(
                "response.content_part.added",
                **self._item_fields(index, output_index=index, content_index=content_index),
                part=self._text_part(),
            )
        ]

    def _close_part(self, index: int, text: str | None = None) -> list[Event]:
        content_index = self._parts.pop(index)
        part = self.output[index]["content"][content_index]
        if text is not None:
            part["text"] = text
        where = self._item_fields(index, output_index=index, content_index=content_index)
        done = self.event("response.output_text.done", **where, text=part["text"])
        if not self.full:
            return [done]
        done["logprobs"] = []
        return [done, self.event("response.content_part.done", **where, part=dict(part))]

    def text_delta(self, index: int, delta: str, *, content_index: int = 0) -> list[Event]:
        """Text of the open message at `index`; a later `content_index` closes the part
        before it and opens its own."""
        events: list[Event] = []
        if self._parts.get(index) != content_index:
            events += self.start_part(index, content_index)
        part = self.output[index]["content"][content_index]
        part["text"] += delta
        where = self._item_fields(index, output_index=index, content_index=content_index)
        event = self.event("response.output_text.delta", **where, delta=delta)
        if self.full:
            event["logprobs"] = []
        events.append(event)
        return events

    def open_reasoning(self, item: dict[str, Any] | None = None) -> tuple[int, list[Event]]:
        """A reasoning item starts; its summary text arrives by `reasoning_delta`."""
        reasoning = {"type": "reasoning", **(item or {}), "summary": [], "status": "in_progress"}
        if not reasoning.get("id"):
            reasoning["id"] = new_id("rs")
        index, added = self._add("reasoning", reasoning, dict(reasoning, summary=[]))
        reasoning["summary"].append({"type": "summary_text", "text": ""})
        part = self.event(
            "response.reasoning_summary_part.added",
            **self._item_fields(index, output_index=index, summary_index=0),
            part={"type": "summary_text", "text": ""},
        )
        return index, [added, part]

    def reasoning_delta(self, index: int, delta: str) -> list[Event]:
        self.output[index]["summary"][0]["text"] += delta
        where = self._item_fields(index, output_index=index, summary_index=0)
        return [self.event("response.reasoning_summary_text.delta", **where, delta=delta)]

    def open_function_call(
        self, call_id: str, name: str, *, item_id: str | None = None
    ) -> tuple[int, list[Event]]:
        """A function call starts (empty arguments); they arrive by `arguments_delta`."""
        call = {
            "type": "function_call",
            "id": item_id or new_id("fc"),
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        index, added = self._add("function_call", call, dict(call))
        return index, [added]

    def arguments_delta(self, index: int, delta: str) -> list[Event]:
        self.output[index]["arguments"] += delta
        where = self._item_fields(index, output_index=index)
        return [self.event("response.function_call_arguments.delta", **where, delta=delta)]

    def open_item(self, item: dict[str, Any]) -> tuple[int, list[Event]]:
        """An item of another kind starts (an upstream's reasoning or extension item, relayed
        as it streams), `in_progress`; `close(index, item=...)` gives its final form."""
        current = {**item, "status": "in_progress"}
        index, added = self._add("whole", current, _copy(current))
        return index, [added]

    def close(
        self,
        index: int,
        *,
        text: str | None = None,
        status: str = "completed",
        item: dict[str, Any] | None = None,
    ) -> list[Event]:
        """The item at `index` is done: its part and its own done events, then
        `output_item.done`. `text` replaces a message's last part's text (a producer that
        learns the whole text at the end); `item` replaces the item as it is reported (a
        producer whose final item carries more than the stream did)."""
        kind = self._open.pop(index, None)
        if kind is None:
            return []
        current = self.output[index]
        events: list[Event] = []
        where = self._item_fields(index, output_index=index)
        if kind == "message" and index in self._parts:
            events += self._close_part(index, text)
        elif kind == "reasoning":
            part = current["summary"][0]
            summary = {**where, "summary_index": 0}
            events.append(
                self.event("response.reasoning_summary_text.done", **summary, text=part["text"])
            )
            events.append(
                self.event("response.reasoning_summary_part.done", **summary, part=dict(part))
            )
        elif kind == "function_call":
            events.append(
                self.event(
                    "response.function_call_arguments.done",
                    **where,
                    arguments=current["arguments"],
                )
            )
        current["status"] = status
        if item is not None:
            self.output[index] = current = item
        done = self.event("response.output_item.done", output_index=index, item=_copy(current))
        return [*events, done]

    def close_all(self) -> list[Event]:
        """Close every item still open, in output order."""
        events: list[Event] = []
        for index in sorted(self._open):
            events += self.close(index)
        return events

    def item(self, item: dict[str, Any]) -> list[Event]:
        """A whole item (a deck's extension item, a provider's function call): added, then
        done. `full` shows it `in_progress` when added (the item state machine)."""
        shown = {**item, "status": "in_progress"} if self.full else _copy(item)
        index, added = self._add("whole", item, shown)
        del self._open[index]
        done = self.event("response.output_item.done", output_index=index, item=_copy(item))
        return [added, done]


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    """An item as an event carries it: later changes to the live item (its status, the text
    of its parts) do not show through."""
    copied = dict(item)
    for key in ("content", "summary"):
        value = copied.get(key)
        if isinstance(value, list):
            copied[key] = [dict(part) if isinstance(part, dict) else part for part in value]
    return copied
