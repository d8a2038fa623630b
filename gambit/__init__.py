"""Gambit for Python: LLM agents written as decks.

Write a compute deck with `define_deck`; load decks with `load_deck` / `load_deck_tree`.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, imported from gambit.core on first use (PEP 562)
    from gambit.core import (
        Deck,
        DeckDefinition,
        DeckError,
        DeckLoadError,
        GambitError,
        ProviderError,
        RunError,
        RunResult,
        Schema,
        SchemaValidationError,
        define_deck,
        grade_state,
        is_end_signal,
        load_deck,
        load_deck_tree,
        run_deck,
        run_deck_sync,
        run_scenario,
    )

__version__ = "0.1.0"

__all__ = [
    "Deck",
    "DeckDefinition",
    "DeckError",
    "DeckLoadError",
    "GambitError",
    "ProviderError",
    "RunError",
    "RunResult",
    "Schema",
    "SchemaValidationError",
    "__version__",
    "define_deck",
    "grade_state",
    "is_end_signal",
    "load_deck",
    "load_deck_tree",
    "run_deck",
    "run_deck_sync",
    "run_scenario",
]


def __getattr__(name: str) -> Any:
    # Lazy, so that `gambit --help` and other light commands do not pay for the engine.
    if name in __all__ and name != "__version__":
        import gambit.core

        value = getattr(gambit.core, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gambit' has no attribute {name!r}")
