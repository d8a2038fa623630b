"""gambit.core: the engine's contract, free of Django, HTTP clients and environment reads.

The curated public surface; implementation modules are private (`_loader`, `_schema`, ...).
Names load on first use (PEP 562): `from gambit.core import run_deck` imports the runtime and
what it needs, not the grading, scenario and Verify modules, so each command pays only for
what it runs (docs/decisions.md, "Start-up").
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names as _SOURCES below, for type checkers and readers
    from ._compute import DeckDefinition, define_deck
    from ._deck import (
        ActionDecl,
        Deck,
        DeckRef,
        DeckRole,
        DeckTree,
        DeckTreeEntry,
        Guardrails,
        HandlerDecl,
        ModelParams,
        Permissions,
        ToolDecl,
    )
    from ._errors import DeckError, DeckLoadError, Diagnostics, GambitError, Problem
    from ._grading import Grade, GradingRun, grade_state, grading_mode, session_payload
    from ._ids import is_valid_id, new_id
    from ._loader import (
        DeckRunsCode,
        check_deck_tree,
        find_workspace_decks,
        load_deck,
        load_deck_tree,
    )
    from ._messages import ChatMessage, items_to_messages, messages_to_items
    from ._openresponses import (
        CreateResponseRequest,
        CreateResponseResponse,
        FunctionCallItem,
        FunctionCallOutputItem,
        MessageItem,
        ResponseItem,
        ResponseToolDefinition,
        ResponseUsage,
        item_to_dict,
        items_from_json,
        message_item,
    )
    from ._provider import (
        ChatProvider,
        ChatResult,
        ModelNotAvailableError,
        ModelProvider,
        ModelResolver,
        ProviderError,
        ProviderResponse,
        ResolvedModel,
        ToolCallRequest,
    )
    from ._runtime import (
        ComputeContext,
        DeckCodeError,
        DeckFailure,
        RunError,
        RunResult,
        is_end_signal,
        run_deck,
        run_deck_sync,
    )
    from ._scenario import ScenarioError, ScenarioResult, run_scenario
    from ._schema import Schema, SchemaValidationError
    from ._state import (
        SavedState,
        StateError,
        load_state,
        new_state,
        save_state,
        state_from_dict,
        state_to_dict,
    )
    from ._trace import (
        ActionEndEvent,
        ActionStartEvent,
        DeckEndEvent,
        DeckStartEvent,
        LogEvent,
        MessageUserEvent,
        ModelCallEvent,
        ModelResultEvent,
        ModelStreamEvent,
        MonologEvent,
        ResponseTraceEvent,
        RunEndEvent,
        RunStartEvent,
        ToolCallEvent,
        ToolResultEvent,
        TraceError,
        TraceWriter,
        UnknownTraceEvent,
        json_dict,
        read_trace,
        trace_event_from_dict,
        trace_event_view,
    )

# module -> the public names it defines (tests/core/test_public_api.py checks that this and the
# imports above agree)
_SOURCES: dict[str, tuple[str, ...]] = {
    "_compute": ("DeckDefinition", "define_deck"),
    "_deck": (
        "ActionDecl",
        "Deck",
        "DeckRef",
        "DeckRole",
        "DeckTree",
        "DeckTreeEntry",
        "Guardrails",
        "HandlerDecl",
        "ModelParams",
        "Permissions",
        "ToolDecl",
    ),
    "_errors": ("DeckError", "DeckLoadError", "Diagnostics", "GambitError", "Problem"),
    "_grading": ("Grade", "GradingRun", "grade_state", "grading_mode", "session_payload"),
    "_ids": ("is_valid_id", "new_id"),
    "_loader": (
        "DeckRunsCode",
        "check_deck_tree",
        "find_workspace_decks",
        "load_deck",
        "load_deck_tree",
    ),
    "_messages": ("ChatMessage", "items_to_messages", "messages_to_items"),
    "_openresponses": (
        "CreateResponseRequest",
        "CreateResponseResponse",
        "FunctionCallItem",
        "FunctionCallOutputItem",
        "MessageItem",
        "ResponseItem",
        "ResponseToolDefinition",
        "ResponseUsage",
        "item_to_dict",
        "items_from_json",
        "message_item",
    ),
    "_provider": (
        "ChatProvider",
        "ChatResult",
        "ModelNotAvailableError",
        "ModelProvider",
        "ModelResolver",
        "ProviderError",
        "ProviderResponse",
        "ResolvedModel",
        "ToolCallRequest",
    ),
    "_runtime": (
        "ComputeContext",
        "DeckCodeError",
        "DeckFailure",
        "RunError",
        "RunResult",
        "is_end_signal",
        "run_deck",
        "run_deck_sync",
    ),
    "_scenario": ("ScenarioError", "ScenarioResult", "run_scenario"),
    "_schema": ("Schema", "SchemaValidationError"),
    "_state": (
        "SavedState",
        "StateError",
        "load_state",
        "new_state",
        "save_state",
        "state_from_dict",
        "state_to_dict",
    ),
    "_trace": (
        "ActionEndEvent",
        "ActionStartEvent",
        "DeckEndEvent",
        "DeckStartEvent",
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
        "ToolResultEvent",
        "TraceError",
        "TraceWriter",
        "UnknownTraceEvent",
        "json_dict",
        "read_trace",
        "trace_event_from_dict",
        "trace_event_view",
    ),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'gambit.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "ActionDecl",
    "ChatMessage",
    "ChatProvider",
    "ChatResult",
    "ComputeContext",
    "CreateResponseRequest",
    "CreateResponseResponse",
    "Deck",
    "DeckDefinition",
    "DeckError",
    "DeckCodeError",
    "DeckFailure",
    "DeckLoadError",
    "DeckRef",
    "DeckRole",
    "DeckTree",
    "DeckTreeEntry",
    "Diagnostics",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "GambitError",
    "Grade",
    "GradingRun",
    "Guardrails",
    "HandlerDecl",
    "MessageItem",
    "ModelNotAvailableError",
    "ModelParams",
    "ModelProvider",
    "ModelResolver",
    "Permissions",
    "Problem",
    "ProviderError",
    "ProviderResponse",
    "ResolvedModel",
    "ResponseItem",
    "ResponseToolDefinition",
    "ResponseUsage",
    "RunError",
    "RunResult",
    "SavedState",
    "ScenarioError",
    "ScenarioResult",
    "Schema",
    "SchemaValidationError",
    "StateError",
    "ToolCallRequest",
    "ToolDecl",
    "TraceError",
    "TraceWriter",
    "DeckRunsCode",
    "check_deck_tree",
    "define_deck",
    "find_workspace_decks",
    "grade_state",
    "grading_mode",
    "is_end_signal",
    "is_valid_id",
    "item_to_dict",
    "items_from_json",
    "items_to_messages",
    "load_deck",
    "load_deck_tree",
    "load_state",
    "message_item",
    "messages_to_items",
    "new_id",
    "new_state",
    "read_trace",
    "trace_event_from_dict",
    "trace_event_view",
    "json_dict",
    # trace events: one model per type (read stored ones with trace_event_view)
    "ActionEndEvent",
    "ActionStartEvent",
    "DeckEndEvent",
    "DeckStartEvent",
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
    "ToolResultEvent",
    "UnknownTraceEvent",
    "run_deck",
    "run_deck_sync",
    "run_scenario",
    "save_state",
    "session_payload",
    "state_from_dict",
    "state_to_dict",
]
