"""Snippets embedded in a deck's body: `![](./snippet.md)` and `![](gambit://snippets/x.md)`.

An embed is replaced by the snippet's body; its front matter (a legacy card's) contributes
actions, schema fragments, `respond`/`allowEnd` and scenario/grader refs to the deck. Chains
are followed up to MAX_EMBED_DEPTH, a cycle is an error naming the chain, and the legacy
`gambit://init|respond|end` markers and `gambit://cards/*` URIs still resolve, with a
deprecation warning (docs/decks.md, "Loading decks written for the TypeScript Gambit").

Each snippet is expanded once per deck, and the prompt with its embeds is at most
MAX_PROMPT_CHARS (docs/decks.md, "Bounds"); embeds are found by a linear scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._deck import Deck
from .._frontmatter import FrontMatterError, parse_front_matter
from .entries import ACTIONS, GRADERS, SCENARIOS, merge_actions, parse_card_refs, parse_entries
from .keys import report_front_matter_error
from .load import Load
from .paths import bundled_files, read_text, referenced
from .schemas import resolve_schema

MAX_EMBED_DEPTH = 32  # snippets embedded inside snippets
# The longest a deck's prompt may be once its snippets are embedded (docs/decks.md, "Bounds"):
# about 250,000 tokens, more than most models' whole context window; a file embedding the
# next twice, twenty times over, would otherwise make a prompt of a million copies.
MAX_PROMPT_CHARS = 1_000_000
# What ends an embed's alt text, and its target (the syntax `![alt](target)`, one line).
_ALT_END = re.compile(r"[\]\n]")
_TARGET_END = re.compile(r"[)\s]")
LEGACY_MARKERS = {
    "gambit://init": (
        "A `gambit_context` tool result with this run's seeded input is delivered automatically "
        "at the start of the conversation; read it and do not call `gambit_context` yourself.",
        "gambit://snippets/context.md",
    ),
    "gambit://respond": (
        "Finish by calling the `gambit_respond` tool with your result in `payload` (and optional "
        "`status`, `message`, `code`, `meta`); do not end with plain text.",
        "gambit://snippets/respond.md",
    ),
    "gambit://end": (
        "Call the `gambit_end` tool (optional `message`, `payload`) only to end the whole session.",
        "gambit://snippets/end.md",
    ),
}
SNIPPET_PACKAGE = "gambit.core.snippets"
DEPRECATED_SNIPPETS = {"generate-test-input.md": "gambit://snippets/init.md"}


def find_embeds(body: str) -> Iterator[tuple[int, int, str]]:
    r"""Each `![alt](target)` in `body` as (start, end, target), left to right, not
    overlapping: what `re.finditer(r"!\[([^\]\n]*)\]\(([^)\s]+)\)", body)` finds, in linear
    time.

    That regex retries at every `![` and scans to the line's end each time, so 40,000 `![`
    on one line took 13-20 s. Here the first `]`-or-newline and the first `)`-or-space after
    a point are remembered with the stretch they were searched over, so a later `![` in the
    same stretch reuses them and no character is searched twice.
    """
    size = len(body)
    # body[alt_from:alt_stop] holds no `]` or newline; body[alt_stop] is one (or the end).
    alt_from = alt_stop = -1
    target_from = target_stop = -1  # likewise for `)` or whitespace
    pos = 0
    while (start := body.find("![", pos)) >= 0:
        pos = start + 1
        alt = start + 2
        if not alt_from <= alt <= alt_stop:
            found = _ALT_END.search(body, alt)
            alt_from, alt_stop = alt, found.start() if found else size
        close = alt_stop
        if close >= size or body[close] != "]" or not body.startswith("(", close + 1):
            continue
        first = close + 2
        if not target_from <= first <= target_stop:
            found = _TARGET_END.search(body, first)
            target_from, target_stop = first, found.start() if found else size
        end = target_stop
        if end == first or end >= size or body[end] != ")":
            continue
        yield start, end + 1, body[first:end]
        pos = end + 1


class _Embeds:
    """What one deck's body embeds, as it is expanded.

    Each snippet is expanded once per deck: its text is kept, so a snippet embedded again
    (a file embedding the next twice, twenty levels deep) costs a lookup, not a second
    expansion; its card applies to the deck once. The prompt's length so far is checked
    against MAX_PROMPT_CHARS as pieces are added, so it never grows past the limit.
    """

    __slots__ = ("files", "expanded", "reached", "too_long")

    def __init__(self) -> None:
        self.files: list[str] = []  # the embedded snippets, in flattened order, each once
        # snippet -> (its expanded text, the levels of embeds below it: -1 for none)
        self.expanded: dict[str, tuple[str, int]] = {}
        # Set by the last embed: the levels of embeds below the snippet it embedded (-1
        # when it embedded none, or was not a snippet), so the depth limit holds for a
        # snippet reused deeper than where it was first expanded.
        self.reached = -1
        self.too_long = False  # the prompt passed MAX_PROMPT_CHARS (reported once)


def expand_body(
    load: Load, body: str, file: str, stack: list[str], deck: Deck
) -> tuple[str, list[str]]:
    """`body` with every embed replaced, and the embedded files in flattened order."""
    embeds = _Embeds()
    text, _ = _expand(load, body, file, stack, deck, embeds)
    return text, embeds.files


def _expand(
    load: Load, body: str, file: str, stack: list[str], deck: Deck, embeds: _Embeds
) -> tuple[str, int]:
    """`body` (of `file`) with its embeds replaced, and the levels of embeds below it."""
    pieces: list[str] = []
    length = 0
    below = -1
    done: dict[str, tuple[str, int]] = {}  # target -> (text, levels): the same embed again
    last = 0
    for start, end, target in find_embeds(body):
        if not (target.startswith("gambit://") or target.split("#", 1)[0].endswith(".md")):
            continue  # an ordinary image: keep it
        if embeds.too_long:
            return "", below
        if target not in done:
            embeds.reached = -1
            text = _embed(load, target, file, stack, deck, embeds)
            done[target] = (text, 1 + embeds.reached)
        text, levels = done[target]
        below = max(below, levels)
        pieces.append(body[last:start])
        pieces.append(text)
        length += start - last + len(text)
        last = end
        if length > MAX_PROMPT_CHARS:
            _too_long(load, embeds, file, f"![]({target})")
            return "", below
    pieces.append(body[last:])
    if length + len(body) - last > MAX_PROMPT_CHARS:
        _too_long(load, embeds, file, None)
        return "", below
    return "".join(pieces).strip(), below


def _too_long(load: Load, embeds: _Embeds, file: str, key: str | None) -> None:
    if not embeds.too_long:
        embeds.too_long = True
        load.diag.error(
            f"the deck's prompt is longer than {MAX_PROMPT_CHARS:,} characters (the limit) "
            "once its snippets are embedded",
            file=file,
            key=key,
            hint="embed fewer or shorter snippets; a snippet embedded in several places is "
            "copied into each",
        )


def _embed(
    load: Load, target: str, file: str, stack: list[str], deck: Deck, embeds: _Embeds
) -> str:
    if len(stack) > MAX_EMBED_DEPTH:
        load.diag.error(
            f"snippets are embedded more than {MAX_EMBED_DEPTH} levels deep (at ![]({target}))",
            file=file,
            hint="embed the snippets side by side instead of each inside the next",
        )
        return ""
    if target in LEGACY_MARKERS:
        text, replacement = LEGACY_MARKERS[target]
        load.diag.deprecated(
            f'"{target}" is deprecated',
            file=file,
            key=f"![]({target})",
            hint=f"use ![]({replacement}) instead",
        )
        if target == "gambit://respond":
            deck.respond = True
        elif target == "gambit://end":
            deck.allow_end = True
        return text
    if target.startswith("gambit://cards/"):
        name = target[len("gambit://cards/") :].removesuffix(".card.md").removesuffix(".md")
        replacement = f"gambit://snippets/{name}.md"
        if not _snippet_exists(f"{name}.md"):
            load.diag.error(
                f'unknown legacy card "{target}"',
                file=file,
                hint=f"use one of the built-in snippets: {', '.join(_snippet_uris())}",
            )
            return ""
        load.diag.deprecated(
            f'"{target}" is deprecated', file=file, hint=f"use ![]({replacement}) instead"
        )
        target = replacement
    if target.startswith("gambit://snippets/"):
        rel = target[len("gambit://snippets/") :]
        if not rel or not _snippet_exists(rel):
            load.diag.error(
                f'unknown built-in snippet "{target}"',
                file=file,
                hint=f"the built-in snippets are {', '.join(_snippet_uris())}",
            )
            return ""
        if rel in DEPRECATED_SNIPPETS:
            load.diag.deprecated(
                f'"{target}" is deprecated',
                file=file,
                hint=f"use ![]({DEPRECATED_SNIPPETS[rel]}) instead",
            )
        ident = target
        text = bundled_files(SNIPPET_PACKAGE).joinpath(rel).read_text(encoding="utf-8")
        return _embed_text(load, ident, text, stack, deck, embeds, base_file=file)
    if target.startswith("gambit://"):
        load.diag.error(
            f'unknown gambit:// embed "{target}"',
            file=file,
            hint=f"the built-in snippets are {', '.join(_snippet_uris())}",
        )
        return ""
    resolved = referenced(load, target.split("#", 1)[0], file, f"![]({target})")
    if resolved is None:
        return ""
    path = str(resolved)
    if path in stack:
        chain = " -> ".join([*stack[stack.index(path) :], path])
        load.diag.error(
            f"Card/embed cycle detected: {chain}",
            file=file,
            hint="remove one of the embeds in the chain",
        )
        return ""
    body = read_text(load, path) if Path(path).is_file() else None
    if body is None:
        if not Path(path).is_file():
            load.diag.error(
                f'embedded snippet "{target}" does not exist ({path})',
                file=file,
                hint="check the path; it is relative to this file",
            )
        return ""
    return _embed_text(load, path, body, stack, deck, embeds, base_file=path)


def _embed_text(
    load: Load,
    ident: str,
    text: str,
    stack: list[str],
    deck: Deck,
    embeds: _Embeds,
    *,
    base_file: str,
) -> str:
    if ident in stack:
        chain = " -> ".join([*stack[stack.index(ident) :], ident])
        load.diag.error(
            f"Card/embed cycle detected: {chain}",
            file=stack[-1],
            hint="remove one of the embeds in the chain",
        )
        return ""
    if ident in embeds.expanded:
        body, below = embeds.expanded[ident]
        embeds.reached = below
        if len(stack) + 1 + below > MAX_EMBED_DEPTH:
            load.diag.error(
                f"snippets are embedded more than {MAX_EMBED_DEPTH} levels deep (through {ident})",
                file=stack[-1],
                hint="embed the snippets side by side instead of each inside the next",
            )
            return ""
        return body
    try:
        parsed = parse_front_matter(text)
    except FrontMatterError as exc:
        report_front_matter_error(load, exc, ident)
        return ""
    embeds.files.append(ident)
    _apply_card(load, parsed.attrs, ident, deck)
    body, below = _expand(load, parsed.body, base_file, [*stack, ident], deck, embeds)
    embeds.expanded[ident] = (body, below)
    embeds.reached = below
    return body


def _apply_card(load: Load, attrs: dict[str, Any], file: str, deck: Deck) -> None:
    """Front matter of an embedded snippet (a legacy card) contributes to the deck."""
    if "mcpServers" in attrs:
        load.diag.error(
            "[[mcpServers]] in a snippet's front matter is unsupported in this phase",
            file=file,
            key="mcpServers",
            hint="remove the [[mcpServers]] tables; declare external tools with [[tools]] in the deck",
        )
    if attrs.get("handlers"):
        load.diag.error(
            "Card at this path cannot declare handlers (deck-only)",
            file=file,
            key="handlers",
            hint="move [handlers] into the deck's PROMPT.md",
        )
    if attrs.get("respond") is True:
        deck.respond = True
    if attrs.get("allowEnd") is True:
        deck.allow_end = True
    card_actions = parse_entries(load, ACTIONS, attrs, file, in_card=True)
    if card_actions:
        deck.actions = merge_actions(deck.actions, card_actions)
    for canonical, legacy, attr in (
        ("contextFragment", "inputSchema", "context_schema"),
        ("responseFragment", "outputSchema", "response_schema"),
    ):
        ref = attrs.get(canonical)
        key = canonical
        if ref is None and legacy in attrs:
            ref, key = attrs[legacy], legacy
            load.diag.deprecated(
                f'deprecated "{legacy}" on a card',
                file=file,
                key=legacy,
                hint=f'rename it to "{canonical}"',
            )
        if ref is None:
            continue
        fragment = resolve_schema(load, ref, file, key)
        if fragment is None:
            continue
        current = getattr(deck, attr)
        if current is None:
            setattr(deck, attr, fragment)
            continue
        try:
            setattr(deck, attr, current.merge_fragment(fragment))
        except ValueError as exc:
            load.diag.error(str(exc), file=file, key=key)
    for spec, target_list in ((SCENARIOS, deck.scenarios), (GRADERS, deck.graders)):
        if spec.legacy in attrs:
            existing = {r.path for r in target_list}
            for ref in parse_card_refs(load, spec, attrs, file):
                if ref.path not in existing:
                    target_list.append(ref)


def _snippet_exists(rel: str) -> bool:
    if "/" in rel or "\\" in rel or rel.startswith("."):
        return False
    try:
        return bundled_files(SNIPPET_PACKAGE).joinpath(rel).is_file()
    except (OSError, ValueError):
        return False


def _snippet_uris() -> list[str]:
    return sorted(
        f"gambit://snippets/{p.name}"
        for p in bundled_files(SNIPPET_PACKAGE).iterdir()
        if p.name.endswith(".md") and p.name not in DEPRECATED_SNIPPETS
    )
