"""Provider stream events to trace events and streamed text (docs/decks.md, "Traces").

A provider calls `on_event` for every event of its stream (`on_chat_text` for each text
chunk in chat mode). For each event:

- `response.*` events are numbered (`sequence_number`: a missing or stale number becomes
  the next counter value), traced with the provider's fields plus `_gambit` (who emitted
  it), and text deltas are streamed to `on_stream_text`;
- any other event is traced as `model.stream.event`; tool activity a provider reports
  (`tool.call`/`tool.result`, or their `gambit:` forms) is also projected, once per call id,
  as `tool.call`/`tool.result` traces;
- after `response.completed`, `response.failed` or `response.incomplete`, later
  `response.*` and tool events are dropped.

Every event counts as activity for the onIdle handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._trace import ModelStreamEvent, ToolCallEvent, ToolResultEvent

if TYPE_CHECKING:
    from ._llm import _LlmExecution

_TERMINAL_EVENTS = ("response.completed", "response.failed", "response.incomplete")


class _StreamTracer:
    """Turns provider stream events into traces and text."""

    _TOOL_EVENTS = {
        "tool.call": "tool.call",
        "gambit:tool.call": "tool.call",
        "tool.result": "tool.result",
        "gambit:tool.result": "tool.result",
    }

    def __init__(self, execution: _LlmExecution, model: str):
        self.execution = execution
        self.model = model
        self.sequence = 0
        self.terminated = False
        self.deltas: list[str] = []
        self.done_text: list[str] = []
        self.tool_names: dict[str, str] = {}
        self.projected: set[tuple[str, str]] = set()

    def text(self) -> str:
        return "".join(self.deltas)

    def _meta(self) -> dict[str, Any]:
        ex = self.execution
        meta = {
            "run_id": ex.run.run_id,
            "action_call_id": ex.action_call_id,
            "deck_path": ex.deck.path,
            "model": self.model,
        }
        if ex.parent is not None:
            meta["parent_action_call_id"] = ex.parent
        return meta

    def on_event(self, event: dict[str, Any]) -> None:
        ex = self.execution
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str):
            return
        ex.last_activity = ex.limits.clock.monotonic()
        is_response = kind.startswith("response.")
        projected_kind = self._TOOL_EVENTS.get(kind)
        if self.terminated and (is_response or projected_kind):
            return  # nothing after a terminal event
        if is_response:
            self._response_event(kind, event)
            return
        ex.trace_model_event(ModelStreamEvent, model=self.model, event=event)
        if projected_kind and ex.run.on_trace is not None:
            self._project_tool_event(projected_kind, event)

    def _response_event(self, kind: str, event: dict[str, Any]) -> None:
        ex = self.execution
        number = event.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool) and number > self.sequence:
            self.sequence = number
        else:
            self.sequence += 1
        if ex.run.on_trace is not None:  # built for a sink only (streaming alone needs none)
            fields = {k: v for k, v in event.items() if k not in ("type", "_gambit")}
            fields["sequence_number"] = self.sequence
            ex.run.trace_response(
                kind, {"gambit": {**(event.get("_gambit") or {}), **self._meta()}}, fields
            )
        if (
            kind == "response.output_text.delta"
            and isinstance(event.get("delta"), str)
            and event["delta"]
        ):
            self.deltas.append(event["delta"])
            ex.run.stream_text(event["delta"])
        elif kind == "response.output_text.done" and isinstance(event.get("text"), str):
            self.done_text.append(event["text"])
        if kind in _TERMINAL_EVENTS:
            self.terminated = True

    def _project_tool_event(self, kind: str, event: dict[str, Any]) -> None:
        """Tool activity a provider reports in its stream becomes tool.call/tool.result traces."""
        ex = self.execution
        call_id = event.get("actionCallId")
        if not isinstance(call_id, str) or not call_id:
            return
        name = (
            event.get("name")
            if isinstance(event.get("name"), str)
            else self.tool_names.get(call_id)
        )
        if not name or (call_id, kind) in self.projected:
            return
        self.tool_names[call_id] = name
        self.projected.add((call_id, kind))
        fields: dict[str, Any] = {
            "action_call_id": call_id,
            "name": name,
            "tool_kind": event.get("toolKind") or "mcp_bridge",
            "parent_action_call_id": ex.action_call_id,
        }
        if kind == "tool.call":
            ex.run.trace(ToolCallEvent, **fields, args=event.get("args", {}))
        else:
            ex.run.trace(ToolResultEvent, **fields, result=event.get("result"))

    def on_chat_text(self, chunk: str) -> None:
        self.on_event({"type": "response.output_text.delta", "output_index": 0, "delta": chunk})

    def finish(self, response: Any) -> None:
        if not self.deltas and self.done_text:
            self.execution.run.stream_text("".join(self.done_text))
