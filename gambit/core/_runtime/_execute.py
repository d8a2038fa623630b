"""Executing one deck, root or child: `execute_deck`.

It enforces the depth guardrail, lays the deck's own `[guardrails]` over the inherited
limits, checks that a child deck declares its schemas (an `[[actions]]` entry's resolved
schemas take precedence over the deck's), validates the context input, then hands over to
`_run_compute` (compute decks, `_compute_deck`) or to an `_LlmExecution` (LLM decks, `_llm`)
with the deck's effective permissions (the host's grants at the root, the parent's below;
every child is given its parent's set, whichever route started it).

Children are executed through this same function: actions and handlers (from `_tool_calls`
and `_handlers`) and decks spawned by compute code (from `_compute_deck`). The recursion
makes the imports circular, so these modules refer to each other as modules
(`_execute.execute_deck`, `_llm._LlmExecution`), attributes looked up at call time, which
works whichever of them is imported first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._deck import ActionDecl, Deck
from .._permissions import EffectivePermissions, PermissionSet, resolve_effective
from . import _compute_deck, _llm
from ._common import _MISSING, RunError
from ._limits import DEFAULT_MAX_DEPTH, _deck_limits, _Limits
from ._run import _RootState, _Run
from ._validation import _validate


async def execute_deck(
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
    execute module, or both) are the ones that apply to the call.
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
    permissions = _effective_permissions(run, deck, depth, action, parent_permissions)
    if deck.kind == "compute":
        assert deck.definition is not None
        return await _compute_deck._run_compute(
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
            permissions=permissions.permissions,
        )
    execution = _llm._LlmExecution(
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
    """The deck's layered permissions: the host's grants at the root, the parent's below.

    Only the root starts from the host. A deck below it that arrives without its parent's
    set is a bug in the caller, refused here rather than run as a root: a child can only
    narrow its parent, whatever started it (docs/decisions.md, "Permissions and built-in
    tools"). A compute deck cannot declare `[permissions]`; it passes on what it was given.
    """
    declares = deck.kind != "compute"
    if depth == 0:
        entry = run.entry_permissions
        base = Path(run.tools_base_dir or Path(deck.path).parent)
        return resolve_effective(
            base,
            workspace=run.workspace_permissions,
            declaration=deck.permissions,
            reference=entry.permissions if entry is not None else None,
            reference_base=entry.base_dir if entry is not None else None,
            session=run.session_permissions,
            declares=declares,
        )
    if parent is None:
        raise RunError(
            f"internal error: {deck.path} was started below the root without its parent's "
            "permissions (please report this bug)",
            code="internal_error",
            deck_path=deck.path,
        )
    return resolve_effective(
        Path(deck.path).parent,
        parent=parent,
        declaration=deck.permissions,
        reference=action.permissions if action is not None else None,
        declares=declares,
    )
