"""The vocabulary every runtime module shares: names of the synthetic tools, the errors a run
raises, the end signal, the "no value" sentinel and the callback types of `run_deck`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import GambitError
from .._openresponses import FunctionCallItem
from .._state import SavedState

CONTEXT_TOOL = "gambit_context"
LEGACY_CONTEXT_TOOL = "gambit_init"
RESPOND_TOOL = "gambit_respond"
END_TOOL = "gambit_end"
COMPLETE_TOOL = "gambit_complete"
END_SIGNAL_KEY = "__gambitEnd"

Mode = Literal["responses", "chat"]
TraceCallback = Callable[[dict[str, Any]], None]
StateCallback = Callable[[SavedState], None]
ToolHandler = Callable[[dict[str, Any]], Any]

# "No value given", distinct from None (a deck's context may legitimately be null): the
# default of `run_deck(context=...)`, `run_scenario(scenario_input=...)` and the like, public
# as `gambit.core.MISSING` for callers that pass an argument on only when they have one.
MISSING: Any = object()
_MISSING = MISSING  # the name the runtime's modules use


class _Deferred:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOOL_CALL_DEFERRED"


TOOL_CALL_DEFERRED: Any = _Deferred()
"""What an `on_tool` handler returns for a call its host answers later, from outside the run
(a client of `/v1/responses`, docs/endpoint.md): the root deck's other calls of that pass are
dispatched, then the run stops and `RunResult.pending_tool_calls` lists every call still
waiting for its answer. The host resumes the saved state with their `function_call_output`
items. Only the root deck can wait so; below it the call gets an error result."""


@dataclass
class _Paused:
    """A root deck's execution stopped on tool calls its host answers (`TOOL_CALL_DEFERRED`)."""

    calls: list[FunctionCallItem]


class RunError(GambitError):
    """A run failed for a reason of the runtime (guardrails, validation, configuration).

    `code` is machine-readable: `max_depth`, `max_passes`, `timeout`, `invalid_input`,
    `invalid_output`, `no_model`, `deck_failed`, `invalid_deck`; `internal_error` is a bug of
    the engine (e.g. a child deck started without its parent's permissions).
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
    """A compute deck's own code raised; the original exception is the `__cause__`.

    Any exception: a `SystemExit`, `KeyboardInterrupt` or other `BaseException` raised by
    deck code fails the deck like any error (it does not end or interrupt the process); for
    the first two the message says how to end a deck instead."""

    def __init__(self, deck_path: str, exc: BaseException):
        detail = str(exc) or ("out of memory" if isinstance(exc, MemoryError) else "(no message)")
        hint = (
            " (a deck cannot exit or interrupt the process; fix: return the deck's output, "
            "or call ctx.fail(...) to fail it)"
            if isinstance(exc, SystemExit | KeyboardInterrupt)
            else ""
        )
        super().__init__(
            f"{deck_path} raised {type(exc).__name__}: {detail}{hint}",
            code="deck_failed",
            deck_path=deck_path,
        )


def is_end_signal(value: Any) -> bool:
    """True for the value `gambit_end` produces; callers stop the session on it."""
    return isinstance(value, dict) and value.get(END_SIGNAL_KEY) is True


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
