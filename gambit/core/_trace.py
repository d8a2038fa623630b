"""Trace events (docs/decks.md, "Traces") and JSON Lines trace files.

Every event is a pydantic model whose JSON keys are camelCase (`runId`, `actionCallId`, ...);
Python attributes are snake_case. Each model allows and keeps extra fields. `TraceEvent` is a
union discriminated on `type`:

| type | model |
|---|---|
| `run.start` / `run.end` | `RunStartEvent` / `RunEndEvent` |
| `deck.start` / `deck.end` | `DeckStartEvent` / `DeckEndEvent` |
| `message.user` | `MessageUserEvent` |
| `model.call` / `model.result` | `ModelCallEvent` / `ModelResultEvent` |
| `model.stream.event` | `ModelStreamEvent` |
| `action.start` / `action.end` | `ActionStartEvent` / `ActionEndEvent` |
| `tool.call` / `tool.result` | `ToolCallEvent` / `ToolResultEvent` |
| `log` | `LogEvent` |
| `context.compacted` | `ContextCompactedEvent` |
| `grade.start` / `grade.end` | `GradeStartEvent` / `GradeEndEvent` |
| `monolog` | `MonologEvent` |
| `response.*` | `ResponseTraceEvent` (provider event fields + `_gambit`) |
| anything else | `UnknownTraceEvent` (kept verbatim) |

`model.call` and `model.result` carry the run's `mode` (`"chat"` | `"responses"`) and the
items: `items` (the request input) on `model.call` and `output` on `model.result`, and
`responseItems` (the TypeScript Gambit's name) on both. Writers should set
both spellings; readers use `ModelCallEvent.input_items` / `ModelResultEvent.output_items`,
which accept either. `model.result.message` is the derived assistant chat message.

Timestamps: `ts` is an integer, milliseconds since the Unix epoch (JavaScript's `Date.now()`),
and every event has one: a model built without `ts` is stamped with `now_ms()` at
construction, including an event read from a dict or file that has none. `seq` is optional;
storage (the simulator's TraceEvent table) assigns it.

These models are also the one definition the runtime writes events from, without pydantic
in the way (sinks receive plain JSON-ready dicts, and validating or serialising a model per
event costs more than a model pass): `ModelCallEvent.wire(ts, run_id, {"action_call_id":
..., "deck_path": ...})` gives `{"type": "model.call", "ts": ..., "runId": ...,
"actionCallId": ..., "deckPath": ...}`, the JSON key of each field taken from the model,
None-valued fields left out, the values as given (already JSON-shaped). A name that is not a
field of the model raises TypeError, so a misspelt field fails where it is written. Every
field the runtime writes is declared on its model, so a reader gets it as an attribute.
"""

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from gambit.core._errors import GambitError, read_text_file
from gambit.core._messages import ChatMessage
from gambit.core._openresponses import (
    _DEFER,
    ResponseItem,
    ResponseToolDefinition,
    ResponseUsage,
    _CamelModel,
    _JsonModel,
    construct,
    event_from_dict,
)

__all__ = [
    "ActionEndEvent",
    "ActionStartEvent",
    "ContextCompactedEvent",
    "DeckEndEvent",
    "DeckStartEvent",
    "GambitEventMeta",
    "GradeEndEvent",
    "GradeStartEvent",
    "LogEvent",
    "MessageUserEvent",
    "ModelCallEvent",
    "ModelResultEvent",
    "ModelStreamEvent",
    "MonologEvent",
    "ResponseTraceEvent",
    "RunEndEvent",
    "RunStartEvent",
    "ToolCallEvent",
    "ToolKind",
    "ToolResultEvent",
    "TraceError",
    "TraceEvent",
    "TraceToolCall",
    "TraceWriter",
    "UnknownTraceEvent",
    "DECK_WARNING",
    "deck_warning",
    "now_ms",
    "read_trace",
    "trace_event_from_dict",
    "trace_event_to_dict",
    "trace_event_to_json",
    "trace_event_view",
    "json_dict",
]


class TraceError(GambitError):
    """A trace file cannot be read; `file` and (for a bad line) `line` say where."""

    def __init__(self, message: str, *, file: str, line: int | None = None):
        self.file = file
        self.line = line
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}")


# The `log` event title of a deck warning (a deprecation and the like) in a run's trace: the
# runtime writes one per warning of each deck it loads; the CLI and the simulator read them
# back to print each once on stderr.
DECK_WARNING = "deck warning"


def deck_warning(event: Mapping[str, Any]) -> str | None:
    """The warning a trace event carries, if it is a deck warning (else None)."""
    if event.get("type") == "log" and event.get("title") == DECK_WARNING:
        return str(event.get("message"))
    return None


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as trace `ts` values are."""
    return time.time_ns() // 1_000_000


ToolKind = Literal["action", "builtin", "external", "mcp_bridge", "internal"]


class _TraceBase(_CamelModel):
    type: str
    ts: int = Field(default_factory=now_ms)
    seq: int | None = None

    @field_validator("ts", mode="before")
    @classmethod
    def _whole_ms(cls, value: Any) -> Any:
        if isinstance(value, float) and value == value and abs(value) != float("inf"):
            return int(value)
        return value

    @classmethod
    def wire(
        cls,
        ts: int,
        run_id: str | None,
        fields: Mapping[str, Any],
        passthrough: Mapping[str, Any] | None = None,
        *,
        type: str | None = None,
    ) -> dict[str, Any]:
        """This event as sinks receive it: `{"type", "ts", "runId", ...fields}`, JSON keys.

        `fields` maps field names (snake_case) to JSON-ready values; None values are left
        out. `passthrough` (provider event fields on `response.*` events) is added as is,
        its keys unchanged. `type` is the event type of a model that has several
        (`ResponseTraceEvent`); other models have their own. No validation: the values are
        what the runtime already holds in JSON form.
        """
        spec = _WIRE.get(cls) or _wire_spec(cls)
        out: dict[str, Any] = {"type": type or spec.type, "ts": ts}
        if run_id is not None:
            out["runId"] = run_id
        keys = spec.keys
        for name, value in fields.items():
            if value is not None:
                key = keys.get(name)
                if key is None:
                    raise TypeError(f"{cls.__name__} has no field {name!r}")
                out[key] = value
        if passthrough:
            for key, value in passthrough.items():
                if value is not None:
                    out[key] = value
        return out


class _WireSpec:
    """Per event model, computed once: its event type and the JSON key of each field."""

    __slots__ = ("keys", "type")

    def __init__(self, model: type[_TraceBase]):
        fields = model.model_fields
        default = fields["type"].default
        self.type: str = default if isinstance(default, str) else ""
        self.keys: dict[str, str] = {
            name: info.serialization_alias or info.alias or name
            for name, info in fields.items()
            if name not in ("type", "ts", "run_id")
        }


_WIRE: dict[type, _WireSpec] = {}


def _wire_spec(model: type[_TraceBase]) -> _WireSpec:
    spec = _WIRE[model] = _WireSpec(model)
    return spec


class _RunScoped(_TraceBase):
    run_id: str
    parent_action_call_id: str | None = None


class RunStartEvent(_RunScoped):
    type: Literal["run.start"] = "run.start"
    deck_path: str | None = None
    input: Any = None
    initial_user_message: Any = None
    permissions: Any = None
    mode: Literal["chat", "responses"] | None = None
    provider: str | None = None
    offline: bool | None = None  # true when the provider answers without a real model


class RunEndEvent(_RunScoped):
    type: Literal["run.end"] = "run.end"
    status: (
        Literal["completed", "ended", "paused", "incomplete", "failed", "canceled"] | str | None
    ) = None
    error: Any = None  # the error message of a failed or canceled run
    usage: ResponseUsage | None = None  # the whole run's, summed over every model call
    duration_ms: int | None = None


class DeckStartEvent(_RunScoped):
    type: Literal["deck.start"] = "deck.start"
    deck_path: str | None = None
    action_call_id: str | None = None
    permissions: Any = None


class DeckEndEvent(_RunScoped):
    type: Literal["deck.end"] = "deck.end"
    deck_path: str | None = None
    action_call_id: str | None = None


class MessageUserEvent(_RunScoped):
    type: Literal["message.user"] = "message.user"
    action_call_id: str | None = None
    deck_path: str | None = None
    message: ChatMessage


class ModelCallEvent(_RunScoped):
    type: Literal["model.call"] = "model.call"
    action_call_id: str | None = None
    deck_path: str | None = None
    model: str | None = None
    provider: str | None = None
    offline: bool | None = None
    stream: bool | None = None
    message_count: int | None = None
    tool_count: int | None = None
    messages: list[ChatMessage] | None = None
    tools: list[ResponseToolDefinition] | None = None
    state_messages: int | None = None
    mode: Literal["chat", "responses"] | None = None
    items: list[ResponseItem] | None = None
    response_items: list[ResponseItem] | None = None
    # The request's model parameters (temperature, max_output_tokens, reasoning, ...): the
    # deck's [modelParams] as resolved for this call.
    params: dict[str, Any] | None = None
    # When the model's context window is known: the input tokens counted before sending,
    # `{counted, method ("api" | "o200k_base" | "estimate"), window, limit}`.
    context_tokens: dict[str, Any] | None = None

    @property
    def input_items(self) -> list[Any] | None:
        """The request input items, whichever spelling (`items`, `responseItems`) was set."""
        return self.items if self.items is not None else self.response_items


class TraceToolCall(_CamelModel):
    """A parsed tool call on `model.result`: `{id, name, args}`."""

    id: str
    name: str
    args: Any = None


class ModelResultEvent(_RunScoped):
    type: Literal["model.result"] = "model.result"
    action_call_id: str | None = None
    deck_path: str | None = None
    model: str | None = None
    provider: str | None = None
    offline: bool | None = None
    finish_reason: Literal["stop", "tool_calls", "length"] | str | None = None
    # Why the pass stopped short (`{"reason": "max_output_tokens"}`), when it did.
    incomplete_details: dict[str, Any] | None = None
    message: ChatMessage | None = None
    tool_calls: list[TraceToolCall] | None = None
    state_messages: int | None = None
    usage: ResponseUsage | None = None
    mode: Literal["chat", "responses"] | None = None
    output: list[ResponseItem] | None = None
    response_items: list[ResponseItem] | None = None
    response_id: str | None = None
    duration_ms: int | None = None  # the provider call's wall-clock time
    # The count made before the call beside what the provider reported (`usage`):
    # `{counted, method, reported, window, limit}` (model.call's `contextTokens` + reported).
    context_tokens: dict[str, Any] | None = None

    @property
    def output_items(self) -> list[Any] | None:
        """The response output items, whichever spelling (`output`, `responseItems`) was set."""
        return self.output if self.output is not None else self.response_items


class ModelStreamEvent(_RunScoped):
    """A provider stream event whose type does not start with `response.`."""

    type: Literal["model.stream.event"] = "model.stream.event"
    action_call_id: str | None = None
    deck_path: str | None = None
    model: str | None = None
    event: dict[str, Any]


class ActionStartEvent(_RunScoped):
    type: Literal["action.start"] = "action.start"
    action_call_id: str
    name: str
    path: str | None = None
    permissions: Any = None


class ActionEndEvent(_RunScoped):
    type: Literal["action.end"] = "action.end"
    action_call_id: str
    name: str
    path: str | None = None


class ToolCallEvent(_RunScoped):
    type: Literal["tool.call"] = "tool.call"
    action_call_id: str
    name: str
    args: Any = None
    tool_kind: ToolKind | str | None = None


class ToolResultEvent(_RunScoped):
    type: Literal["tool.result"] = "tool.result"
    action_call_id: str
    name: str
    result: Any = None
    tool_kind: ToolKind | str | None = None


class LogEvent(_RunScoped):
    type: Literal["log"] = "log"
    deck_path: str | None = None
    action_call_id: str | None = None
    level: Literal["debug", "info", "warn", "error"] = "info"
    title: str | None = None
    message: Any = None
    body: Any = None
    meta: Any = None


class MonologEvent(_RunScoped):
    """The final assistant text of a child LLM deck."""

    type: Literal["monolog"] = "monolog"
    deck_path: str | None = None
    action_call_id: str | None = None
    content: Any = None


class ContextCompactedEvent(_RunScoped):
    """The conversation sent to the model was compacted into a summary (the conversation
    kept is unchanged): the input tokens before and after, and the summary."""

    type: Literal["context.compacted"] = "context.compacted"
    action_call_id: str | None = None
    deck_path: str | None = None
    model: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    method: str | None = None  # how the tokens were counted: api, o200k_base, estimate
    context_window: int | None = None
    limit: int | None = None  # contextWindow * compactRatio
    summarized_items: int | None = None  # conversation items the summary replaces
    kept_items: int | None = None  # items after them, still sent verbatim
    dropped_items: int | None = None  # oldest items left out of the summary request to fit
    summary: str | None = None
    usage: ResponseUsage | None = None  # the summary request's
    duration_ms: int | None = None


class GradeStartEvent(_RunScoped):
    """A grader starts grading a conversation (or one of its turns): the grader's own run,
    `runId`, follows, between this event and `grade.end`."""

    type: Literal["grade.start"] = "grade.start"
    grader_path: str | None = None
    grader_label: str | None = None
    grading_mode: Literal["turns", "conversation"] | str | None = None
    graded_run_id: str | None = None  # the run id of the conversation graded
    message_index: int | None = None  # "turns" mode: the assistant message graded
    message_ref_id: str | None = None


class GradeEndEvent(_RunScoped):
    """A grade given (or not: `error`): the score, and whether it passes, `score >=
    threshold` (0 unless the caller sets one, as `gambit verify --threshold` does)."""

    type: Literal["grade.end"] = "grade.end"
    grader_path: str | None = None
    grader_label: str | None = None
    graded_run_id: str | None = None
    message_index: int | None = None
    score: float | None = None
    passed: bool | None = None
    threshold: float | None = None
    reason: str | None = None
    error: str | None = None


class GambitEventMeta(_JsonModel):
    """`_gambit` on traced `response.*` events. Its keys are snake_case, as the TypeScript
    Gambit writes them."""

    run_id: str | None = None
    action_call_id: str | None = None
    parent_action_call_id: str | None = None
    deck_path: str | None = None
    model: str | None = None


class ResponseTraceEvent(_TraceBase):
    """A provider `response.*` stream event passed through: its fields plus `_gambit`."""

    type: str
    run_id: str | None = None
    sequence_number: int | None = Field(default=None, alias="sequence_number")
    gambit: GambitEventMeta | None = Field(default=None, alias="_gambit")

    @field_validator("type")
    @classmethod
    def _response_type(cls, value: str) -> str:
        if not value.startswith("response."):
            raise ValueError(f"a response trace event type starts with 'response.', got {value!r}")
        return value

    def to_response_event(self) -> Any:
        """The provider event (a `ResponseEvent`), without `_gambit`, `ts`, `seq` and `runId`."""
        data = self.to_dict()
        for key in ("_gambit", "ts", "seq", "runId"):
            data.pop(key, None)
        return event_from_dict(data)


class UnknownTraceEvent(_TraceBase):
    """An event type outside the catalogue, kept verbatim."""


_TRACE_MODELS: dict[str, type[_TraceBase]] = {
    "run.start": RunStartEvent,
    "run.end": RunEndEvent,
    "deck.start": DeckStartEvent,
    "deck.end": DeckEndEvent,
    "message.user": MessageUserEvent,
    "model.call": ModelCallEvent,
    "model.result": ModelResultEvent,
    "model.stream.event": ModelStreamEvent,
    "action.start": ActionStartEvent,
    "action.end": ActionEndEvent,
    "tool.call": ToolCallEvent,
    "tool.result": ToolResultEvent,
    "log": LogEvent,
    "monolog": MonologEvent,
    "context.compacted": ContextCompactedEvent,
    "grade.start": GradeStartEvent,
    "grade.end": GradeEndEvent,
}


def _trace_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    if isinstance(kind, str):
        if kind in _TRACE_MODELS:
            return kind
        if kind.startswith("response."):
            return "response.*"
    return "other"


TraceEvent = Annotated[
    Annotated[RunStartEvent, Tag("run.start")]
    | Annotated[RunEndEvent, Tag("run.end")]
    | Annotated[DeckStartEvent, Tag("deck.start")]
    | Annotated[DeckEndEvent, Tag("deck.end")]
    | Annotated[MessageUserEvent, Tag("message.user")]
    | Annotated[ModelCallEvent, Tag("model.call")]
    | Annotated[ModelResultEvent, Tag("model.result")]
    | Annotated[ModelStreamEvent, Tag("model.stream.event")]
    | Annotated[ActionStartEvent, Tag("action.start")]
    | Annotated[ActionEndEvent, Tag("action.end")]
    | Annotated[ToolCallEvent, Tag("tool.call")]
    | Annotated[ToolResultEvent, Tag("tool.result")]
    | Annotated[LogEvent, Tag("log")]
    | Annotated[MonologEvent, Tag("monolog")]
    | Annotated[ContextCompactedEvent, Tag("context.compacted")]
    | Annotated[GradeStartEvent, Tag("grade.start")]
    | Annotated[GradeEndEvent, Tag("grade.end")]
    | Annotated[ResponseTraceEvent, Tag("response.*")]
    | Annotated[UnknownTraceEvent, Tag("other")],
    Discriminator(_trace_tag),
]
"""A trace event, discriminated on `type` (see the module docstring)."""

_TRACE_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceEvent, config=_DEFER)


def trace_event_from_dict(data: Mapping[str, Any] | BaseModel) -> Any:
    """Validate one event dict into its `TraceEvent` model (raises pydantic ValidationError)."""
    return _TRACE_ADAPTER.validate_python(data)


_READ_KEYS: dict[type, dict[str, str]] = {}


def _read_keys(model: type[_TraceBase]) -> dict[str, str]:
    keys = _READ_KEYS.get(model)
    if keys is None:
        keys = _READ_KEYS[model] = {
            info.alias or info.serialization_alias or name: name
            for name, info in model.model_fields.items()
        }
        keys.update({name: name for name in model.model_fields if name not in keys.values()})
    return keys


def trace_event_view(data: Mapping[str, Any]) -> Any:
    """A stored trace event as its model class, read without validation.

    For events this engine wrote (through `wire`) or validated when they came in (an imported
    trace file): readers switch on the class (`match event: case ModelCallEvent(): ...`) and
    read attributes instead of camelCase keys. Scalar fields are as stored; nested values
    (usage, items, messages) stay the JSON they are stored as, and keys outside the model
    are its extras. Use `trace_event_from_dict` for input that must be checked.
    """
    kind = data.get("type")
    found = _TRACE_MODELS.get(kind) if isinstance(kind, str) else None
    model: type[_TraceBase]
    if found is not None:
        model = found
    elif isinstance(kind, str) and kind.startswith("response."):
        model = ResponseTraceEvent
    else:
        model = UnknownTraceEvent
    keys = _read_keys(model)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        name = keys.get(key)
        if name is None:
            extra[key] = value
        else:
            values[name] = value
    for name in _required_names(model):
        values.setdefault(name, None)  # a required field a stored event lacks reads as None
    event = construct(model, **values)
    object.__setattr__(event, "__pydantic_extra__", extra)
    return event


_REQUIRED: dict[type, tuple[str, ...]] = {}


def _required_names(model: type[_TraceBase]) -> tuple[str, ...]:
    names = _REQUIRED.get(model)
    if names is None:
        names = _REQUIRED[model] = tuple(
            name for name, info in model.model_fields.items() if info.is_required()
        )
    return names


def json_dict(value: Any) -> dict[str, Any]:
    """A nested object of an event (usage, message, `_gambit`) as a JSON dict, whether the
    event was validated (the value is a model) or read by `trace_event_view` (already JSON);
    {} when it is absent or not an object."""
    if isinstance(value, _JsonModel):
        return value.to_dict()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value if isinstance(value, dict) else {}


def trace_event_to_dict(event: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-ready dict with camelCase keys; None-valued optional fields are omitted."""
    model: BaseModel = trace_event_from_dict(event) if isinstance(event, Mapping) else event
    if isinstance(model, _JsonModel):
        return model.to_dict()
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def trace_event_to_json(event: BaseModel | Mapping[str, Any]) -> str:
    """One compact JSON line (no newline), UTF-8 text kept as is (`ensure_ascii=False`)."""
    return json.dumps(trace_event_to_dict(event), ensure_ascii=False, separators=(",", ":"))


class TraceWriter:
    """Appends one JSON object per line to a trace file, flushing after every event.

    The parent directory is created; the file is opened for appending, never truncated, so
    several runs may share one file. Events may be models or dicts (dicts are validated). A
    writer is a callable, so it can be passed wherever a `trace(event)` callback is expected,
    and a context manager. Writes are serialised with a lock.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None

    def _open(self) -> IO[str]:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
        return self._fh

    def write(self, event: BaseModel | Mapping[str, Any]) -> None:
        line = trace_event_to_json(event)
        with self._lock:
            fh = self._open()
            fh.write(line + "\n")
            fh.flush()

    __call__ = write

    def write_all(self, events: Iterable[BaseModel | Mapping[str, Any]]) -> None:
        for event in events:
            self.write(event)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _describe(error: ValidationError) -> str:
    parts = []
    for err in error.errors(include_url=False)[:5]:
        # loc[0] is the union tag (the event type), which the message already names.
        loc = ".".join(str(p) for p in err["loc"][1:]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    more = error.error_count() - len(parts)
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def read_trace(path: str | os.PathLike[str]) -> list[Any]:
    """Read a JSON Lines trace file into `list[TraceEvent]`; blank lines are skipped.

    Raises `TraceError` naming the file, and the 1-based line number of a malformed line.
    """
    name = str(path)
    text = read_text_file(path, TraceError, "trace file")
    events: list[Any] = []
    # Split on "\n" only: str.splitlines() would also split on U+2028 and friends, which
    # ensure_ascii=False leaves unescaped inside JSON strings.
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(
                f"invalid JSON ({exc.msg} at column {exc.colno})", file=name, line=lineno
            ) from None
        if not isinstance(data, dict):
            raise TraceError(
                f"expected a JSON object, got {type(data).__name__}", file=name, line=lineno
            )
        try:
            events.append(trace_event_from_dict(data))
        except ValidationError as exc:
            kind = data.get("type")
            label = f"{kind!r} event" if isinstance(kind, str) else "event"
            raise TraceError(f"invalid {label}: {_describe(exc)}", file=name, line=lineno) from None
    return events
