"""The run loop: `run_deck` executes a deck against a model provider (docs/decks.md, "How a
deck runs").

The synthetic tools: `gambit_context` is injected at the start of a fresh run that has
context input; `gambit_respond` (offered when the deck has `respond`) finishes the deck with
an envelope; `gambit_end` (offered when `allowEnd`) ends the whole session with an end
signal; after every action result a `gambit_complete` call/output pair carrying the envelope
is appended.

The conversation is kept as Open Responses items (canonical); chat messages are derived for
chat mode and for the saved state. Every step is traced (docs/decks.md, "Traces") through
the caller's `on_trace`, and the root conversation is handed to `on_state` after every pass.
Cancelling the task that awaits `run_deck` cancels the run at its next await point; the
run then ends as canceled (`run.end` with `status: "canceled"`) and `CancelledError`
propagates to the caller.

How a run flows through the modules of this package:

    _run_deck.run_deck            set up the run, validate the root input, trace run.start/end
      _execute.execute_deck       one deck, root or child: guardrails, schemas, permissions
        _compute_deck             a compute deck: ComputeContext, run(ctx), output validation
        _llm._LlmExecution        an LLM deck: the model pass loop
          _request                  the tools offered, the output format, the model
          _context                  counting the input, compacting it near the window
          _stream._StreamTracer     provider stream events -> traces and streamed text
          _tool_calls               the model's tool calls: respond, end, actions, tools
          _handlers                 onIdle, onBusy, onError
      (children go back through execute_deck)

Shared by all: `_common` (errors, tool names, sentinel), `_limits` (guardrails and the
deadline), `_validation` (input/output validation, result envelopes) and `_run` (`_Run`, the
run-wide settings and trace emission; `_RootState`, the published conversation).
"""

from ._common import (
    _MISSING,
    MISSING,
    TOOL_CALL_DEFERRED,
    DeckCodeError,
    DeckFailure,
    RunError,
    is_end_signal,
)
from ._compute_deck import ComputeContext
from ._context import CompactionSettings
from ._limits import Clock
from ._run import RunResult
from ._run_deck import run_deck, run_deck_sync

__all__ = [
    "Clock",
    "CompactionSettings",
    "ComputeContext",
    "DeckCodeError",
    "DeckFailure",
    "MISSING",
    "RunError",
    "RunResult",
    "TOOL_CALL_DEFERRED",
    "_MISSING",
    "is_end_signal",
    "run_deck",
    "run_deck_sync",
]
