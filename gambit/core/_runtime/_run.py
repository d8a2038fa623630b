"""What one `run_deck` call shares across every deck it executes.

- `_Run` holds the run-wide settings (provider, model choice, mode, callbacks, the decks
  loaded so far, what the host grants the built-in tools), adds up token usage and emits
  trace events to the caller's `on_trace`, built from the `_trace` models
  (`run.trace(ModelCallEvent, action_call_id=..., ...)`), only when there is a sink.
- `_RootState` is the root conversation: after every model pass it is rebuilt from the
  conversation's items (reusing what the previous publication already had) and handed to
  `on_state`. `_TracedItems` keeps the trace dicts of its items, so each `model.call`
  serialises only what the conversation gained; both ride on the SavedState as private
  memos, for the next run that resumes it.
- `RunResult` is what `run_deck` returns.
"""

from __future__ import annotations

import operator
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._deck import Deck
from .._ids import new_id
from .._loader import load_deck_tree
from .._loader.paths import ProjectRoot, default_project_root
from .._messages import ChatMessage, IncrementalMessages
from .._openresponses import FunctionCallItem, ResponseUsage, construct, item_to_dict
from .._permissions import EntryPermissions, PermissionSet
from .._provider import ModelProvider, ModelResolver
from .._state import MessageRef, SavedState
from .._trace import DECK_WARNING, LogEvent, ResponseTraceEvent, _TraceBase
from ._common import Mode, StateCallback, ToolHandler, TraceCallback

if TYPE_CHECKING:
    from ._context import CompactionSettings


@dataclass
class RunResult:
    """What `run_deck` returns."""

    run_id: str
    output: Any
    state: SavedState  # the root conversation after the run (always set)
    usage: ResponseUsage
    ended: bool = False  # the model called gambit_end
    # The root deck's calls that the host answers later (its `on_tool` deferred them): the
    # run stopped there, `output` is None, and `state` ends with these calls unanswered.
    pending_tool_calls: list[FunctionCallItem] = field(default_factory=list)
    # Why the root deck's last model pass stopped short (`{"reason": "max_output_tokens"}`):
    # the output is what the model wrote before it was cut.
    incomplete_details: dict[str, Any] | None = None

    @property
    def end_signal(self) -> dict[str, Any] | None:
        return self.output if self.ended else None


@dataclass
class _Usage:
    """Token counts and cost summed over every model call of a run."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    reasoning: int = 0
    cached: int = 0
    cost: float = 0.0
    has_cost: bool = False

    def add(self, usage: ResponseUsage | None) -> None:
        if usage is None:
            return
        self.prompt += usage.prompt_tokens or 0
        self.completion += usage.completion_tokens or 0
        self.total += usage.total_tokens or 0
        self.reasoning += usage.reasoning_tokens or 0
        self.cached += usage.cached_tokens or 0
        cost = (usage.model_extra or {}).get("costUsd")
        if isinstance(cost, int | float):
            self.cost += cost
            self.has_cost = True

    def to_model(self) -> ResponseUsage:
        # The counts are ints by construction: built without the validator, whose first
        # build cost a one-turn `gambit run` several milliseconds.
        extra = {"costUsd": round(self.cost, 8)} if self.has_cost else {}
        return construct(
            ResponseUsage,
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            total_tokens=self.total,
            reasoning_tokens=self.reasoning or None,
            cached_tokens=self.cached or None,
            **extra,
        )


class _Run:
    """Run-wide settings shared by every deck execution of one `run_deck` call."""

    def __init__(
        self,
        *,
        run_id: str,
        provider: ModelProvider,
        resolver: ModelResolver | None,
        default_model: str | None,
        model_override: str | None,
        mode: Mode,
        stream: bool,
        on_stream_text: Callable[[str], None] | None,
        on_trace: TraceCallback | None,
        on_tool: ToolHandler | None,
        decks: dict[str, Deck],
        strict: bool,
        project_root: ProjectRoot | None = None,
    ):
        self.run_id = run_id
        self.provider = provider
        self.resolver = resolver
        self.default_model = default_model
        self.model_override = model_override
        self.mode = mode
        self.stream = stream
        self.on_stream_text = on_stream_text
        self.on_trace = on_trace
        self.on_tool = on_tool
        self.decks = decks
        self.strict = strict
        # Where decks loaded while the run goes on must lie, as the root's tree did (None:
        # the root deck's default project root, found when first needed).
        self.project_root = project_root
        self.root_deck_path = ""
        self.usage = _Usage()
        # The root deck's request `instructions` (for this run only; never in its state), and
        # why its last model pass stopped short, if it did.
        self.instructions: str | None = None
        self.incomplete: dict[str, Any] | None = None
        # What the host grants the built-in tools (see _permissions).
        self.workspace_permissions: PermissionSet | None = None
        self.session_permissions: PermissionSet | None = None
        # A scenario or grader run from a [[scenarios]]/[[graders]] entry: the entry's
        # `permissions`, relative to the deck that declares the entry (a reference layer).
        self.entry_permissions: EntryPermissions | None = None
        self.host_env: dict[str, str] = {}
        # Where the root deck's built-in tools resolve relative paths (default: its folder);
        # a deck that works on another folder (the Build assistant) is given that folder.
        self.tools_base_dir: str | None = None
        # The callers' context windows and compaction switch (`_context`); None: decks' own.
        self.compaction: CompactionSettings | None = None

    def trace(self, event: type[_TraceBase], /, **fields: Any) -> None:
        """Emit one event of the `event` model: fields by their Python names, JSON values."""
        if self.on_trace is not None:
            self.on_trace(event.wire(int(time.time() * 1000), self.run_id, fields))

    def trace_response(
        self, kind: str, fields: dict[str, Any], provider_fields: dict[str, Any]
    ) -> None:
        """Emit a `response.*` event: `fields` of `ResponseTraceEvent` (`sequence_number`,
        `gambit`), then the provider event's own fields, as they are."""
        if self.on_trace is not None:
            self.on_trace(
                ResponseTraceEvent.wire(
                    int(time.time() * 1000), self.run_id, fields, provider_fields, type=kind
                )
            )

    def stream_text(self, text: str) -> None:
        if text and self.on_stream_text is not None:
            self.on_stream_text(text)

    def deck(self, path: str) -> Deck:
        deck = self.decks.get(path)
        if deck is None:
            # A deck first loaded while the run goes on (a compute deck's spawn_and_wait
            # target): its warnings go in the trace like those of the decks loaded before.
            if self.project_root is None:
                # Decks a compute deck spawns are checked against the root deck's project.
                self.project_root = ProjectRoot(default_project_root(self.root_deck_path))
            tree = load_deck_tree(path, strict=self.strict, project_root=self.project_root)
            known = set(self.decks)
            self.decks.update(tree.decks)
            deck = tree.root
            self.trace_warnings([w for w in tree.warnings if w.file not in known], deck.path)
        return deck

    def trace_warnings(self, problems: list[Any], deck_path: str) -> None:
        """Deck warnings (deprecations and the like) as `warn` log events of the run."""
        for problem in problems:
            self.trace(
                LogEvent,
                deck_path=problem.file or deck_path,
                level="warn",
                title=DECK_WARNING,
                message=problem.render(),
            )


@dataclass
class _RootState:
    """The root conversation's state, published to `on_state` after every pass."""

    state: SavedState
    on_state: StateCallback | None
    mode: Mode
    messages: IncrementalMessages = field(default_factory=IncrementalMessages)
    traced: _TracedItems = field(default_factory=lambda: _TracedItems())

    def publish(self, items: list[Any] | None = None) -> None:
        if items is not None:
            self.state = _with_items(self.state, items, self.mode, self.messages.convert(items))
            self.state._messages_memo = self.messages.snapshot()
            self.state._trace_memo = self.traced
        if self.on_state is not None:
            self.on_state(self.state)


class _TracedItems:
    """The trace dicts (`model.call` `items`) of a conversation that grows.

    Every `model.call` event carries the whole conversation; at 50 turns serialising, or
    even looking up, 300 items per call was the largest cost of a pass. A conversation only
    grows, within a deck execution and across resumed runs (a resumed run starts from the
    state's own item objects), so the dicts of the prefix traced before are kept; the prefix
    is checked by identity, and a conversation that is not an extension of it (a state
    resumed from an earlier point) is traced from where they part.
    """

    __slots__ = ("dicts", "items")

    def __init__(self, items: list[Any] | None = None, dicts: list[Any] | None = None):
        self.items: list[Any] = items if items is not None else []
        self.dicts: list[dict[str, Any]] = dicts if dicts is not None else []

    def copy(self) -> _TracedItems:
        return _TracedItems(list(self.items), list(self.dicts))

    def of(self, items: list[Any]) -> list[dict[str, Any]]:
        """The trace dicts of `items`, a new list (sinks keep what they are given)."""
        known = self.items
        if not all(map(operator.is_, known, items)):  # compares the shorter one's length
            flags = list(map(operator.is_not, known, items))
            cut = flags.index(True)
            del known[cut:], self.dicts[cut:]
        elif len(known) > len(items):
            del known[len(items) :], self.dicts[len(items) :]
        new = items[len(known) :]
        if new:
            known.extend(new)
            self.dicts.extend(_trace_items(new))
        return list(self.dicts)


# Item -> its trace dict. Items are never changed once made, and a resumed conversation
# traces the same items on every model call, so each is serialised once. Pydantic models
# are unhashable, so entries are keyed by id() and dropped when the item is collected.
# Trace payloads are read-only for sinks.
_ITEM_DICTS: dict[int, tuple[weakref.ref, dict[str, Any]]] = {}


def _forget(key: int) -> Callable[[weakref.ref], None]:
    """The weakref callback that drops an item's entry once the item is collected."""

    def forget(_ref: weakref.ref) -> None:
        _ITEM_DICTS.pop(key, None)

    return forget


def _trace_items(items: list[Any]) -> list[dict[str, Any]]:
    out = []
    cache = _ITEM_DICTS
    for item in items:
        key = id(item)
        hit = cache.get(key)
        if hit is not None and hit[0]() is item:
            out.append(hit[1])
            continue
        data = item_to_dict(item)
        try:
            ref = weakref.ref(item, _forget(key))
        except TypeError:  # a plain dict: nothing to hold weakly
            out.append(data)
            continue
        cache[key] = (ref, data)
        out.append(data)
    return out


def _with_items(
    state: SavedState, items: list[Any], mode: Mode, messages: list[ChatMessage]
) -> SavedState:
    """The state with this conversation; items are already validated, so nothing is re-parsed."""
    prior = state.message_refs or []
    before = state.messages or []
    # Messages the previous publish already had (the same objects) keep their refs unchecked.
    limit = min(len(prior), len(before), len(messages))
    flags = list(map(operator.is_not, messages[:limit], before))  # a C loop, not a Python one
    same = flags.index(True) if True in flags else limit
    refs = prior[:same]
    refs.extend(
        prior[index]
        if index < len(prior) and prior[index].role == messages[index].role
        else construct(MessageRef, id=new_id("msg"), role=messages[index].role)
        for index in range(same, len(messages))
    )
    return state.model_copy(
        update={
            "format": mode,
            "messages": messages,
            "message_refs": refs,
            "items": list(items) if mode == "responses" else None,
        }
    )
