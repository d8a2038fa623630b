"""Gambit for Python: LLM agents written as decks.

Write a compute deck with `define_deck`; load decks with `load_deck` / `load_deck_tree`.
"""

from gambit.core import (
    Deck,
    DeckDefinition,
    DeckError,
    DeckLoadError,
    GambitError,
    Schema,
    SchemaValidationError,
    define_deck,
    load_deck,
    load_deck_tree,
)

__version__ = "0.1.0"

__all__ = [
    "Deck",
    "DeckDefinition",
    "DeckError",
    "DeckLoadError",
    "GambitError",
    "Schema",
    "SchemaValidationError",
    "__version__",
    "define_deck",
    "load_deck",
    "load_deck_tree",
]
