"""SavedState v2: a run's conversation, persisted as JSON (docs/decks.md, "Saved state").

Shape: `{format?, runId, messages?, items?, messageRefs?, traces?, meta?, feedback?, notes?,
conversationScore?}`, JSON keys camelCase (Python attributes snake_case). Unknown keys are
kept and written back.

Rules:

- Format inference on load (`state_from_dict`, `load_state`): a missing `format` with
  `messages` means `"chat"`; a missing `format` with only `items` means `"responses"`; with
  neither, `format` stays unset. The inferred value is set on the model, so it is written
  back on save.
- A state holding only `items` loads with `messages` derived from them.
  `messageRefs` are not invented on load; `derive_messages(state)` derives messages and
  aligned `messageRefs` (keeping existing refs by index) for a runtime about to save.
- Responses mode persists `items` and `format: "responses"`: `state_to_dict` (and so
  `save_state`) writes `items` derived from `messages` when the format is `"responses"` and
  `items` is missing.
- Mixed states keep both `messages` and `items` as they are. When they disagree, the format
  decides which one is authoritative: `items` win in `"responses"` format and `messages` win
  in `"chat"` format. `state_messages(state)` and `state_items(state)` return the
  authoritative conversation in either shape.

Errors: a missing file, a file that is not UTF-8, invalid JSON, a value that is not an
object, or a wrong shape raise `StateError`, whose message starts with the file name.

`save_state` writes atomically (a temporary file in the same directory, then `os.replace`),
as pretty JSON (2-space indent) in UTF-8 with non-ASCII text kept as is.
"""

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import PrivateAttr, ValidationError

from gambit.core._depth import MAX_VALUE_DEPTH, too_deep
from gambit.core._errors import GambitError, read_text_file
from gambit.core._ids import new_id
from gambit.core._messages import ChatMessage, items_to_messages, messages_to_items
from gambit.core._openresponses import ResponseItem, _CamelModel, construct, message_item
from gambit.core._trace import TraceEvent

__all__ = [
    "FeedbackEntry",
    "MessageRef",
    "SavedState",
    "SessionNotes",
    "SessionRating",
    "StateError",
    "StateFormat",
    "derive_messages",
    "effective_format",
    "load_state",
    "new_state",
    "save_state",
    "state_from_dict",
    "state_items",
    "state_messages",
    "state_to_dict",
    "with_exchange",
]

StateFormat = Literal["chat", "responses"]


class StateError(GambitError):
    """A SavedState cannot be loaded or saved; `file` names it (None for an in-memory dict)."""

    def __init__(self, message: str, *, file: str | None = None):
        self.file = file
        self.reason = message
        super().__init__(f"{file}: {message}" if file else message)


class MessageRef(_CamelModel):
    """One per message index: a stable id for feedback and ratings."""

    id: str
    role: str
    source: Literal["scenario", "manual", "artifact"] | str | None = None


class FeedbackEntry(_CamelModel):
    id: str
    run_id: str | None = None
    message_ref_id: str | None = None
    score: int | float | None = None
    reason: str | None = None
    created_at: str | int | float | None = None


class SessionNotes(_CamelModel):
    text: str | None = None
    updated_at: str | int | float | None = None


class SessionRating(_CamelModel):
    score: int | float
    updated_at: str | int | float | None = None


class SavedState(_CamelModel):
    format: StateFormat | None = None
    run_id: str
    messages: list[ChatMessage] | None = None
    items: list[ResponseItem] | None = None
    message_refs: list[MessageRef] | None = None
    traces: list[TraceEvent] | None = None
    meta: dict[str, Any] | None = None
    feedback: list[FeedbackEntry] | None = None
    notes: SessionNotes | None = None
    conversation_score: SessionRating | None = None
    # The runtime's item -> message conversion of this state, so a resumed run converts only
    # what it adds (never serialised; checked against the items by identity before use).
    _messages_memo: Any = PrivateAttr(default=None)
    # Its items' trace dicts, so a resumed run serialises only what it adds (same check).
    _trace_memo: Any = PrivateAttr(default=None)


def new_state(format: StateFormat = "responses", *, run_id: str | None = None) -> SavedState:
    """An empty state with a fresh `run-` id: `items: []` in responses format, else `messages: []`."""
    # Nothing to validate here; constructing skips building SavedState's validator (which
    # covers every trace event type) in a process that never loads a state.
    if format == "responses":
        return construct(SavedState, format=format, run_id=run_id or new_id("run"), items=[])
    return construct(SavedState, format=format, run_id=run_id or new_id("run"), messages=[])


def effective_format(state: SavedState) -> StateFormat:
    """`format`, else "chat" when there are messages, else "responses" (the runtime default)."""
    if state.format is not None:
        return state.format
    return "chat" if state.messages is not None else "responses"


def state_messages(state: SavedState) -> list[ChatMessage]:
    """The authoritative conversation as chat messages (items win in responses format)."""
    if state.items is not None and (
        effective_format(state) == "responses" or state.messages is None
    ):
        return items_to_messages(state.items)
    return list(state.messages or [])


def state_items(state: SavedState) -> list[Any]:
    """The authoritative conversation as items (messages win in chat format)."""
    if state.messages is not None and (effective_format(state) == "chat" or state.items is None):
        return messages_to_items(state.messages)
    return list(state.items or [])


def _aligned_refs(messages: list[ChatMessage], prior: list[MessageRef] | None) -> list[MessageRef]:
    refs: list[MessageRef] = []
    for index, message in enumerate(messages):
        old = prior[index] if prior and index < len(prior) else None
        if old is None:
            refs.append(MessageRef(id=new_id("msg"), role=message.role))
        elif old.role != message.role:
            refs.append(old.model_copy(update={"role": message.role}))
        else:
            refs.append(old)
    return refs


def derive_messages(state: SavedState) -> SavedState:
    """A copy whose `messages` and `messageRefs` are derived from `items`.

    Refs are kept by index (their role updated if it changed); missing ones get fresh `msg-`
    ids. A state without items keeps its messages and only gets its refs aligned.
    """
    messages = items_to_messages(state.items) if state.items is not None else state.messages
    messages = list(messages or [])
    return state.model_copy(
        update={"messages": messages, "message_refs": _aligned_refs(messages, state.message_refs)}
    )


def _describe(error: ValidationError) -> str:
    parts = []
    for err in error.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    more = error.error_count() - len(parts)
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def state_from_dict(data: Any, *, file: str | os.PathLike[str] | None = None) -> SavedState:
    """Validate a state dict and apply the load rules (format inference, derived messages)."""
    where = str(file) if file is not None else None
    if not isinstance(data, Mapping):
        kind = "array" if isinstance(data, list) else type(data).__name__
        raise StateError(f"a saved state must be a JSON object, got {kind}", file=where)
    try:
        state = SavedState.model_validate(data)
    except ValidationError as exc:
        raise StateError(f"invalid saved state: {_describe(exc)}", file=where) from None
    if state.format is None:
        if state.messages is not None:
            state.format = "chat"
        elif state.items is not None:
            state.format = "responses"
    if state.messages is None and state.items is not None:
        state.messages = items_to_messages(state.items)
    return state


def state_to_dict(state: SavedState | Mapping[str, Any]) -> dict[str, Any]:
    """The state as a JSON-ready dict with camelCase keys (responses format always has items)."""
    if not isinstance(state, SavedState):
        state = state_from_dict(state)
    data = state.to_dict()
    if state.format == "responses" and state.items is None and state.messages is not None:
        data["items"] = [item.to_dict() for item in messages_to_items(state.messages)]
    return data


def load_state(path: str | os.PathLike[str]) -> SavedState:
    """Read a SavedState JSON file; raises `StateError` naming the file and the problem."""
    name = str(path)
    text = read_text_file(path, StateError, "state file")
    try:
        data = json.loads(text)
        deep = too_deep(data)
    except json.JSONDecodeError as exc:
        raise StateError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=name
        ) from None
    except RecursionError:
        deep = True
    if deep:  # the engine walks states recursively (validation, tracing, saving)
        raise StateError(
            f"the state is nested more than {MAX_VALUE_DEPTH} levels deep "
            "(fix: start a new state file)",
            file=name,
        )
    return state_from_dict(data, file=name)


def save_state(path: str | os.PathLike[str], state: SavedState | Mapping[str, Any]) -> None:
    """Write a SavedState atomically: pretty JSON in a temporary file, then `os.replace`."""
    target = Path(path)
    name = str(path)
    if not isinstance(state, SavedState):
        state = state_from_dict(state, file=name)
    text = json.dumps(state_to_dict(state), ensure_ascii=False, indent=2) + "\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise StateError(f"cannot write state file ({exc.strerror or exc})", file=name) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise StateError(
                f"cannot write state file ({exc.strerror or exc})", file=name
            ) from None
        raise


def with_exchange(state: SavedState, user_text: str | None, answer: str) -> SavedState:
    """`state` with one more exchange: the user's message (when there is one) and the answer,
    as messages (empty ones left out). A compute deck keeps no conversation; a scenario or a
    repl session talking to one records it with this, so graders can read it."""
    items = state_items(state)
    if user_text is not None and user_text.strip():
        items.append(message_item("user", user_text))
    if answer.strip():
        items.append(message_item("assistant", answer))
    return derive_messages(state.model_copy(update={"items": items, "format": "responses"}))
