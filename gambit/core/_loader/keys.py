"""Front-matter keys of a PROMPT.md: the canonical keys (docs/decks.md), the ones passed through,
the deprecated ones, and unknown keys (a warning with the closest canonical key).

`parse_top_level` reads every key into the Deck: scalars here, tables in `tables`, the
entry arrays in `entries`, schemas in `schemas`.
"""

from __future__ import annotations

from typing import Any

from .._deck import Deck
from .._frontmatter import FrontMatterError, FrontMatterKeyError
from .entries import ACTIONS, GRADERS, SCENARIOS, TOOLS, parse_entries
from .load import Load
from .schemas import resolve_schema
from .tables import (
    parse_guardrails,
    parse_handlers,
    parse_item_extensions,
    parse_model_params,
    parse_permissions,
)
from .values import Suggestions, opt_bool, opt_str

CANONICAL_KEYS = {
    "label",
    "startMode",
    "contextSchema",
    "responseSchema",
    "respond",
    "allowEnd",
    "modelParams",
    "guardrails",
    "permissions",
    "handlers",
    "actions",
    "scenarios",
    "graders",
    "tools",
}
_CANONICAL_LIST = ", ".join(sorted(CANONICAL_KEYS))
# Accepted and kept (as the TypeScript Gambit keeps them) or tolerated without effect; not
# worth a warning.
PASSTHROUGH_KEYS = {"workloop", "responseItemExtensions", "acceptsUserTurns", "description", "id"}
LEGACY_KEYS = {"actionDecks", "testDecks", "graderDecks", "inputSchema", "outputSchema", "execute"}


def check_keys(load: Load, attrs: dict[str, Any], file: str) -> None:
    known = CANONICAL_KEYS | PASSTHROUGH_KEYS | LEGACY_KEYS | {"mcpServers"}
    suggestions = Suggestions(CANONICAL_KEYS)
    for key in attrs:
        if key in known:
            continue
        close = suggestions.closest(key)
        load.diag.warn(
            "unknown key; it is ignored",
            file=file,
            key=key,
            hint=f"did you mean {close!r}?"
            if close
            else f"the deck format's keys are {_CANONICAL_LIST}",
        )


# Top-level keys a PROMPT.md may not have: key -> (the error, the hint).
_UNSUPPORTED_TOP_LEVEL = {
    "execute": (
        "Top-level execute in PROMPT.md is unsupported",
        'declare compute code as an [[actions]] entry with execute = "./module.py", or make the deck a Python module with define_deck(run=...)',
    ),
    "mcpServers": (
        "Deck-level [[mcpServers]] is unsupported in this phase",
        "remove the [[mcpServers]] tables; declare external tools with [[tools]] and handle them with on_tool",
    ),
}


def parse_top_level(load: Load, deck: Deck, attrs: dict[str, Any], file: str) -> None:
    for key, (message, hint) in _UNSUPPORTED_TOP_LEVEL.items():
        if key in attrs:
            load.diag.error(message, file=file, key=key, hint=hint)
    deck.label = opt_str(load, attrs, "label", file)
    start_mode = attrs.get("startMode")
    if start_mode is not None:
        if start_mode in ("assistant", "user"):
            deck.start_mode = start_mode
        else:
            load.diag.error(
                f'must be "assistant" or "user", not {start_mode!r}',
                file=file,
                key="startMode",
                hint='startMode = "assistant" lets the deck speak first; "user" waits for the user',
            )
    for canonical, legacy in (
        ("contextSchema", "inputSchema"),
        ("responseSchema", "outputSchema"),
    ):
        ref = attrs.get(canonical)
        key = canonical
        if ref is None and legacy in attrs:
            ref = attrs[legacy]
            key = legacy
            load.diag.deprecated(
                f'deprecated "{legacy}"',
                file=file,
                key=legacy,
                hint=f'rename it to "{canonical}"',
            )
        if ref is not None:
            schema = resolve_schema(load, ref, file, key)
            if schema is None:
                load.failed_schemas.add((file, canonical))
            setattr(
                deck,
                "context_schema" if canonical == "contextSchema" else "response_schema",
                schema,
            )
    deck.respond = opt_bool(load, attrs, "respond", file) or False
    deck.allow_end = opt_bool(load, attrs, "allowEnd", file) or False
    if "modelParams" in attrs:
        deck.model_params = parse_model_params(load, attrs["modelParams"], file)
    if "guardrails" in attrs:
        deck.guardrails = parse_guardrails(load, attrs["guardrails"], file)
    if "permissions" in attrs:
        deck.permissions = parse_permissions(load, attrs["permissions"], file, "permissions")
    if "handlers" in attrs:
        deck.handlers = parse_handlers(load, attrs["handlers"], file)
    deck.actions = parse_entries(load, ACTIONS, attrs, file)
    deck.scenarios = parse_entries(load, SCENARIOS, attrs, file)
    deck.graders = parse_entries(load, GRADERS, attrs, file)
    deck.tools = parse_entries(load, TOOLS, attrs, file)
    for key in PASSTHROUGH_KEYS:
        if key in attrs:
            deck.passthrough[key] = attrs[key]
    if "responseItemExtensions" in attrs:
        deck.item_extensions = parse_item_extensions(load, attrs["responseItemExtensions"], file)


def report_front_matter_error(load: Load, exc: FrontMatterError, file: str) -> None:
    """One problem for front matter that cannot be read (a deck's or an embedded snippet's)."""
    load.diag.error(
        str(exc)
        if isinstance(exc, FrontMatterKeyError)
        else f"Failed to parse front matter: {exc}",
        file=file,
        key=exc.key,
        line=exc.line,
        hint=front_matter_hint(exc),
    )


def front_matter_hint(exc: FrontMatterError) -> str:
    if exc.hint:
        return exc.hint
    text = str(exc)
    if "never closed" in text:
        return "close the front matter with a line holding only +++"
    if "levels deep" in text:
        return "flatten the nesting, or move the data into a file the deck reads"
    if "YAML" in text:
        return (
            "fix the YAML between the --- lines (or write TOML between +++ lines, the 1.0 format)"
        )
    if "JSON" in text:
        return "fix the JSON front matter (or write TOML between +++ lines, the 1.0 format)"
    return "fix the front matter syntax (TOML between +++ lines)"
