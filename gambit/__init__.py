"""Gambit for Python: LLM agents written as decks.

Write a compute deck with `define_deck`; load decks with `load_deck` / `load_deck_tree`.
"""

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
