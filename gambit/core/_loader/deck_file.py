"""One deck file into a `Deck`: a Markdown PROMPT.md, or a Python compute module.

A PROMPT.md is read, its front matter parsed (TOML; YAML and JSON deprecated) and checked
key by key (`keys`), then its body has its embeds expanded (`embeds`). A `.py` deck is
imported (`imports`) and must export `deck = gambit.define_deck(run=...)`.
"""

from __future__ import annotations

from pathlib import Path

from .._compute import DeckDefinition, definition_problems
from .._deck import Deck
from .._frontmatter import FrontMatterError, parse_front_matter
from .embeds import expand_body
from .entries import finish_tools, merge_actions
from .imports import import_module
from .keys import check_keys, parse_top_level, report_front_matter_error
from .load import Load
from .paths import read_text, report_unreadable
from .schemas import schema_from_spec


def read_deck(load: Load, file: str) -> Deck | None:
    """The deck in `file`, or None after reporting why it cannot be loaded."""
    if not file.endswith((".md", ".py")):
        load.diag.error(
            "not a deck file",
            file=file,
            hint="a deck is a PROMPT.md (or a Python compute module ending in .py)",
        )
        return None
    try:
        if file.endswith(".md"):
            return _load_markdown_deck(load, file)
        return _load_compute_deck(load, file)
    except OSError as exc:
        report_unreadable(load, exc, file)
    except RecursionError:
        load.diag.error(
            "this deck nests too deeply to load (front matter, schemas or snippets)",
            file=file,
            hint="flatten the nesting",
        )
    return None


def _load_markdown_deck(load: Load, file: str) -> Deck | None:
    text = read_text(load, file)
    if text is None:
        return None
    try:
        parsed = parse_front_matter(text)
    except FrontMatterError as exc:
        report_front_matter_error(load, exc, file)
        return None
    name = Path(file).name
    if name.endswith(".deck.md"):
        load.diag.deprecated(
            "*.deck.md decks are deprecated",
            file=file,
            hint=f"move it to {Path(file).with_suffix('').with_suffix('')}/PROMPT.md",
        )
    if parsed.format in ("yaml", "json"):
        load.diag.deprecated(
            f"{parsed.format.upper()} front matter is deprecated",
            file=file,
            hint="use TOML front matter between +++ lines",
        )
    attrs = parsed.attrs
    if isinstance(attrs.get("deck"), dict):
        attrs = attrs["deck"]
    deck = Deck(path=file, kind="markdown")
    check_keys(load, attrs, file)
    parse_top_level(load, deck, attrs, file)
    # Merge order (docs/decks.md, "Snippets"): card actions in flattened embed order, then
    # the deck's own; a later entry with the same name replaces the earlier one in place.
    own_actions, deck.actions = deck.actions, []
    deck.body, embeds = expand_body(load, parsed.body, file, [file], deck)
    deck.embeds = embeds
    deck.actions = merge_actions(deck.actions, own_actions)
    finish_tools(load, deck)
    return deck


def _load_compute_deck(load: Load, file: str) -> Deck | None:
    definition = _definition(load, file)
    if definition is None:
        return None
    deck = Deck(path=file, kind="compute", label=definition.label, definition=definition)
    deck.context_schema = schema_from_spec(load, definition.context_schema, file, "context_schema")
    deck.response_schema = schema_from_spec(
        load, definition.response_schema, file, "response_schema"
    )
    return deck


def _definition(load: Load, file: str) -> DeckDefinition | None:
    module = import_module(load, file)
    if module is None:
        return None
    definition = getattr(module, "deck", None)
    if isinstance(definition, DeckDefinition):
        problems = definition_problems(definition)
        for name, problem in problems:
            load.diag.error(
                problem,
                file=file,
                key=f"deck.{name}",
                hint="build the deck with gambit.define_deck(run=..., label=...), which "
                "checks its arguments",
            )
        return None if problems else definition
    if definition is None and callable(getattr(module, "run", None)):
        hint = (
            "wrap it: deck = gambit.define_deck(run=run, context_schema=..., response_schema=...)"
        )
        load.diag.error(
            "defines run() at module level but exports no deck",
            file=file,
            key="deck",
            hint=hint,
        )
    else:
        load.diag.error(
            "did not export a valid deck definition",
            file=file,
            key="deck",
            hint="add a module-level deck = gambit.define_deck(run=...)",
        )
    return None
