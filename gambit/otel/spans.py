"""Trace events to OpenTelemetry spans, following the GenAI semantic conventions.

`SpanBuilder.on_event(event)` takes the events of docs/decks.md "Traces" one at a time, in
the order they were emitted (live from a run, or read back from a file), and starts and ends
spans on the tracer it was given:

| events | span | kind |
|---|---|---|
| `run.start` ... `run.end` | `invoke_agent <deck>` (the run) | INTERNAL |
| `deck.start` ... `deck.end` | `invoke_agent <deck>` (each deck's turn) | INTERNAL |
| `action.start` ... `action.end` | `invoke_agent <action>` | INTERNAL |
| `model.call` ... `model.result` | `chat <model>` | CLIENT |
| `tool.call` ... `tool.result` | `execute_tool <tool>` | INTERNAL |
| `grade.start` ... `grade.end` | `grade <grader>` (the grader's run inside it) | INTERNAL |

Spans nest as the events did: a deck's spans under its run, a model call and the tools it
asked for under its deck, an action deck's run under the action, a grader's run under its
grade. The times are the events' (`ts`, milliseconds) unless a `clock` is given: live, the
builder stamps each event when it arrives (nanoseconds). Every span carries
`gen_ai.conversation.id`: the caller's (the simulator's session id), else the run's id, which
a resumed conversation keeps, or for a grade the id of the conversation graded.

Message content (`gen_ai.input.messages`, `gen_ai.output.messages`, tool arguments and
results, a grade's reason) only with `capture_content` (the standard opt-in,
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). The builder never raises: an event it
cannot place is counted in `skipped`, and `close()` ends whatever is still open (a run cut
short).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from gambit.otel.messages import clean, input_messages, output_messages, to_json, usage

__all__ = ["SpanBuilder", "deck_name"]

# Model parameters ([modelParams], as the request had them) -> GenAI request attributes.
_PARAMS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "max_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
}


# A folder's deck file (the loader's entry points): the deck is named by its folder.
FOLDER_DECK_FILES = frozenset({"PROMPT.md", "deck.py"})


def deck_name(path: Any) -> str:
    """A deck as people name it: its folder for `PROMPT.md` or `deck.py`, else the file's
    stem."""
    if not isinstance(path, str) or not path:
        return "deck"
    p = Path(path)
    return p.parent.name if p.name in FOLDER_DECK_FILES and p.parent.name else p.name.split(".")[0]


class _Open:
    """A started span and what its children and its end need."""

    __slots__ = ("conversation", "kind", "run", "span", "start_ns", "claimed", "first_chunk")

    def __init__(self, span: Span, kind: str, run: str | None, conversation: str | None, ns: int):
        self.span = span
        self.kind = kind
        self.run = run
        self.conversation = conversation
        self.start_ns = ns
        self.claimed = False  # a run span: its root deck has been placed under it
        self.first_chunk = False  # a chat span: the first streamed chunk was seen


class SpanBuilder:
    """Turns one process's (or one file's) trace events into spans; see the module doc."""

    def __init__(
        self,
        tracer: Tracer,
        *,
        capture_content: bool = False,
        conversation_id: str | None = None,
        clock: Callable[[], int] | None = None,
        parent: Context | None = None,
    ):
        self.tracer = tracer
        self.capture = capture_content
        self.conversation_id = conversation_id
        self.clock = clock
        self.parent = parent
        self.skipped = 0
        self.started = 0  # spans started
        self._runs: dict[str, list[_Open]] = {}  # run id -> its open run spans
        self._grades: dict[str, list[_Open]] = {}  # run id -> open grade spans
        self._pending_grades: dict[str, list[_Open]] = {}  # grades whose run has not started
        self._by_id: dict[tuple[str, str], _Open] = {}  # (kind, action call id) -> span
        self._stack: dict[str, list[_Open]] = {}  # run id -> every open span, innermost last
        self._conversation: dict[str, str] = {}  # run id -> conversation id

    # ------------------------------------------------------------------ entry points

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Place one trace event (a JSON dict, camelCase keys); never raises."""
        try:
            handler = _HANDLERS.get(str(event.get("type")))
            if handler is not None:
                handler(self, event, self._now(event))
            elif str(event.get("type", "")).endswith(".delta"):
                self._chunk(event)
        except Exception:  # a malformed event must not fail the run it describes
            self.skipped += 1

    __call__ = on_event

    def close(self, end_ns: int | None = None) -> None:
        """End every span still open (innermost first), marked as cut short."""
        ns = end_ns if end_ns is not None else self._clock_now()
        for stack in list(self._stack.values()):
            for held in reversed(list(stack)):
                held.span.set_status(Status(StatusCode.ERROR, "the trace ended before it did"))
                held.span.end(end_time=max(ns, held.start_ns))
        self._stack.clear()
        self._runs.clear()
        self._grades.clear()
        self._pending_grades.clear()
        self._by_id.clear()

    # ------------------------------------------------------------------ bookkeeping

    def _clock_now(self) -> int:
        if self.clock is not None:
            return self.clock()
        import time

        return time.time_ns()

    def _now(self, event: Mapping[str, Any]) -> int:
        if self.clock is not None:
            return self.clock()
        ts = event.get("ts")
        return int(ts) * 1_000_000 if isinstance(ts, int | float) else self._clock_now()

    def _start(
        self,
        name: str,
        kind: str,
        run: str | None,
        parent: _Open | None,
        ns: int,
        attributes: dict[str, Any],
        span_kind: SpanKind = SpanKind.INTERNAL,
        conversation: str | None = None,
    ) -> _Open:
        conversation = (
            conversation
            or (parent.conversation if parent is not None else None)
            or self.conversation_id
            or run
        )
        if conversation:
            attributes["gen_ai.conversation.id"] = conversation
            attributes["session.id"] = conversation  # Phoenix's and Langfuse's sessions
        context = trace.set_span_in_context(parent.span) if parent is not None else self.parent
        span = self.tracer.start_span(
            name,
            context=context,
            kind=span_kind,
            attributes=clean(attributes),
            start_time=ns,
        )
        held = _Open(span, kind, run, conversation, ns)
        self.started += 1
        if run is not None:
            self._stack.setdefault(run, []).append(held)
        return held

    def _end(self, held: _Open, ns: int, attributes: dict[str, Any] | None = None) -> None:
        if attributes:
            held.span.set_attributes(clean(attributes))
        held.span.end(end_time=max(ns, held.start_ns))
        if held.run is not None:
            stack = self._stack.get(held.run, [])
            if held in stack:
                stack.remove(held)
            if not stack:
                self._stack.pop(held.run, None)

    def _innermost(self, run: Any) -> _Open | None:
        stack = self._stack.get(run) if isinstance(run, str) else None
        return stack[-1] if stack else None

    def _run_span(self, run: Any) -> _Open | None:
        """The run span a root deck belongs to: the oldest not yet claimed, else the last."""
        spans = self._runs.get(run) if isinstance(run, str) else None
        if not spans:
            return None
        for held in spans:
            if not held.claimed:
                held.claimed = True
                return held
        return spans[-1]

    def _find(self, kind: str, call_id: Any) -> _Open | None:
        return self._by_id.get((kind, call_id)) if isinstance(call_id, str) else None

    # ------------------------------------------------------------------ runs and decks

    def _run_start(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        run = run if isinstance(run, str) else None
        grade = None
        if run is not None and self._pending_grades.get(run):
            grade = self._pending_grades[run].pop(0)
        parent = grade or self._find("tool", event.get("parentActionCallId"))
        name = deck_name(event.get("deckPath"))
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": event.get("deckPath"),
            "gen_ai.provider.name": event.get("provider"),
            "gambit.run.id": run,
            "gambit.deck.path": event.get("deckPath"),
            "gambit.run.mode": event.get("mode"),
            "gambit.offline": event.get("offline"),
            "openinference.span.kind": "AGENT",
        }
        if self.capture and event.get("input") is not None:
            attributes["input.value"] = to_json(event.get("input"))
        held = self._start(f"invoke_agent {name}", "run", run, parent, ns, attributes)
        if run is not None:
            self._runs.setdefault(run, []).append(held)

    def _run_end(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        spans = self._runs.get(run) if isinstance(run, str) else None
        if not spans:
            self.skipped += 1
            return
        # The run whose root deck finished first (concurrent runs may share an id).
        held = next((s for s in spans if s.claimed), spans[0])
        spans.remove(held)
        if not spans:
            self._runs.pop(str(run), None)
        status = event.get("status")
        attributes = {
            "gambit.run.status": status,
            "gambit.run.duration_ms": event.get("durationMs"),
        }
        attributes.update(usage(event.get("usage")))
        if status in ("failed", "canceled"):
            error = event.get("error")
            held.span.set_status(Status(StatusCode.ERROR, str(error) if error else str(status)))
            attributes["error.type"] = str(status)
        self._end(held, ns, attributes)

    def _deck_start(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        parent_id = event.get("parentActionCallId")
        parent = (
            self._find("tool", parent_id)
            or self._find("action", parent_id)
            or (self._run_span(run) if not parent_id else None)
            or self._innermost(run)
        )
        name = deck_name(event.get("deckPath"))
        held = self._start(
            f"invoke_agent {name}",
            "deck",
            run if isinstance(run, str) else None,
            parent,
            ns,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.agent.id": event.get("deckPath"),
                "gambit.deck.path": event.get("deckPath"),
                "gambit.action_call.id": event.get("actionCallId"),
                "openinference.span.kind": "AGENT",
            },
        )
        self._by_id[("deck", str(event.get("actionCallId")))] = held

    def _deck_end(self, event: Mapping[str, Any], ns: int) -> None:
        held = self._by_id.pop(("deck", str(event.get("actionCallId"))), None)
        if held is None:
            self.skipped += 1
            return
        self._end(held, ns)

    def _action_start(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        parent = self._find("deck", event.get("parentActionCallId")) or self._innermost(run)
        name = str(event.get("name") or "action")
        held = self._start(
            f"invoke_agent {name}",
            "action",
            run if isinstance(run, str) else None,
            parent,
            ns,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.tool.call.id": event.get("actionCallId"),
                "gambit.action.path": event.get("path"),
                "openinference.span.kind": "AGENT",
            },
        )
        self._by_id[("action", str(event.get("actionCallId")))] = held

    def _action_end(self, event: Mapping[str, Any], ns: int) -> None:
        held = self._by_id.pop(("action", str(event.get("actionCallId"))), None)
        if held is None:
            self.skipped += 1
            return
        self._end(held, ns)

    # ------------------------------------------------------------------ model calls

    def _model_call(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        call_id = str(event.get("actionCallId"))
        parent = self._find("deck", call_id) or self._innermost(run)
        model = str(event.get("model") or "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": event.get("provider") or "unknown",
            "gen_ai.request.model": model,
            "gen_ai.request.stream": event.get("stream"),
            "gambit.deck.path": event.get("deckPath"),
            "gambit.offline": event.get("offline"),
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
        }
        params = event.get("params")
        if isinstance(params, Mapping):
            for key, attribute in _PARAMS.items():
                value = params.get(key)
                if key == "stop" and isinstance(value, str):
                    value = [value]
                if value is not None and attribute not in attributes:
                    attributes[attribute] = value
        if self.capture:
            attributes["gen_ai.input.messages"] = to_json(input_messages(event))
            tools = event.get("tools")
            if tools:
                attributes["gen_ai.tool.definitions"] = to_json(tools)
        held = self._start(
            f"chat {model}",
            "chat",
            run if isinstance(run, str) else None,
            parent,
            ns,
            attributes,
            SpanKind.CLIENT,
        )
        self._by_id[("chat", call_id)] = held

    def _chunk(self, event: Mapping[str, Any]) -> None:
        """A streamed `response.*.delta`: the first one of a call is its time to first chunk."""
        meta = event.get("_gambit")
        call_id = meta.get("action_call_id") if isinstance(meta, Mapping) else None
        held = self._find("chat", call_id)
        if held is None or held.first_chunk:
            return
        held.first_chunk = True
        seconds = max(0, self._now(event) - held.start_ns) / 1e9
        held.span.set_attribute("gen_ai.response.time_to_first_chunk", seconds)

    def _model_result(self, event: Mapping[str, Any], ns: int) -> None:
        held = self._by_id.pop(("chat", str(event.get("actionCallId"))), None)
        if held is None:
            self.skipped += 1
            return
        attributes: dict[str, Any] = {
            "gen_ai.response.model": event.get("model"),
            "gen_ai.response.id": event.get("responseId"),
        }
        reason = event.get("finishReason")
        if reason:
            attributes["gen_ai.response.finish_reasons"] = [str(reason)]
        attributes.update(usage(event.get("usage")))
        if self.capture:
            attributes["gen_ai.output.messages"] = to_json(output_messages(event))
        self._end(held, ns, attributes)

    # ------------------------------------------------------------------ tools

    def _tool_call(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        call_id = str(event.get("actionCallId"))
        parent = (
            self._find("action", call_id)
            or self._find("deck", event.get("parentActionCallId"))
            or self._innermost(run)
        )
        name = str(event.get("name") or "tool")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gambit.tool.kind": event.get("toolKind"),
            "openinference.span.kind": "TOOL",
            "tool.name": name,
        }
        if self.capture and "args" in event:
            attributes["gen_ai.tool.call.arguments"] = to_json(event.get("args"))
        held = self._start(
            f"execute_tool {name}",
            "tool",
            run if isinstance(run, str) else None,
            parent,
            ns,
            attributes,
        )
        self._by_id[("tool", call_id)] = held

    def _tool_result(self, event: Mapping[str, Any], ns: int) -> None:
        held = self._by_id.pop(("tool", str(event.get("actionCallId"))), None)
        if held is None:
            self.skipped += 1
            return
        attributes = {}
        if self.capture and "result" in event:
            attributes["gen_ai.tool.call.result"] = to_json(event.get("result"))
        self._end(held, ns, attributes)

    # ------------------------------------------------------------------ grades

    def _grade_start(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        label = event.get("graderLabel") or deck_name(event.get("graderPath"))
        graded = event.get("gradedRunId")
        held = self._start(
            f"grade {label}",
            "grade",
            None,  # not on the grader run's stack: the run starts inside it
            None,
            ns,
            {
                "gen_ai.evaluation.name": label,
                "gambit.grader.path": event.get("graderPath"),
                "gambit.grade.mode": event.get("gradingMode"),
                "gambit.grade.message_index": event.get("messageIndex"),
                "gambit.grade.graded_run_id": graded,
                "openinference.span.kind": "EVALUATOR",
            },
            conversation=graded if isinstance(graded, str) and not self.conversation_id else None,
        )
        if isinstance(run, str):
            self._pending_grades.setdefault(run, []).append(held)
            self._grades.setdefault(run, []).append(held)

    def _grade_end(self, event: Mapping[str, Any], ns: int) -> None:
        run = event.get("runId")
        open_grades = self._grades.get(run) if isinstance(run, str) else None
        if not open_grades:
            self.skipped += 1
            return
        index = event.get("messageIndex")
        held = next(
            (g for g in open_grades if _attribute(g, "gambit.grade.message_index") == index),
            open_grades[0],
        )
        open_grades.remove(held)
        pending = self._pending_grades.get(str(run), [])
        if held in pending:
            pending.remove(held)
        score, passed = event.get("score"), event.get("passed")
        attributes: dict[str, Any] = {
            "gen_ai.evaluation.score.value": score,
            "gambit.grade.score": score,
            "gambit.grade.passed": passed,
            "gambit.grade.threshold": event.get("threshold"),
        }
        if passed is not None:
            attributes["gen_ai.evaluation.score.label"] = "pass" if passed else "fail"
        if self.capture and event.get("reason"):
            attributes["gen_ai.evaluation.explanation"] = event.get("reason")
        error = event.get("error")
        if error:
            held.span.set_status(Status(StatusCode.ERROR, str(error)))
            attributes["error.type"] = "grader_error"
        held.span.add_event(
            "gen_ai.evaluation.result",
            clean({k: v for k, v in attributes.items() if k.startswith("gen_ai.")})
            | {"gen_ai.evaluation.name": _attribute(held, "gen_ai.evaluation.name") or ""},
            timestamp=max(ns, held.start_ns),
        )
        self._end(held, ns, attributes)


def _attribute(held: _Open, key: str) -> Any:
    attributes = getattr(held.span, "attributes", None)
    return attributes.get(key) if attributes is not None else None


_Handler = Callable[[SpanBuilder, Mapping[str, Any], int], None]
_HANDLERS: dict[str, _Handler] = {
    "run.start": SpanBuilder._run_start,
    "run.end": SpanBuilder._run_end,
    "deck.start": SpanBuilder._deck_start,
    "deck.end": SpanBuilder._deck_end,
    "action.start": SpanBuilder._action_start,
    "action.end": SpanBuilder._action_end,
    "model.call": SpanBuilder._model_call,
    "model.result": SpanBuilder._model_result,
    "tool.call": SpanBuilder._tool_call,
    "tool.result": SpanBuilder._tool_result,
    "grade.start": SpanBuilder._grade_start,
    "grade.end": SpanBuilder._grade_end,
}
