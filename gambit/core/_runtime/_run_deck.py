"""`run_deck`, the entry point: runs a deck tree to completion against a model provider.

It loads the deck tree (unless given one), sets up the run-wide `_Run` and the root
conversation (`_RootState`, fresh or resumed from a SavedState), recovers and validates the
root's context input, traces `run.start`, executes the root deck (`execute_deck`), and
always traces `run.end` with the run's status, usage and duration, publishing the final
state even when the run fails or is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._deck import Deck, DeckTree, Guardrails
from .._depth import MAX_VALUE_DEPTH, too_deep
from .._ids import new_id
from .._loader import load_deck_tree
from .._loader.paths import ProjectRoot
from .._loader.tree import ProjectRootSpec
from .._messages import IncrementalMessages
from .._openresponses import FunctionCallItem, FunctionCallOutputItem, ResponseUsage
from .._permissions import EntryPermissions, PermissionSet
from .._provider import ModelProvider, ModelResolver
from .._state import SavedState, new_state, state_items
from .._trace import RunEndEvent, RunStartEvent
from ._common import (
    _MISSING,
    CONTEXT_TOOL,
    LEGACY_CONTEXT_TOOL,
    Mode,
    RunError,
    StateCallback,
    ToolHandler,
    TraceCallback,
    _Paused,
    is_end_signal,
)
from ._context import CompactionSettings
from ._execute import execute_deck
from ._limits import SYSTEM_CLOCK, Clock, _root_limits
from ._run import RunResult, _RootState, _Run, _TracedItems
from ._validation import _validate


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
    entry_permissions: EntryPermissions | None = None,
    host_env: Mapping[str, str] | None = None,
    tools_base_dir: str | Path | None = None,
    clock: Clock | None = None,
    project_root: ProjectRootSpec = None,
    compaction: CompactionSettings | None = None,
    instructions: str | None = None,
) -> RunResult:
    """Run a deck to completion and return its validated output.

    `context` is the deck's context input (omit it for none); `message` an initial user
    message appended after it. Passing `state` resumes a conversation: nothing is
    re-injected and the context is recovered from it. `mode` picks the provider method
    (docs/providers.md, "Chat mode"): "responses" (canonical) or "chat". `clock` replaces the
    system clock for
    deadlines and handler timers (tests). `project_root` is where every deck file must lie
    (see `load_deck_tree`); a tree keeps the one it was loaded with. `entry_permissions`
    narrows a root that runs as a `[[scenarios]]`/`[[graders]]` entry (see `entry_permissions`).
    `compaction` gives the context windows of the models and whether conversations may be
    compacted (see `_context`; a deck's `[modelParams]` may set its own).
    `instructions` reach the root deck's model requests of this run only (the Responses
    API's field; kept out of the saved state). An `on_tool` that returns
    `TOOL_CALL_DEFERRED` stops the run after that pass (`RunResult.pending_tool_calls`).
    Raises `RunError`
    (guardrails, validation), `ProviderError`, `DeckError`; cancellation raises
    `CancelledError`.
    """
    if isinstance(deck, DeckTree):
        root, decks, load_warnings = deck.root, dict(deck.decks), list(deck.warnings)
        project_root = project_root if project_root is not None else deck.project_root
    elif isinstance(deck, Deck):
        root, decks, load_warnings = deck, {deck.path: deck}, list(deck.warnings)
    else:
        tree = load_deck_tree(deck, strict=strict, project_root=project_root)
        root, decks, load_warnings = tree.root, dict(tree.decks), list(tree.warnings)
        project_root = tree.project_root
    if project_root is not None and not isinstance(project_root, ProjectRoot):
        project_root = ProjectRoot(project_root)
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
        project_root=project_root,
    )
    run.root_deck_path = root.path
    run.compaction = compaction
    run.instructions = instructions or None
    run.workspace_permissions = workspace_permissions
    run.session_permissions = session_permissions
    run.entry_permissions = entry_permissions
    run.host_env = dict(host_env or {})
    run.tools_base_dir = str(tools_base_dir) if tools_base_dir is not None else None
    # A shallow copy: the run replaces the copy's fields and never mutates what they hold
    # (a deep copy cost 1 ms per call at 50 turns).
    base = state.model_copy() if state is not None else new_state(mode, run_id=resolved_run_id)
    base.run_id = resolved_run_id
    memo = state._messages_memo if state is not None else None
    traced = state._trace_memo if state is not None else None
    root_state = _RootState(
        base,
        on_state,
        mode,
        IncrementalMessages.restore(memo),
        traced.copy() if traced is not None else _TracedItems(),
    )
    resumed = state is not None and bool(state_items(state))
    limits = _root_limits(guardrails or Guardrails(), clock or SYSTEM_CLOCK)
    status, error = "completed", None
    usage: ResponseUsage | None = None
    started = time.monotonic()
    try:
        if context is _MISSING and resumed and state is not None:
            context = _recover_context(state)
        for what, value in (("context", context), ("message", message)):
            if value is not _MISSING and too_deep(value):
                raise RunError(
                    f"{what} of {root.path} is nested more than {MAX_VALUE_DEPTH} levels deep"
                    " (fix: flatten it)",
                    code="invalid_input",
                    deck_path=root.path,
                )
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
            RunStartEvent,
            deck_path=root.path,
            input=None if context is _MISSING else context,
            initial_user_message=message,
            mode=mode,
            provider=provider.name,
            offline=True if getattr(provider, "offline", False) else None,
        )
        run.trace_warnings(load_warnings, root.path)  # in the run's own trace
        output = await execute_deck(
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
        usage = run.usage.to_model()
        if isinstance(output, _Paused):
            status = "paused"  # waiting for the caller's answers to its tool calls
            return RunResult(
                run.run_id,
                None,
                root_state.state,
                usage,
                pending_tool_calls=output.calls,
                incomplete_details=run.incomplete,
            )
        ended = is_end_signal(output)
        if ended:
            status = "ended"
        elif run.incomplete is not None:
            status = "incomplete"  # the model stopped early (max_output_tokens, a filter)
        return RunResult(
            run.run_id, output, root_state.state, usage, ended, incomplete_details=run.incomplete
        )
    except asyncio.CancelledError:
        status, error = "canceled", "Run canceled"
        raise
    except BaseException as exc:
        status, error = "failed", str(exc) or type(exc).__name__
        raise
    finally:
        root_state.publish()
        if run.on_trace is not None:
            run.trace(
                RunEndEvent,
                status=status,
                error=error,
                usage=(usage if usage is not None else run.usage.to_model()).to_dict(),
                duration_ms=int((time.monotonic() - started) * 1000),
            )


def run_deck_sync(deck: str | Path | Deck | DeckTree, **options: Any) -> RunResult:
    """`run_deck` for synchronous callers (it starts and closes its own event loop)."""
    return asyncio.run(run_deck(deck, **options))


def _recover_context(state: SavedState) -> Any:
    """The last `gambit_context` (or `gambit_init`) output of a saved conversation."""
    names: dict[str, str] = {}
    found: Any = _MISSING
    # Exact classes (state items are validated into them): isinstance on a pydantic model
    # goes through ABCMeta, and this scans the whole conversation of every resumed run.
    for item in state_items(state):
        kind = type(item)
        if kind is FunctionCallItem:
            names[item.call_id] = item.name
        elif kind is FunctionCallOutputItem and names.get(item.call_id) in (
            CONTEXT_TOOL,
            LEGACY_CONTEXT_TOOL,
        ):
            try:
                found = json.loads(item.output)
            except (ValueError, RecursionError):
                found = item.output
    return found


def _resolve_root_input(deck: Deck, context: Any, message: Any) -> Any:
    if context is not _MISSING:
        return context
    schema = deck.context_schema
    if schema is None or schema.is_optional:
        return _MISSING
    if message is not None:
        # A message-only run of a deck whose context is all optional: `{}` (or `""`).
        candidate: dict[str, Any] | str
        for candidate in ({}, ""):
            if schema.is_valid(candidate):
                return candidate
    return _MISSING
