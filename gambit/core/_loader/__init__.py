"""The deck loader (docs/decks.md: the deck format v1.0, as the TypeScript Gambit reads it).

`load_deck_tree` loads a root deck and every deck it reaches: actions (deck paths and
Python `execute` modules), scenarios, graders and handlers. Problems are collected, not
raised one at a time, so an author sees everything wrong at once; the load then raises one
`DeckLoadError` listing every error (warnings are kept on the result). `check_deck_tree`
returns the problems instead of raising.

The flow, and where each rule lives:

    tree.py        the walk: the root deck, then breadth first every action, scenario,
                   grader and handler it names, each deck loaded once and checked once per
                   role (a cycle ends there); the role rules (which schemas an action,
                   scenario or grader deck must declare, grader compatibility) and, at the
                   end, each action's IO schemas taken from its target
      deck_file.py   one file into a Deck: a PROMPT.md (front matter format, *.deck.md and
                     YAML/JSON deprecations, then keys and body) or a Python compute module
        keys.py        front-matter keys: canonical, passed through, deprecated, unknown
                       (a warning with the closest key); the top-level values
        tables.py      [modelParams], [guardrails], [permissions], [handlers.*],
                       [[responseItemExtensions]]
        entries.py     [[actions]], [[scenarios]], [[graders]], [[tools]]: one parser
                       driven by a small spec per array (`EntryArray`: keys, required keys,
                       what a path must point at, reserved names, duplicates)
        embeds.py      snippets in the body: built-in and local, legacy markers and cards,
                       a card's front matter, chains (depth limit) and cycles; each
                       snippet expanded once, the prompt's length bounded, a linear scan
      paths.py       what a path may name: a PROMPT.md (a folder is an error with a hint),
                     legacy *.deck.md, gambit://decks/..., a .py module; refused paths;
                     the project root every referenced file must lie in (`ProjectRoot`,
                     `Jail`, `referenced`)
      schemas.py     schema references: gambit://schemas/..., .json, .py, .zod.ts; depth
                     and size limits
      imports.py     importing Python files under IMPORT_TIME_LIMIT, one deck at a time,
                     under names unique to each file, without bytecode; DeckRunsCode when
                     importing is not allowed
      values.py      typed values in a table ("must be a string, not a number")
      load.py        the state one load shares: its Diagnostics and what it imported

Every function takes the `Load` first and reports into `load.diag`; none raises for a
problem in a deck (only `DeckRunsCode`, when the caller asked for no imports).
"""

from .imports import IMPORT_TIME_LIMIT, DeckRunsCode
from .paths import ProjectRoot, default_project_root, project_top
from .tree import (
    as_tree,
    check_deck_tree,
    decks_below_the_listing,
    find_workspace_decks,
    load_deck,
    load_deck_tree,
)

__all__ = [
    "as_tree",
    "IMPORT_TIME_LIMIT",
    "DeckRunsCode",
    "ProjectRoot",
    "default_project_root",
    "project_top",
    "check_deck_tree",
    "decks_below_the_listing",
    "find_workspace_decks",
    "load_deck",
    "load_deck_tree",
]
