"""The run loop: `run_deck` executes a deck against a model provider (seeds 000 and 002).

Seed behaviour for synthetic tools (DESIGN §2.1): `gambit_context` is injected at the start
of a fresh run that has context input; `gambit_respond` (offered when the deck has
`respond`) finishes the deck with an envelope; `gambit_end` (offered when `allowEnd`) ends
the whole session with an end signal; after every action result a `gambit_complete`
call/output pair carrying the envelope is appended.

The conversation is kept as Open Responses items (canonical); chat messages are derived
for chat mode and for the saved state. Every step is traced (reference §4) through the
caller's `on_trace`, and the root conversation is handed to `on_state` after every pass.
Cancelling the task that awaits `run_deck` cancels the run at its next await point; the
run then ends as canceled (`run.end` with `status: "canceled"`) and `CancelledError`
propagates to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._builtin_tools import call_builtin_tool, offered_tools, tool_definition
from ._compute import DeckDefinition
from ._deck import ActionDecl, Deck, DeckTree, Guardrails, HandlerDecl
from ._errors import GambitError
from ._ids import new_id
from ._loader import load_deck_tree
from ._messages import ChatMessage, IncrementalMessages, items_to_messages
from ._openresponses import (
    CreateResponseRequest,
    CreateResponseResponse,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ResponseFunctionDefinition,
    ResponseTextConfig,
    ResponseToolDefinition,
    ResponseUsage,
    item_to_dict,
    json_schema_text_format,
    message_item,
)
from ._permissions import EffectivePermissions, PermissionSet, resolve_effective
from ._provider import (
    ChatProvider,
    ModelProvider,
    ModelResolver,
    ProviderError,
    ProviderResponse,
    ResolvedModel,
)
from ._schema import Schema, SchemaValidationError
from ._state import MessageRef, SavedState, new_state, state_items

DEFAULT_MAX_DEPTH = 3
DEFAULT_MAX_PASSES = 10
DEFAULT_TIMEOUT_MS = 120_000
DEFAULT_HANDLER_DELAY_MS = 800
CONTEXT_TOOL = "gambit_context"
LEGACY_CONTEXT_TOOL = "gambit_init"
RESPOND_TOOL = "gambit_respond"
END_TOOL = "gambit_end"
COMPLETE_TOOL = "gambit_complete"
END_SIGNAL_KEY = "__gambitEnd"
_TERMINAL_EVENTS = ("response.completed", "response.failed", "response.incomplete")
_ENVELOPE_KEYS = ("status", "message", "code", "meta")

Mode = Literal["responses", "chat"]
TraceCallback = Callable[[dict[str, Any]], None]
StateCallback = Callable[[SavedState], None]
ToolHandler = Callable[[dict[str, Any]], Any]

_MISSING: Any = object()


class RunError(GambitError):
    """A run failed for a reason of the runtime (guardrails, validation, configuration).

    `code` is machine-readable: `max_depth`, `max_passes`, `timeout`, `invalid_input`,
    `invalid_output`, `no_model`, `deck_failed`, `invalid_deck`.
    """

    def __init__(
        self, message: str, *, code: str, deck_path: str | None = None, details: Any = None
    ):
        self.code = code
        self.deck_path = deck_path
        self.details = details
        super().__init__(message)


class DeckFailure(RunError):
    """Raised by `ctx.fail(...)` in a compute deck."""


class DeckCodeError(RunError):
    """A compute deck's own code raised; the original exception is the `__cause__`."""

    def __init__(self, deck_path: str, exc: BaseException):
        detail = str(exc) or "(no message)"
        super().__init__(
            f"{deck_path} raised {type(exc).__name__}: {detail}",
            code="deck_failed",
            deck_path=deck_path,
        )


class _DeadlineExceeded(RunError):
    """The run's own deadline passed (guardrails.timeoutMs); never confused with a
    `TimeoutError` raised by deck code or a tool handler."""

    def __init__(self, deck_path: str):
        super().__init__("Timeout exceeded", code="timeout", deck_path=deck_path)


def is_end_signal(value: Any) -> bool:
    """True for the value `gambit_end` produces; callers stop the session on it."""
    return isinstance(value, dict) and value.get(END_SIGNAL_KEY) is True


@dataclass
class RunResult:
    """What `run_deck` returns."""

    run_id: str
    output: Any
    state: SavedState | None
    usage: ResponseUsage
    ended: bool = False  # the model called gambit_end

    @property
    def end_signal(self) -> dict[str, Any] | None:
        return self.output if self.ended else None


@dataclass
class _Usage:
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
        usage = ResponseUsage(
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            total_tokens=self.total,
            reasoning_tokens=self.reasoning or None,
            cached_tokens=self.cached or None,
        )
        if self.has_cost:
            usage = ResponseUsage.model_validate(
                {**usage.to_dict(), "costUsd": round(self.cost, 8)}
            )
        return usage


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
        self.usage = _Usage()
        # What the host grants the built-in tools (seed 002 [permissions]; see _permissions).
        self.workspace_permissions: PermissionSet | None = None
        self.session_permissions: PermissionSet | None = None
        self.host_env: dict[str, str] = {}
        # Where the root deck's built-in tools resolve relative paths (default: its folder);
        # a deck that works on another folder (the Build assistant) is given that folder.
        self.tools_base_dir: str | None = None

    def trace(self, type_: str, **fields: Any) -> None:
        if self.on_trace is None:
            return
        event = {"type": type_, "ts": int(time.time() * 1000), "runId": self.run_id}
        event.update({k: v for k, v in fields.items() if v is not None})
        self.on_trace(event)

    def stream_text(self, text: str) -> None:
        if text and self.on_stream_text is not None:
            self.on_stream_text(text)

    def deck(self, path: str) -> Deck:
        deck = self.decks.get(path)
        if deck is None:
            tree = load_deck_tree(path, strict=self.strict)
            self.decks.update(tree.decks)
            deck = tree.root
        return deck


@dataclass
class _Limits:
    guardrails: Guardrails
    deadline: float | None  # time.monotonic() seconds

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self, deck_path: str) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _DeadlineExceeded(deck_path)


@dataclass
class _RootState:
    """The root conversation's state, published to `on_state` after every pass."""

    state: SavedState
    on_state: StateCallback | None
    mode: Mode
    messages: IncrementalMessages = field(default_factory=IncrementalMessages)

    def publish(self, items: list[Any] | None = None) -> None:
        if items is not None:
            self.state = _with_items(self.state, items, self.mode, self.messages.convert(items))
            self.state._messages_memo = self.messages.snapshot()
        if self.on_state is not None:
            self.on_state(self.state)


# ---- public entry points ------------------------------------------------------------------


async def run_deck(
    deck: str | Path | Deck | DeckTree,
    *,
    provider: ModelProvider,
    context: Any = _MISSING,
    message: Any = None,
    state: SavedState | None = None,
    mode: Mode = "responses",
    stream: bool = False,
    on_stream_text: Callable[[str], None] | None = None,
    on_trace: TraceCallback | None = None,
    on_state: StateCallback | None = None,
    on_tool: ToolHandler | None = None,
    model_resolver: ModelResolver | None = None,
    default_model: str | None = None,
    model_override: str | None = None,
    guardrails: Guardrails | None = None,
    run_id: str | None = None,
    strict: bool = False,
    workspace_permissions: PermissionSet | None = None,
    session_permissions: PermissionSet | None = None,
    host_env: Mapping[str, str] | None = None,
    tools_base_dir: str | Path | None = None,
) -> RunResult:
    """Run a deck to completion and return its validated output.

    `context` is the deck's context input (omit it for none); `message` an initial user
    message appended after it. Passing `state` resumes a conversation: nothing is
    re-injected and the context is recovered from it. `mode` picks the provider method
    (seed 000): "responses" (canonical) or "chat". Raises `RunError` (guardrails,
    validation), `ProviderError`, `DeckError`; cancellation raises `CancelledError`.
    """
    if isinstance(deck, DeckTree):
        root, decks, load_warnings = deck.root, dict(deck.decks), list(deck.warnings)
    elif isinstance(deck, Deck):
        root, decks, load_warnings = deck, {deck.path: deck}, list(deck.warnings)
    else:
        tree = load_deck_tree(deck, strict=strict)
        root, decks, load_warnings = tree.root, dict(tree.decks), list(tree.warnings)
    resolved_run_id = run_id or (state.run_id if state is not None else None) or new_id("run")
    run = _Run(
        run_id=resolved_run_id,
        provider=provider,
        resolver=model_resolver,
        default_model=default_model,
        model_override=model_override,
        mode=mode,
        stream=stream,
        on_stream_text=on_stream_text,
        on_trace=on_trace,
        on_tool=on_tool,
        decks=decks,
        strict=strict,
    )
    run.workspace_permissions = workspace_permissions
    run.session_permissions = session_permissions
    run.host_env = dict(host_env or {})
    run.tools_base_dir = str(tools_base_dir) if tools_base_dir is not None else None
    # A shallow copy: the run replaces the copy's fields and never mutates what they hold
    # (a deep copy cost 1 ms per call at 50 turns).
    base = state.model_copy() if state is not None else new_state(mode, run_id=resolved_run_id)
    base.run_id = resolved_run_id
    memo = state._messages_memo if state is not None else None
    root_state = _RootState(base, on_state, mode, IncrementalMessages.restore(memo))
    resumed = state is not None and bool(state_items(state))
    limits = _root_limits(guardrails or Guardrails())
    status, error = "completed", None
    started = time.monotonic()
    try:
        if context is _MISSING and resumed:
            context = _recover_context(state)
        context = _resolve_root_input(root, context, message)
        if context is not _MISSING:
            context = _validate(
                root.context_schema,
                context,
                what="context",
                deck_path=root.path,
                code="invalid_input",
            )
        elif root.context_schema is not None and not root.context_schema.is_optional:
            raise RunError(
                f"{root.path} requires context input: its contextSchema does not accept an"
                " empty value (pass --context)",
                code="invalid_input",
                deck_path=root.path,
            )
        run.trace(
            "run.start",
            deckPath=root.path,
            input=None if context is _MISSING else context,
            initialUserMessage=message,
            mode=mode,
            provider=provider.name,
            offline=True if getattr(provider, "offline", False) else None,
        )
        for problem in load_warnings:  # deprecations and the like, in the run's own trace
            run.trace(
                "log",
                deckPath=problem.file or root.path,
                level="warn",
                title="deck warning",
                message=problem.render(),
            )
        output = await _execute(
            run,
            root,
            context,
            depth=0,
            parent_action_call_id=None,
            limits=limits,
            message=message,
            root_state=root_state,
            resumed=resumed,
            context_validated=True,
        )
        ended = is_end_signal(output)
        if ended:
            status = "ended"
        return RunResult(run.run_id, output, root_state.state, run.usage.to_model(), ended)
    except asyncio.CancelledError:
        status, error = "canceled", "Run canceled"
        raise
    except BaseException as exc:
        status, error = "failed", str(exc) or type(exc).__name__
        raise
    finally:
        root_state.publish()
        run.trace(
            "run.end",
            status=status,
            error=error,
            usage=run.usage.to_model().to_dict(),
            durationMs=int((time.monotonic() - started) * 1000),
        )


def run_deck_sync(deck: str | Path | Deck | DeckTree, **options: Any) -> RunResult:
    """`run_deck` for synchronous callers (it starts and closes its own event loop)."""
    return asyncio.run(run_deck(deck, **options))


# ---- helpers: input, limits, state ----------------------------------------------------------


def _root_limits(caller: Guardrails) -> _Limits:
    """The caller's guardrails over the defaults; the deadline starts with the root deck."""
    merged = Guardrails(
        max_depth=_first(caller.max_depth, DEFAULT_MAX_DEPTH),
        max_passes=_first(caller.max_passes, DEFAULT_MAX_PASSES),
        timeout_ms=_first(caller.timeout_ms, DEFAULT_TIMEOUT_MS),
    )
    return _Limits(merged, None)


def _deck_limits(deck: Deck, inherited: _Limits) -> _Limits:
    """A deck's own `[guardrails]` override the caller's and propagate to its children."""
    own = deck.guardrails
    merged = Guardrails(
        max_depth=_first(own.max_depth, inherited.guardrails.max_depth),
        max_passes=_first(own.max_passes, inherited.guardrails.max_passes),
        timeout_ms=_first(own.timeout_ms, inherited.guardrails.timeout_ms),
    )
    # The effective timeout starts a deadline now, capped by the inherited one (a child can
    # tighten it, never extend it); 0 means no local limit.
    return _Limits(merged, _deadline(merged.timeout_ms, inherited.deadline))


def _deadline(timeout_ms: int | None, inherited: float | None) -> float | None:
    if not timeout_ms:  # 0 (or unset) means no local limit; an inherited deadline still applies
        return inherited
    local = time.monotonic() + timeout_ms / 1000
    return local if inherited is None else min(local, inherited)


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _recover_context(state: SavedState) -> Any:
    """The last `gambit_context` (or `gambit_init`) output of a saved conversation."""
    names: dict[str, str] = {}
    found: Any = _MISSING
    for item in state_items(state):
        if isinstance(item, FunctionCallItem):
            names[item.call_id] = item.name
        elif isinstance(item, FunctionCallOutputItem) and names.get(item.call_id) in (
            CONTEXT_TOOL,
            LEGACY_CONTEXT_TOOL,
        ):
            try:
                found = json.loads(item.output)
            except ValueError:
                found = item.output
    return found


def _resolve_root_input(deck: Deck, context: Any, message: Any) -> Any:
    if context is not _MISSING:
        return context
    schema = deck.context_schema
    if schema is None or schema.is_optional:
        return _MISSING
    if message is not None:
        # A message-only run of a deck whose context is all optional (reference §2.3).
        for candidate in ({}, ""):
            if schema.is_valid(candidate):
                return candidate
    return _MISSING


# Item -> its trace dict. Items are never changed once made, and a resumed conversation
# traces the same items on every model call, so each is serialised once. Pydantic models
# are unhashable, so entries are keyed by id() and dropped when the item is collected.
# Trace payloads are read-only for sinks.
_ITEM_DICTS: dict[int, tuple[weakref.ref, dict[str, Any]]] = {}


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
            ref = weakref.ref(item, lambda _r, key=key: _ITEM_DICTS.pop(key, None))
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
    same = 0
    limit = min(len(prior), len(before), len(messages))
    while same < limit and messages[same] is before[same]:
        same += 1
    refs = prior[:same]
    refs.extend(
        prior[index]
        if index < len(prior) and prior[index].role == messages[index].role
        else MessageRef(id=new_id("msg"), role=messages[index].role)
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


def _validate(schema: Schema | None, value: Any, *, what: str, deck_path: str, code: str) -> Any:
    if schema is None:
        return value
    try:
        return schema.validate(value)
    except SchemaValidationError as exc:
        raise RunError(f"{what} of {deck_path}: {exc}", code=code, deck_path=deck_path) from None


def _validate_output(schema: Schema | None, value: Any, *, deck_path: str, is_root: bool) -> Any:
    """Seed output rule: validate; a string that fails is tried again as JSON."""
    if schema is None:
        if is_root and not isinstance(value, str) and value is not None:
            return json.dumps(value, ensure_ascii=False)
        return value
    try:
        return schema.validate(value)
    except SchemaValidationError as exc:
        error = exc
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = _MISSING
        if parsed is not _MISSING:
            try:
                return schema.validate(parsed)
            except SchemaValidationError as exc:
                error = exc
    raise RunError(
        f"output of {deck_path} does not match its responseSchema: {error}",
        code="invalid_output",
        deck_path=deck_path,
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _envelope_fields(source: dict[str, Any]) -> dict[str, Any]:
    """The optional envelope fields of `source`, kept only when they have the seed's types."""
    fields: dict[str, Any] = {}
    status = source.get("status")
    if isinstance(status, int | float) and not isinstance(status, bool):
        fields["status"] = status
    for key in ("message", "code"):
        if isinstance(source.get(key), str):
            fields[key] = source[key]
    if isinstance(source.get("meta"), dict):
        fields["meta"] = source["meta"]
    return fields


ENVELOPE_KEYS = frozenset({"payload", "status", "message", "code", "meta"})


def check_extension_item(deck: Deck, item: Any, source: str) -> None:
    """Validate the `data` of an extension item whose type the deck declares.

    Undeclared types pass unchanged (nothing a provider produced is dropped); a declared one
    without `data`, or whose `data` does not match its dataSchema, fails the run.
    """
    data = item if isinstance(item, dict) else item.model_dump(mode="json", exclude_none=True)
    kind = data.get("type")
    schema = deck.item_extensions.get(kind) if isinstance(kind, str) else None
    if schema is None:
        return
    if "data" not in data:
        raise RunError(
            f"{deck.path} emitted extension item {kind!r} without data ({source})",
            code="invalid_output",
            deck_path=deck.path,
        )
    try:
        schema.validate(data["data"])
    except SchemaValidationError as exc:
        raise RunError(
            f"{deck.path} emitted extension item {kind!r} ({source}) whose data does not match "
            f"its dataSchema: {exc}",
            code="invalid_output",
            deck_path=deck.path,
        ) from None


def _is_envelope(value: Any) -> bool:
    """`{payload, status?, message?, code?, meta?}`: an action result envelope (seed 002)."""
    return (
        isinstance(value, dict)
        and "payload" in value
        and set(value) <= ENVELOPE_KEYS
        and not is_end_signal(value)
    )


def _normalise_result(result: Any) -> dict[str, Any]:
    """A child's result as an envelope (seed 002 "Action result envelope")."""
    if isinstance(result, dict) and not is_end_signal(result):
        payload = result.get("payload", result)
        return {"payload": payload, **_envelope_fields(result)}
    return {"payload": result}


# ---- executing a deck -----------------------------------------------------------------------


async def _execute(
    run: _Run,
    deck: Deck,
    context: Any,
    *,
    depth: int,
    parent_action_call_id: str | None,
    limits: _Limits,
    message: Any = None,
    root_state: _RootState | None = None,
    resumed: bool = False,
    emitted: list[dict[str, Any]] | None = None,
    context_validated: bool = False,
    action: ActionDecl | None = None,
    parent_permissions: PermissionSet | None = None,
) -> Any:
    """Run one deck (root or child). `emitted` collects a compute child's intermediate items.

    `action` is the `[[actions]]` entry that called it: its resolved schemas (inline, from the
    execute module, or both; seed 002) are the ones that apply to the call.
    """
    if depth >= (limits.guardrails.max_depth or DEFAULT_MAX_DEPTH):
        raise RunError(
            f"Max depth {limits.guardrails.max_depth} exceeded",
            code="max_depth",
            deck_path=deck.path,
        )
    limits = _deck_limits(deck, limits)
    limits.check(deck.path)
    is_root = depth == 0
    context_schema = deck.context_schema
    response_schema = deck.response_schema
    if action is not None:
        context_schema = action.context_schema or context_schema
        response_schema = action.response_schema or response_schema
    if not is_root and (context_schema is None or response_schema is None):
        where = f"action {action.name!r} or " if action is not None and action.execute else ""
        raise RunError(
            f"Deck {deck.path} must declare contextSchema and responseSchema (non-root): "
            f"declare them in {where}the deck",
            code="invalid_deck",
            deck_path=deck.path,
        )
    if context is not _MISSING and not context_validated:
        context = _validate(
            context_schema, context, what="context", deck_path=deck.path, code="invalid_input"
        )
    if deck.kind == "compute":
        assert deck.definition is not None
        return await _run_compute(
            run,
            deck,
            deck.definition,
            context,
            depth,
            parent_action_call_id,
            limits,
            message,
            root_state,
            emitted,
            response_schema,
        )
    permissions = _effective_permissions(run, deck, depth, action, parent_permissions)
    execution = _LlmExecution(
        run, deck, depth, parent_action_call_id, limits, root_state, permissions
    )
    return await execution.start(context, message, resumed)


def _effective_permissions(
    run: _Run,
    deck: Deck,
    depth: int,
    action: ActionDecl | None,
    parent: PermissionSet | None,
) -> EffectivePermissions:
    """The deck's layered permissions: the host's grants at the root, the parent's below."""
    base = Path(deck.path).parent
    if (depth == 0 or parent is None) and run.tools_base_dir is not None:
        base = Path(run.tools_base_dir)
    if depth == 0 or parent is None:
        return resolve_effective(
            base,
            workspace=run.workspace_permissions,
            declaration=deck.permissions,
            session=run.session_permissions,
        )
    return resolve_effective(
        base,
        parent=parent,
        declaration=deck.permissions,
        reference=action.permissions if action is not None else None,
    )


# ---- compute decks ----------------------------------------------------------------------------


class ComputeContext:
    """The `ctx` a compute deck's `run(ctx)` receives (DESIGN §3)."""

    def __init__(
        self,
        run: _Run,
        deck: Deck,
        input: Any,
        depth: int,
        action_call_id: str,
        parent_action_call_id: str | None,
        limits: _Limits,
        message: Any,
        root_state: _RootState | None,
        loop: asyncio.AbstractEventLoop,
    ):
        self._run = run
        self._deck = deck
        self.input = None if input is _MISSING else input
        self.depth = depth
        self.run_id = run.run_id
        self.action_call_id = action_call_id
        self.parent_action_call_id = parent_action_call_id
        self.label = deck.label
        self.initial_user_message = message
        self._limits = limits
        self._root_state = root_state
        self._loop = loop
        self.emitted_items: list[dict[str, Any]] = []
        self._sequence = 0
        self._spawned: list[Any] = []  # futures of children spawned from a sync run

    def log(self, entry: Any = None, **fields: Any) -> None:
        """Trace a `log` event: `ctx.log("text")` or `ctx.log({"message", "level", "title", "body", "meta"})`."""
        data = dict(entry) if isinstance(entry, dict) else {"message": entry}
        data.update(fields)
        message = data.get("message")
        text = message if isinstance(message, str) or message is None else _json(message)
        level = (
            data.get("level") if data.get("level") in ("debug", "info", "warn", "error") else "info"
        )
        self._run.trace(
            "log",
            deckPath=self._deck.path,
            actionCallId=self.action_call_id,
            parentActionCallId=self.parent_action_call_id,
            level=level,
            title=data.get("title") or (text or None),
            message=text,
            body=data.get("body", text),
            meta=data.get("meta"),
        )

    def get_session_meta(self, key: str) -> Any:
        if not key or self._root_state is None:
            return None
        return (self._root_state.state.meta or {}).get(key)

    def set_session_meta(self, key: str, value: Any) -> None:
        if not key or self._root_state is None:
            return
        state = self._root_state.state
        meta = dict(state.meta or {})
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
        state.meta = meta or None
        self._root_state.publish()

    def append_message(self, role: str, content: Any) -> None:
        """Add a user or assistant message to the session's conversation."""
        if role not in ("user", "assistant"):
            raise ValueError("append_message role must be 'user' or 'assistant'")
        text = content if isinstance(content, str) else _json(content)
        if not text.strip() or self._root_state is None:
            return
        items = list(state_items(self._root_state.state))
        items.append(message_item(role, text.strip()))
        self._root_state.publish(items)

    def emit_output_item(self, item: dict[str, Any]) -> None:
        """Emit a supplemental output item to the parent before this action completes."""
        if not isinstance(item, dict) or not isinstance(item.get("type"), str) or not item["type"]:
            raise ValueError("emit_output_item needs an item object with a non-empty type")
        check_extension_item(self._deck, item, "ctx.emit_output_item")
        index = len(self.emitted_items)
        if index == 0:
            self._emit_response_event(
                "response.created",
                response={
                    "id": self._response_id,
                    "object": "response",
                    "status": "in_progress",
                    "output": [],
                },
            )
        for kind in ("response.output_item.added", "response.output_item.done"):
            self._emit_response_event(
                kind, response_id=self._response_id, output_index=index, item=item
            )
        self.emitted_items.append(
            {
                "responseId": self._response_id,
                "actionCallId": self.action_call_id,
                "parentActionCallId": self.parent_action_call_id,
                "deckPath": self._deck.path,
                "outputIndex": index,
                "item": item,
            }
        )

    @property
    def _response_id(self) -> str:
        return f"{self.action_call_id}:intermediate"

    def _emit_response_event(self, type_: str, **fields: Any) -> None:
        meta = {
            "run_id": self.run_id,
            "action_call_id": self.action_call_id,
            "deck_path": self._deck.path,
        }
        if self.parent_action_call_id:
            meta["parent_action_call_id"] = self.parent_action_call_id
        self._sequence += 1
        self._run.trace(type_, sequence_number=self._sequence, _gambit=meta, **fields)

    def _complete_emitter(self, ok: bool, error: str | None = None) -> None:
        if not self.emitted_items:
            return
        if ok:
            output = [entry["item"] for entry in self.emitted_items]
            self._emit_response_event(
                "response.completed",
                response={
                    "id": self._response_id,
                    "object": "response",
                    "status": "completed",
                    "output": output,
                },
            )
        else:
            self._emit_response_event(
                "response.failed", response_id=self._response_id, error={"message": error}
            )

    def fail(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        """Fail this deck with a message (and an optional machine-readable code)."""
        raise DeckFailure(
            message, code=code or "deck_failed", deck_path=self._deck.path, details=details
        )

    def spawn_and_wait(self, path: str, input: Any = None, *, message: Any = _MISSING) -> Any:
        """Run another deck as a child and return its validated output.

        In an async `run`, await the result; in a sync `run` (executed in a worker thread)
        it blocks until the child finishes.
        """
        coro = self._spawn(path, input, message)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return coro
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._spawned.append(future)
        return future.result()

    def _cancel_spawned(self) -> None:
        for future in self._spawned:
            future.cancel()

    async def _spawn(self, path: str, input: Any, message: Any) -> Any:
        self._limits.check(self._deck.path)
        target = str((Path(self._deck.path).parent / path).resolve())
        child = self._run.deck(target)
        child_message = self.initial_user_message if message is _MISSING else message
        state = self._root_state
        return await _execute(
            self._run,
            child,
            input,
            depth=self.depth + 1,
            parent_action_call_id=self.action_call_id,
            limits=self._limits,
            message=child_message,
            root_state=state,  # the working state (reference §2.9)
            resumed=bool(state is not None and state_items(state.state)),
        )


async def _run_compute(
    run: _Run,
    deck: Deck,
    definition: DeckDefinition,
    context: Any,
    depth: int,
    parent_action_call_id: str | None,
    limits: _Limits,
    message: Any,
    root_state: _RootState | None,
    emitted: list[dict[str, Any]] | None,
    response_schema: Schema | None = None,
) -> Any:
    action_call_id = new_id("action")
    loop = asyncio.get_running_loop()
    if root_state is None:  # a child compute deck works on a state of its own
        root_state = _RootState(new_state(run.mode, run_id=run.run_id), None, run.mode)
    ctx = ComputeContext(
        run,
        deck,
        context,
        depth,
        action_call_id,
        parent_action_call_id,
        limits,
        message,
        root_state,
        loop,
    )
    limits.check(deck.path)
    try:
        try:
            if inspect.iscoroutinefunction(definition.run):
                result = await _with_deadline(definition.run(ctx), limits, deck.path)
            else:
                result = await _with_deadline(
                    asyncio.to_thread(definition.run, ctx), limits, deck.path
                )
                if inspect.isawaitable(result):
                    result = await _with_deadline(result, limits, deck.path)
        except (GambitError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the deck's own code failed: one clear error naming it
            raise DeckCodeError(deck.path, exc) from exc
        limits.check(deck.path)
        schema = response_schema if response_schema is not None else deck.response_schema
        if depth > 0 and _is_envelope(result):
            # Seed 002: the payload is validated; status, message, code and meta go to the parent.
            output = {
                **result,
                "payload": _validate_output(
                    schema, result["payload"], deck_path=deck.path, is_root=False
                ),
            }
        else:
            output = _validate_output(schema, result, deck_path=deck.path, is_root=depth == 0)
    except BaseException as exc:
        ctx._cancel_spawned()
        ctx._complete_emitter(False, str(exc))
        raise
    ctx._complete_emitter(True)
    if emitted is not None:
        emitted.extend(ctx.emitted_items)
    return output


async def _with_deadline(awaitable: Awaitable[Any], limits: _Limits, deck_path: str) -> Any:
    """Await `awaitable`, cancelling it when the run's deadline passes."""
    remaining = limits.remaining()
    if remaining is None:
        return await awaitable
    if remaining <= 0:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise _DeadlineExceeded(deck_path)
    scope = asyncio.timeout(remaining)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise _DeadlineExceeded(deck_path) from None
        raise  # a TimeoutError of the deck's own code


# ---- LLM decks --------------------------------------------------------------------------------


@dataclass
class _ToolCall:
    call_id: str
    name: str
    arguments: str
    args: dict[str, Any]


@dataclass
class _PassOutput:
    items: list[Any]
    text: str
    calls: list[_ToolCall]
    usage: ResponseUsage | None


class _LlmExecution:
    def __init__(
        self,
        run: _Run,
        deck: Deck,
        depth: int,
        parent_action_call_id: str | None,
        limits: _Limits,
        root_state: _RootState | None,
        permissions: EffectivePermissions | None = None,
    ):
        self.run = run
        self.deck = deck
        self.permissions = permissions
        self.depth = depth
        self.parent = parent_action_call_id
        self.limits = limits
        self.root_state = root_state
        self.action_call_id = new_id("action")
        self.items: list[Any] = []
        self.last_activity = time.monotonic()
        self.last_child_result: Any = None

    def _trace(self, type_: str, **fields: Any) -> None:
        self.run.trace(type_, **fields)

    def _publish(self) -> None:
        if self.root_state is not None:
            self.root_state.publish(self.items)

    async def start(self, context: Any, message: Any, resumed: bool) -> Any:
        deck = self.deck
        if resumed and self.root_state is not None:
            self.items = list(state_items(self.root_state.state))
        else:
            if deck.system_prompt:
                self.items.append(message_item("system", deck.system_prompt))
            if context is not _MISSING:
                self._inject_context(context)
        if message is not None:
            text = (
                message
                if isinstance(message, str)
                else json.dumps(message, indent=2, ensure_ascii=False)
            )
            self.items.append(message_item("user", text))
            self._trace(
                "message.user",
                actionCallId=self.action_call_id,
                deckPath=deck.path,
                message={"role": "user", "content": text},
                parentActionCallId=self.parent,
            )
        tools = self._tools()
        text_config = self._text_config()
        self._trace(
            "deck.start",
            deckPath=deck.path,
            actionCallId=self.action_call_id,
            parentActionCallId=self.parent,
            permissions=self.permissions.to_json()
            if self.permissions is not None and self._builtin_tools()
            else None,
        )
        self._publish()
        max_passes = self.limits.guardrails.max_passes or DEFAULT_MAX_PASSES
        for _ in range(max_passes):
            self.limits.check(deck.path)
            output = await self._model_pass(tools, text_config)
            self.limits.check(deck.path)
            if output.calls:
                if output.text:
                    self.items.append(message_item("assistant", output.text))
                self._append_supplemental(output.items)
                finished = await self._tool_batch(output.calls)
                self._publish()
                if finished is not _MISSING:
                    self._trace(
                        "deck.end",
                        deckPath=deck.path,
                        actionCallId=self.action_call_id,
                        parentActionCallId=self.parent,
                    )
                    return finished
                continue
            self._append_supplemental(output.items)
            if output.text:
                self.items.append(message_item("assistant", output.text))
            self._publish()
            if self.parent is not None and output.text:
                self._trace(
                    "monolog",
                    deckPath=deck.path,
                    actionCallId=self.action_call_id,
                    parentActionCallId=self.parent,
                    content=output.text,
                )
            if deck.respond:
                continue  # only gambit_respond completes a respond deck (seed 002)
            result = _validate_output(
                deck.response_schema, output.text, deck_path=deck.path, is_root=self.depth == 0
            )
            self._trace(
                "deck.end",
                deckPath=deck.path,
                actionCallId=self.action_call_id,
                parentActionCallId=self.parent,
            )
            return result
        raise RunError(
            f"Model did not complete within guardrails ({max_passes} passes) in {deck.path}",
            code="max_passes",
            deck_path=deck.path,
        )

    def _inject_context(self, context: Any) -> None:
        call_id = new_id("call")
        self._trace(
            "tool.call",
            actionCallId=call_id,
            name=CONTEXT_TOOL,
            args={},
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )
        self.items.append(FunctionCallItem(call_id=call_id, name=CONTEXT_TOOL, arguments="{}"))
        self.items.append(FunctionCallOutputItem(call_id=call_id, output=_json(context)))
        self._trace(
            "tool.result",
            actionCallId=call_id,
            name=CONTEXT_TOOL,
            result=context,
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )

    def _append_supplemental(self, output_items: list[Any]) -> None:
        """Keep reasoning and extension items the model produced (nothing is dropped); an item
        of a type the deck declares in `[[responseItemExtensions]]` must match its dataSchema."""
        for index, item in enumerate(output_items):
            if not isinstance(item, MessageItem | FunctionCallItem | FunctionCallOutputItem):
                check_extension_item(self.deck, item, f"response.output[{index}]")
                self.items.append(item)

    # -- tools and request --------------------------------------------------------------------

    def _builtin_tools(self) -> list[str]:
        """The built-in workspace tools this deck's permissions allow (none by default)."""
        if self.permissions is None:
            return []
        declared = {a.name for a in self.deck.actions} | {t.name for t in self.deck.tools}
        return [n for n in offered_tools(self.permissions.permissions) if n not in declared]

    def _tools(self) -> list[ResponseToolDefinition]:
        deck = self.deck
        tools: list[ResponseToolDefinition] = [
            _tool(d["name"], d["description"], d["parameters"])
            for d in map(tool_definition, self._builtin_tools())
        ]
        envelope_props: dict[str, Any] = {
            "status": {"type": "number", "description": "HTTP-like status, 200 when all went well"},
            "message": {"type": "string"},
            "code": {"type": "string"},
            "meta": {"type": "object"},
        }
        if deck.allow_end:
            tools.append(
                _tool(
                    END_TOOL,
                    "End the whole session once all goals are complete or it must not continue.",
                    {
                        "type": "object",
                        "properties": {**envelope_props, "payload": {}},
                        "additionalProperties": True,
                    },
                )
            )
        if deck.respond:
            payload = (
                deck.response_schema.to_json_schema() if deck.response_schema is not None else {}
            )
            params: dict[str, Any] = {
                "type": "object",
                "properties": {"payload": payload, **envelope_props},
                "additionalProperties": False,
            }
            if deck.response_schema is not None and not deck.response_schema.is_optional:
                params["required"] = ["payload"]
            tools.append(
                _tool(RESPOND_TOOL, "Finish the current deck with a structured response.", params)
            )
        for action in deck.actions:
            schema = action.context_schema
            parameters = (
                schema.to_tool_parameters()
                if schema is not None
                else {"type": "object", "properties": {}}
            )
            tools.append(_tool(action.name, action.description or None, parameters))
        for tool in deck.effective_tools:
            parameters = (
                tool.input_schema.to_tool_parameters()
                if tool.input_schema is not None
                else {"type": "object", "additionalProperties": True}
            )
            tools.append(_tool(tool.name, tool.description, parameters))
        return tools

    def _text_config(self) -> ResponseTextConfig | None:
        schema = self.deck.response_schema
        if self.deck.respond or schema is None or not _is_structured(schema.to_json_schema()):
            return None
        return json_schema_text_format(_format_name(self.deck), schema.to_json_schema())

    def _resolve_model(self) -> ResolvedModel:
        deck = self.deck
        params = deck.model_params.provider_params() or None
        models = deck.model_params.models or []
        # A resolver gets one model as a string, and a fallback list only when there is one.
        candidate: str | list[str] | None = (
            self.run.model_override
            or (models[0] if len(models) == 1 else list(models) or None)
            or self.run.default_model
        )
        if not candidate:
            raise RunError(
                f"No model configured for deck {deck.path} and no --model provided",
                code="no_model",
                deck_path=deck.path,
            )
        if self.run.resolver is not None:
            resolved = self.run.resolver.resolve_model(
                candidate, params=params, deck_path=deck.path
            )
            if resolved.params is None:
                resolved.params = params
            return resolved
        model = candidate if isinstance(candidate, str) else candidate[0]
        return ResolvedModel(model=model, params=params)

    async def _model_pass(
        self, tools: list[ResponseToolDefinition], text: ResponseTextConfig | None
    ) -> _PassOutput:
        run = self.run
        resolved = self._resolve_model()
        provider = resolved.provider or run.provider
        # Everything here is already validated (items, tools, text): constructing without
        # validation keeps a pass flat as the conversation grows (validating 300 items again
        # cost 0.1 ms per call).
        request = CreateResponseRequest.model_construct(
            model=resolved.model,
            input=list(self.items),
            tools=tools or None,
            text=text,
            stream=run.stream or None,
            params=resolved.params,
        )
        self._trace(
            "model.call",
            actionCallId=self.action_call_id,
            deckPath=self.deck.path,
            parentActionCallId=self.parent,
            model=resolved.model,
            provider=getattr(provider, "name", None),
            offline=True if getattr(provider, "offline", False) else None,
            stream=run.stream,
            messageCount=len(self.items),
            toolCount=len(tools),
            # Built only when a sink listens: serialising the whole conversation is the
            # costliest part of a pass at 50 turns.
            tools=[t.to_dict() for t in tools] if run.on_trace is not None else None,
            mode=run.mode,
            items=_trace_items(self.items) if run.on_trace is not None else None,
        )
        started = time.monotonic()
        streamer = _StreamTracer(self, resolved.model)
        state = self.root_state.state if self.root_state is not None else None
        if run.mode == "chat" and isinstance(provider, ChatProvider):
            coro = self._chat_call(provider, request, state, streamer)
        else:
            coro = provider.responses(
                request,
                state=state,
                deck_path=self.deck.path,
                on_stream_event=streamer.on_event
                if (run.stream or run.on_trace or run.on_stream_text)
                else None,
            )
        idle = self._idle_watcher()
        try:
            result: ProviderResponse = await _with_deadline(coro, self.limits, self.deck.path)
        finally:
            if idle is not None:
                idle.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await idle
        streamer.finish(result.response)
        if result.response.status == "failed":
            code, message = _error_fields(result.response.error)
            raise ProviderError(
                (message or "the response failed") + f" (model {resolved.model})",
                provider=getattr(provider, "name", "provider"),
                code=code,
                partial_text=streamer.text(),
            )
        if result.updated_state is not None and self.root_state is not None:
            self.root_state.state.meta = result.updated_state.meta or self.root_state.state.meta
        output_items = list(result.response.output)
        text = "".join(
            part.text
            for item in output_items
            if isinstance(item, MessageItem) and item.role == "assistant"
            for part in item.content
            if getattr(part, "type", None) == "output_text"
        )
        calls = [
            _ToolCall(item.call_id, item.name, item.arguments, _parse_args(item.arguments))
            for item in output_items
            if isinstance(item, FunctionCallItem)
        ]
        run.usage.add(result.response.usage)
        self._trace(
            "model.result",
            actionCallId=self.action_call_id,
            deckPath=self.deck.path,
            parentActionCallId=self.parent,
            model=resolved.model,
            provider=getattr(provider, "name", None),
            offline=True if getattr(provider, "offline", False) else None,
            finishReason="tool_calls" if calls else "stop",
            message={"role": "assistant", "content": text or None},
            toolCalls=[{"id": c.call_id, "name": c.name, "args": c.args} for c in calls] or None,
            usage=result.response.usage.to_dict() if result.response.usage else None,
            mode=run.mode,
            output=[item_to_dict(i) for i in output_items],
            responseId=result.response.id,
            durationMs=int((time.monotonic() - started) * 1000),
        )
        self.last_activity = time.monotonic()
        return _PassOutput(output_items, text, calls, result.response.usage)

    async def _chat_call(
        self,
        provider: Any,
        request: CreateResponseRequest,
        state: SavedState | None,
        streamer: _StreamTracer,
    ) -> ProviderResponse:
        messages = items_to_messages(request.input, fold_into_text=True)
        result = await provider.chat(
            model=request.model,
            messages=messages,
            tools=request.tools,
            stream=bool(request.stream),
            state=state,
            deck_path=self.deck.path,
            on_stream_text=streamer.on_chat_text,
            params=request.params,
        )
        if result.finish_reason == "tool_calls" and not result.tool_calls:
            raise RunError(
                "Model requested tool_calls but provided none",
                code="provider_protocol",
                deck_path=self.deck.path,
            )
        if (
            result.finish_reason == "length"
            and not result.message.content
            and not result.tool_calls
        ):
            raise RunError(
                "Model stopped early (length) with no content",
                code="provider_protocol",
                deck_path=self.deck.path,
            )
        items: list[Any] = []
        if result.message.content:
            items.append(message_item("assistant", result.message.content))
        for call in result.tool_calls:
            arguments = (
                call.arguments if call.arguments not in (None, "", "{}") else _json(call.args)
            )
            items.append(FunctionCallItem(call_id=call.id, name=call.name, arguments=arguments))
        response = CreateResponseResponse(
            id=new_id("resp"), status="completed", output=items, usage=result.usage
        )
        return ProviderResponse(response=response, updated_state=result.updated_state)

    # -- idle handler -------------------------------------------------------------------------

    def _idle_watcher(self) -> asyncio.Task[None] | None:
        handler = self.deck.handlers.get("onIdle")
        if handler is None:
            return None
        return asyncio.create_task(self._watch_idle(handler))

    async def _watch_idle(self, handler: HandlerDecl) -> None:
        delay = (
            handler.delay_ms if handler.delay_ms is not None else DEFAULT_HANDLER_DELAY_MS
        ) / 1000
        fired = False
        while True:
            wait = self.last_activity + delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if fired and not handler.repeat_ms:
                return
            idle_ms = int((time.monotonic() - self.last_activity) * 1000)
            payload = {
                "kind": "idle",
                "label": self.deck.label,
                "source": {"deckPath": self.deck.path},
                "trigger": {"reason": "idle_timeout", "elapsedMs": idle_ms},
            }
            text = await self._run_handler(handler, payload, self.parent)
            if text:
                self.run.stream_text(text + "\n")
                self.items.append(message_item("assistant", f"{text} (idle for {idle_ms}ms)"))
            fired = True
            self.last_activity = time.monotonic()
            if handler.repeat_ms:
                delay = handler.repeat_ms / 1000

    async def _run_handler(
        self, handler: HandlerDecl, payload: dict[str, Any], parent: str | None
    ) -> str:
        """Run a busy or idle handler; its failures never affect the run."""
        try:
            output = await _execute(
                self.run,
                self.run.deck(handler.path),
                payload,
                depth=self.depth + 1,
                parent_action_call_id=parent or self.action_call_id,
                limits=self.limits,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            return ""
        if isinstance(output, str):
            return output.strip()
        if isinstance(output, dict) and isinstance(output.get("message"), str):
            return output["message"].strip()
        return _json(output) if output is not None else ""

    # -- tool calls ---------------------------------------------------------------------------

    async def _tool_batch(self, calls: list[_ToolCall]) -> Any:
        """Dispatch the model's tool calls in order; return a finishing value or _MISSING."""
        finished: Any = _MISSING
        end_signal: Any = _MISSING
        for call in calls:
            self.limits.check(self.deck.path)
            self.items.append(
                FunctionCallItem(call_id=call.call_id, name=call.name, arguments=call.arguments)
            )
            if call.name == RESPOND_TOOL and self.deck.respond:
                envelope, ok = self._respond(call)
                if ok:
                    finished = envelope
                continue
            if call.name == END_TOOL and self.deck.allow_end:
                end_signal = self._end(call)
                continue
            await self._dispatch(call)
            self.last_activity = time.monotonic()  # tool results count as activity (ref §2.12)
            if is_end_signal(self.last_child_result):
                end_signal = self.last_child_result
        if end_signal is not _MISSING:
            return end_signal
        return finished

    def _respond(self, call: _ToolCall) -> tuple[dict[str, Any], bool]:
        args = call.args
        self._trace(
            "tool.call",
            actionCallId=call.call_id,
            name=RESPOND_TOOL,
            args=args,
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )
        payload = args.get("payload", args) if "payload" in args else args
        try:
            payload = _validate_output(
                self.deck.response_schema, payload, deck_path=self.deck.path, is_root=False
            )
        except RunError as exc:
            # Improvement over the legacy runtime: the model is told and may try again.
            error = {"status": 400, "code": "invalid_payload", "message": str(exc)}
            self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=_json(error)))
            self._trace(
                "tool.result",
                actionCallId=call.call_id,
                name=RESPOND_TOOL,
                result=error,
                toolKind="internal",
                parentActionCallId=self.action_call_id,
            )
            return error, False
        envelope: dict[str, Any] = {"payload": payload, **_envelope_fields(args)}
        self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=_json(envelope)))
        self._trace(
            "tool.result",
            actionCallId=call.call_id,
            name=RESPOND_TOOL,
            result=envelope,
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )
        return envelope, True

    def _end(self, call: _ToolCall) -> dict[str, Any]:
        args = call.args
        self._trace(
            "tool.call",
            actionCallId=call.call_id,
            name=END_TOOL,
            args=args,
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )
        signal: dict[str, Any] = {END_SIGNAL_KEY: True}
        for key in (*_ENVELOPE_KEYS, "payload"):
            if key in args:
                signal[key] = args[key]
        self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=_json(signal)))
        self._trace(
            "tool.result",
            actionCallId=call.call_id,
            name=END_TOOL,
            result=signal,
            toolKind="internal",
            parentActionCallId=self.action_call_id,
        )
        return signal

    def _envelope(self, call: _ToolCall, body: dict[str, Any]) -> dict[str, Any]:
        envelope = {
            "runId": self.run.run_id,
            "actionCallId": call.call_id,
            "parentActionCallId": self.action_call_id,
            "source": {"deckPath": self.deck.path, "actionName": call.name},
        }
        for key in ("status", "payload", "message", "code", "meta", "intermediateOutput"):
            if key in body:
                envelope[key] = body[key]
        return envelope

    async def _dispatch(self, call: _ToolCall) -> None:
        self.last_child_result = None
        action = self.deck.action(call.name)
        tool = next((t for t in self.deck.effective_tools if t.name == call.name), None)
        builtin = action is None and tool is None and call.name in self._builtin_tools()
        kind = "action" if action is not None else "builtin" if builtin else "external"
        common = {
            "actionCallId": call.call_id,
            "name": call.name,
            "parentActionCallId": self.action_call_id,
        }
        self._trace("action.start", path=call.name, **common)
        self._trace("tool.call", args=call.args, toolKind=kind, **common)
        extra_items: list[Any] = []
        complete = False
        if action is not None:
            body, extra_items, complete = await self._run_action(action, call)
        elif builtin and self.permissions is not None:
            body = await call_builtin_tool(
                call.name,
                call.args,
                self.permissions.permissions,
                host_env=self.run.host_env,
                remaining_seconds=self.limits.remaining(),
            )
        elif tool is not None:
            body = await self._run_external(tool, call)
        else:
            body = {"status": 404, "message": "unknown action"}
        envelope = self._envelope(call, body)
        content = _json(envelope)
        self._trace("tool.result", result=content, toolKind=kind, **common)
        self.items.append(FunctionCallOutputItem(call_id=call.call_id, output=content))
        self.items.extend(extra_items)
        if complete:
            complete_id = new_id("event")
            self.items.append(
                FunctionCallItem(call_id=complete_id, name=COMPLETE_TOOL, arguments=content)
            )
            self.items.append(FunctionCallOutputItem(call_id=complete_id, output=content))
        self._trace("action.end", path=call.name, **common)

    async def _run_action(
        self, action: ActionDecl, call: _ToolCall
    ) -> tuple[dict[str, Any], list[Any], bool]:
        """Run an action deck or compute module; returns (envelope body, extra items, completed)."""
        args: Any = call.args
        schema = action.context_schema
        if schema is not None:
            args = schema.unwrap_tool_arguments(args)
            try:
                args = schema.validate(args)
            except SchemaValidationError as exc:
                return {"status": 400, "code": "invalid_input", "message": str(exc)}, [], False
        child = self.run.deck(action.target)
        busy = self._busy_watcher(action, call)
        started = time.monotonic()
        emitted: list[dict[str, Any]] = []
        try:
            result = await _execute(
                self.run,
                child,
                args,
                depth=self.depth + 1,
                parent_action_call_id=call.call_id,
                limits=self.limits,
                emitted=emitted,
                context_validated=schema is not None,
                action=action,
                parent_permissions=self.permissions.permissions
                if self.permissions is not None
                else None,
            )
        except asyncio.CancelledError:
            if busy is not None and busy.task is not None:
                busy.task.cancel()  # no late fire: the run is being cancelled
            raise
        except Exception as exc:
            busy_items = await _stop_busy(busy, fire_late=False)
            handler = self.deck.handlers.get("onError")
            if handler is None:
                raise
            body = await self._handle_error(handler, action, call, exc)
            return body, busy_items, True
        busy_items = await _stop_busy(busy, fire_late=True, elapsed=time.monotonic() - started)
        self.last_child_result = result
        if is_end_signal(result):
            return {"status": 200, "payload": result}, busy_items, False
        body = _normalise_result(result)
        if emitted:
            body["intermediateOutput"] = {"policy": "allow", "items": emitted}
        if action.response_schema is not None and action.execute:
            body["payload"] = _validate_output(
                action.response_schema, body["payload"], deck_path=action.target, is_root=False
            )
        return body, busy_items, True

    async def _handle_error(
        self, handler: HandlerDecl, action: ActionDecl, call: _ToolCall, exc: Exception
    ) -> dict[str, Any]:
        message = (
            str(exc.__cause__) if isinstance(exc, DeckCodeError) and exc.__cause__ else str(exc)
        )
        payload = {
            "kind": "error",
            "label": action.label or self.deck.label,
            "source": {"deckPath": self.deck.path, "actionName": action.name},
            "error": {"message": message},
            "childInput": call.args,
        }
        try:
            out = await _execute(
                self.run,
                self.run.deck(handler.path),
                payload,
                depth=self.depth + 1,
                parent_action_call_id=call.call_id,
                limits=self.limits,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            return {
                "status": 500,
                "message": f"Handled error: {message}",
                "code": "HANDLER_FALLBACK",
                "payload": payload,
                "meta": {"handlerFailed": True},
            }
        out_dict = out if isinstance(out, dict) else {}
        body: dict[str, Any] = {"status": 500, "message": message, **_envelope_fields(out_dict)}
        body["payload"] = out_dict.get("payload", out)
        return body

    def _busy_watcher(self, action: ActionDecl, call: _ToolCall) -> _Busy | None:
        handler = self.deck.handlers.get("onBusy")
        if handler is None:
            return None
        busy = _Busy(self, handler, action, call)
        busy.task = asyncio.create_task(busy.loop())
        return busy

    async def _run_external(self, tool: Any, call: _ToolCall) -> dict[str, Any]:
        args: Any = call.args
        if tool.input_schema is not None:
            args = tool.input_schema.unwrap_tool_arguments(args)
            try:
                args = tool.input_schema.validate(args)
            except SchemaValidationError as exc:
                return {"status": 400, "code": "invalid_input", "message": str(exc)}
        if self.run.on_tool is None:
            return {
                "status": 500,
                "code": "missing_on_tool",
                "message": f"External tool {tool.name} requires runtime onTool handler",
            }
        request = {
            "name": tool.name,
            "args": args,
            "runId": self.run.run_id,
            "actionCallId": call.call_id,
            "parentActionCallId": self.action_call_id,
            "deckPath": self.deck.path,
        }
        try:
            result = self.run.on_tool(request)
            if inspect.isawaitable(result):
                result = await _with_deadline(result, self.limits, self.deck.path)
        except _DeadlineExceeded:
            raise
        except Exception as exc:  # seed 002: a throwing onTool gives an error envelope
            return {
                "status": 500,
                "code": "tool_handler_error",
                "message": str(exc) or type(exc).__name__,
            }
        return _normalise_result(result)


class _Busy:
    """The onBusy timer for one action call (reference §2.12)."""

    def __init__(
        self, execution: _LlmExecution, handler: HandlerDecl, action: ActionDecl, call: _ToolCall
    ):
        self.execution = execution
        self.handler = handler
        self.action = action
        self.call = call
        self.started = time.monotonic()
        self.fired = False
        self.items: list[Any] = []
        self.task: asyncio.Task[None] | None = None
        self.delay = (
            handler.delay_ms if handler.delay_ms is not None else DEFAULT_HANDLER_DELAY_MS
        ) / 1000

    async def loop(self) -> None:
        await asyncio.sleep(self.delay)
        while True:
            await self.fire()
            if not self.handler.repeat_ms:
                return
            await asyncio.sleep(self.handler.repeat_ms / 1000)

    async def fire(self) -> None:
        elapsed = int((time.monotonic() - self.started) * 1000)
        ex = self.execution
        payload = {
            "kind": "busy",
            "label": self.action.label or ex.deck.label,
            "source": {"deckPath": ex.deck.path, "actionName": self.action.name},
            "trigger": {"reason": "timeout", "elapsedMs": elapsed},
            "childInput": self.call.args,
        }
        self.fired = True
        text = await ex._run_handler(self.handler, payload, self.call.call_id)
        if text:
            ex.run.stream_text(text + "\n")
            self.items.append(message_item("assistant", f"{text} (elapsed {elapsed}ms)"))


async def _stop_busy(busy: _Busy | None, *, fire_late: bool, elapsed: float = 0.0) -> list[Any]:
    if busy is None:
        return []
    assert busy.task is not None
    busy.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await busy.task
    if fire_late and not busy.fired and elapsed >= busy.delay:
        await busy.fire()
    return busy.items


class _StreamTracer:
    """Turns provider stream events into traces and text (reference §4.3)."""

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
        ex.last_activity = time.monotonic()
        is_response = kind.startswith("response.")
        projected_kind = self._TOOL_EVENTS.get(kind)
        if self.terminated and (is_response or projected_kind):
            return  # nothing after a terminal event (reference §4.3)
        if is_response:
            self._response_event(kind, event)
            return
        ex.run.trace(
            "model.stream.event",
            actionCallId=ex.action_call_id,
            deckPath=ex.deck.path,
            parentActionCallId=ex.parent,
            model=self.model,
            event=event,
        )
        if projected_kind:
            self._project_tool_event(projected_kind, event)

    def _response_event(self, kind: str, event: dict[str, Any]) -> None:
        ex = self.execution
        number = event.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool) and number > self.sequence:
            self.sequence = number
        else:
            self.sequence += 1
        fields = {k: v for k, v in event.items() if k not in ("type", "_gambit")}
        fields["sequence_number"] = self.sequence
        ex.run.trace(kind, _gambit={**(event.get("_gambit") or {}), **self._meta()}, **fields)
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
            "actionCallId": call_id,
            "name": name,
            "toolKind": event.get("toolKind") or "mcp_bridge",
            "parentActionCallId": ex.action_call_id,
        }
        if kind == "tool.call":
            fields["args"] = event.get("args", {})
        else:
            fields["result"] = event.get("result")
        ex.run.trace(kind, **fields)

    def on_chat_text(self, chunk: str) -> None:
        self.on_event({"type": "response.output_text.delta", "output_index": 0, "delta": chunk})

    def finish(self, response: Any) -> None:
        if not self.deltas and self.done_text:
            self.execution.run.stream_text("".join(self.done_text))


def _error_fields(error: Any) -> tuple[str | None, str | None]:
    """`(code, message)` of a response error, whether a model or a plain dict."""
    if isinstance(error, dict):
        return error.get("code"), error.get("message")
    return getattr(error, "code", None), getattr(error, "message", None)


def _tool(name: str, description: str | None, parameters: dict[str, Any]) -> ResponseToolDefinition:
    return ResponseToolDefinition(
        function=ResponseFunctionDefinition(
            name=name, description=description, parameters=parameters
        )
    )


def _parse_args(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_structured(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind != "string"
    if isinstance(kind, list):
        return not all(k == "string" for k in kind)
    return isinstance(schema.get("properties"), dict)


def _format_name(deck: Deck) -> str:
    base = deck.label or Path(deck.path).stem.split(".")[0]
    if Path(deck.path).name == "PROMPT.md" and not deck.label:
        base = Path(deck.path).parent.name
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")[:64]
    return name or "gambit_response"


__all__ = [
    "ComputeContext",
    "DeckFailure",
    "RunError",
    "RunResult",
    "is_end_signal",
    "run_deck",
    "run_deck_sync",
]
