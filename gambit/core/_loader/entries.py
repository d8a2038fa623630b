"""The four entry arrays, `[[actions]]`, `[[scenarios]]`, `[[graders]]` and `[[tools]]`: one
parser (`parse_entries`) applies a small spec per array (`EntryArray`), so each rule is
written once. A spec says:

- the array's deprecated alias (`actionDecks`, `testDecks`, `graderDecks`), read after it
  with a warning;
- the keys an entry may have (derived from the spec; others warn, in the array and its alias);
- whether entries are named (`name`, checked against reserved and built-in tool names) and
  whether they need a description (actions: the model reads it);
- the target keys, exactly one of which must be given, and what each must point at (a
  PROMPT.md, a PROMPT.md or Python module, a Python module; the rules are in `paths`);
- the optional fields, in the order they are read (text, schema, permissions);
- duplicates (same name, or for unnamed entries the same target): an error, or dropped
  quietly; and whether the entry's own fields are still checked before it is dropped.

Also here: a card's actions merge with the deck's own (`merge_actions`), and a tool that an
action of the same name shadows warns (`finish_tools`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeGuard

from .._builtin_tools import BUILTIN_TOOL_NAMES
from .._deck import ActionDecl, Deck, DeckRef, ToolDecl
from .load import Load
from .paths import resolve_deck_path, resolve_execute_path
from .schemas import resolve_schema
from .tables import parse_permissions
from .values import Suggestions, opt_str, type_name

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_LENGTH = 64

# What a target key must point at: (load, raw value, declaring file, key) -> absolute path.
Resolve = Callable[[Load, Any, str, str], "str | None"]
# One optional field: (load, entry, field key, declaring file, entry key) -> value.
Read = Callable[[Load, dict[str, Any], str, str, str], Any]


def _a_deck(load: Load, raw: Any, file: str, key: str) -> str | None:
    return resolve_deck_path(load, raw, file, key)


def _a_deck_or_module(load: Load, raw: Any, file: str, key: str) -> str | None:
    return resolve_deck_path(load, raw, file, key, allow_python=True)


def _a_module(load: Load, raw: Any, file: str, key: str) -> str | None:
    return resolve_execute_path(load, raw, file, key)


def _text(load: Load, entry: dict[str, Any], name: str, file: str, key: str) -> Any:
    return opt_str(load, entry, name, file, key + ".")


def _schema(load: Load, entry: dict[str, Any], name: str, file: str, key: str) -> Any:
    return resolve_schema(load, entry[name], file, f"{key}.{name}") if name in entry else None


def _permissions(load: Load, entry: dict[str, Any], name: str, file: str, key: str) -> Any:
    return parse_permissions(load, entry[name], file, f"{key}.{name}") if name in entry else None


class EntryArray:
    """What one entry array accepts; `parse_entries` applies it.

    (A plain class: a dataclass would add its set-up to every command's start-up.)
    """

    def __init__(
        self,
        *,
        key: str,
        legacy: str | None,
        noun: str,
        make: Callable[[dict[str, Any], str], Any],
        named: str | None = None,
        name_hint: str | None = None,
        description_hint: str | None = None,
        targets: tuple[tuple[str, Resolve], ...] = (),
        target_hint: str | None = None,
        fields: tuple[tuple[str, str, Read], ...] = (),
        duplicate: tuple[str, str] | None = None,
        fields_before_keeping: bool = False,
    ):
        self.key = key  # the array: "actions"
        self.legacy = legacy  # its deprecated alias, read after it: "actionDecks"
        self.noun = noun  # an entry, in messages: "Action deck must include a name"
        # The declaration, from the values read (by attribute name) and the declaring file.
        self.make = make
        # Named entries: what the name rules call them ("Action name x is reserved ...").
        self.named = named
        self.name_hint = name_hint
        # Set: an entry has a description, required (with this hint) in a deck's own array.
        self.description_hint = description_hint
        # Exactly one of these keys must be given, and point at what its resolver accepts.
        self.targets = targets
        self.target_hint = target_hint
        # Optional fields (key, attribute, reader), read in this order.
        self.fields = fields
        # (message, hint) for a second entry with the same name ("{name}" is replaced);
        # None: a second entry naming the same target is dropped without a word.
        self.duplicate = duplicate
        # True: an entry's fields are read, and their problems reported, before the entry
        # is kept or dropped (for its duplicate name or its failed target).
        self.fields_before_keeping = fields_before_keeping
        # The keys an entry may have; others warn.
        keys = {k for k, _ in targets} | {k for k, _, _ in fields}
        if named:
            keys.add("name")
        if description_hint:
            keys.add("description")
        self.known_keys = frozenset(keys)


ACTIONS = EntryArray(
    key="actions",
    legacy="actionDecks",
    noun="Action deck",
    make=lambda values, file: ActionDecl(**values, declared_in=file),
    named="Action",
    name_hint='add name = "lookup_order"',
    description_hint='add description = "..." telling the model when and why to call it',
    targets=(("path", _a_deck), ("execute", _a_module)),
    target_hint='path = "./actions/x/PROMPT.md" for a deck, or execute = "./actions/x.py" for Python code',
    fields=(
        ("contextSchema", "context_schema", _schema),
        ("responseSchema", "response_schema", _schema),
        ("permissions", "permissions", _permissions),
        ("label", "label", _text),
        ("id", "id", _text),
    ),
    duplicate=(
        "duplicate action name {name}",
        "action names must be unique in a deck; rename or remove one",
    ),
    fields_before_keeping=True,
)


def _deck_refs(key: str, legacy: str) -> EntryArray:
    """`[[scenarios]]` and `[[graders]]`: references to decks, by path."""
    return EntryArray(
        key=key,
        legacy=legacy,
        noun="Deck reference",
        make=lambda values, file: DeckRef(**values),
        targets=(("path", _a_deck_or_module),),
        target_hint='path = "./scenarios/x/PROMPT.md"',
        fields=(
            ("label", "label", _text),
            ("description", "description", _text),
            ("id", "id", _text),
            ("permissions", "permissions", _permissions),
        ),
    )


SCENARIOS = _deck_refs("scenarios", "testDecks")
GRADERS = _deck_refs("graders", "graderDecks")
TOOLS = EntryArray(
    key="tools",
    legacy=None,
    noun="External tool",
    make=lambda values, file: ToolDecl(**values),
    named="External tool",
    fields=(
        ("description", "description", _text),
        ("label", "label", _text),
        ("id", "id", _text),
        ("inputSchema", "input_schema", _schema),
    ),
    duplicate=("duplicate tool name", "tool names must be unique; rename or remove one"),
)


def parse_entries(
    load: Load, spec: EntryArray, attrs: dict[str, Any], file: str, *, in_card: bool = False
) -> list[Any]:
    """The declarations of `[[spec.key]]` in `attrs`, then of its deprecated alias.

    `in_card`: the front matter of an embedded snippet (a legacy card), where descriptions
    are not required."""
    declared = [
        (spec.key, index, entry)
        for index, entry in _tables(load, attrs.get(spec.key), file, spec.key, spec.known_keys)
    ]
    if spec.legacy is not None and spec.legacy in attrs:
        load.diag.deprecated(
            f'deprecated "{spec.legacy}"',
            file=file,
            key=spec.legacy,
            hint=f'use "[[{spec.key}]]" instead',
        )
        declared += [
            (spec.legacy, index, entry)
            for index, entry in _tables(
                load, attrs.get(spec.legacy), file, spec.legacy, spec.known_keys
            )
        ]
    return _declarations(load, spec, declared, file, descriptions_required=not in_card)


def parse_card_refs(
    load: Load, spec: EntryArray, attrs: dict[str, Any], file: str
) -> list[DeckRef]:
    """A legacy card's `[[testDecks]]` / `[[graderDecks]]`: its own keys, so no deprecation."""
    assert spec.legacy is not None
    declared = [
        (spec.legacy, index, entry)
        for index, entry in _tables(
            load, attrs.get(spec.legacy), file, spec.legacy, spec.known_keys
        )
    ]
    return _declarations(load, spec, declared, file, descriptions_required=False)


def _tables(
    load: Load, value: Any, file: str, key: str, known: frozenset[str] | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """The tables of the array `key` (problems for anything else); with `known`, a warning
    for each key outside it."""
    if value is None:
        return []
    if not isinstance(value, list):
        load.diag.error(
            f"must be an array of tables, not {type_name(value)}",
            file=file,
            key=key,
            hint=f"write each entry as [[{key}]]",
        )
        return []
    result = []
    for index, entry in enumerate(value):
        if isinstance(entry, dict):
            result.append((index, entry))
        else:
            load.diag.error(
                f"entry {index + 1} must be a table, not {type_name(entry)}",
                file=file,
                key=key,
            )
    if known is not None:
        suggestions = Suggestions(known)
        for index, entry in result:
            for name in entry:
                if name not in known:
                    close = suggestions.closest(name)
                    load.diag.warn(
                        "unknown key; it is ignored",
                        file=file,
                        key=f"{key}[{index + 1}].{name}",
                        hint=f"did you mean {close!r}?"
                        if close
                        else "known keys: " + ", ".join(sorted(known)),
                    )
    return result


def _given(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _declarations(
    load: Load,
    spec: EntryArray,
    declared: list[tuple[str, int, dict[str, Any]]],
    file: str,
    *,
    descriptions_required: bool,
) -> list[Any]:
    kept: dict[str | None, Any] = {}  # by name, or for unnamed entries by target
    for source, index, entry in declared:
        key = f"{source}[{index + 1}]"
        values: dict[str, Any] = {}
        if spec.named:
            name = entry.get("name")
            if not _given(name):
                load.diag.error(
                    f"{spec.noun} must include a name",
                    file=file,
                    key=f"{key}.name",
                    hint=spec.name_hint,
                )
                continue
            name = values["name"] = name.strip()
            key = f"{source}[{name}]"
            _check_name(load, name, file, key, spec.named)
        if spec.description_hint:
            description = entry.get("description")
            if not _given(description):
                # Required in a deck's own array; not in the deprecated alias nor in a card.
                if descriptions_required and source == spec.key:
                    load.diag.error(
                        f"{spec.noun} must include a description",
                        file=file,
                        key=f"{key}.description",
                        hint=spec.description_hint,
                    )
                description = ""
            values["description"] = description.strip()
        target = None
        if spec.targets:
            given = [(k, resolve) for k, resolve in spec.targets if _given(entry.get(k))]
            if len(given) != 1:
                keys = [k for k, _ in spec.targets]
                if len(keys) == 1:
                    message, where = f"{spec.noun} must include a {keys[0]}", f"{key}.{keys[0]}"
                else:
                    message = f"{spec.noun} must include exactly one of {' or '.join(keys)}"
                    where = key
                load.diag.error(message, file=file, key=where, hint=spec.target_hint)
                continue
            target_key, resolve = given[0]
            target = values[target_key] = resolve(
                load, entry[target_key], file, f"{key}.{target_key}"
            )
        ident = values.get("name", target)
        if not spec.fields_before_keeping and not _keep(load, spec, kept, ident, target, file, key):
            continue
        for field_key, attr, read in spec.fields:
            values[attr] = read(load, entry, field_key, file, key)
        if spec.fields_before_keeping and not _keep(load, spec, kept, ident, target, file, key):
            continue
        kept[ident] = spec.make(values, file)
    return list(kept.values())


def _keep(
    load: Load,
    spec: EntryArray,
    kept: dict[str | None, Any],
    ident: str | None,
    target: str | None,
    file: str,
    key: str,
) -> bool:
    """Whether an entry is kept: not when its target failed (already an error), nor when an
    earlier entry has its name (or target)."""
    if spec.targets and not target:
        return False
    if ident in kept:
        if spec.duplicate is not None:
            message, hint = spec.duplicate
            load.diag.error(message.format(name=ident), file=file, key=key, hint=hint)
        return False
    return True


def _check_name(load: Load, name: str, file: str, key: str, what: str) -> None:
    if name in BUILTIN_TOOL_NAMES:
        load.diag.error(
            f"{what} name {name} conflicts with a built-in tool name",
            file=file,
            key=key,
            hint=f"{name} is a built-in workspace tool (granted by [permissions]); rename it",
        )
    elif name.startswith("gambit_"):
        load.diag.error(
            f"{what} name {name} is reserved (prefix gambit_)",
            file=file,
            key=key,
            hint="names starting with gambit_ belong to Gambit's synthetic tools; rename it",
        )
    elif not NAME_RE.match(name) or len(name) > MAX_NAME_LENGTH:
        load.diag.error(
            f"{what} name {name} must match /^[A-Za-z_][A-Za-z0-9_]*$/ and be <= 64 characters",
            file=file,
            key=key,
            hint="use letters, digits and underscores, starting with a letter or underscore",
        )


def finish_tools(load: Load, deck: Deck) -> None:
    action_names = {a.name for a in deck.actions}
    for tool in deck.tools:
        if tool.name in action_names:
            tool.shadowed = True
            load.diag.warn(
                f"tool {tool.name} is shadowed by an action",
                file=deck.path,
                key=f"tools[{tool.name}]",
                hint="the action wins and the tool is never offered; rename one of them",
            )


def merge_actions(earlier: list[ActionDecl], later: list[ActionDecl]) -> list[ActionDecl]:
    """`earlier` then `later`; a later action replaces an earlier one of the same name in place."""
    merged = {a.name: a for a in earlier}
    for action in later:
        merged[action.name] = action
    return list(merged.values())
