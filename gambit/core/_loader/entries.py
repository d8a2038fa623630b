"""The four entry arrays: `[[actions]]`, `[[scenarios]]`, `[[graders]]` and `[[tools]]`."""

from __future__ import annotations

import re
from typing import Any

from .._builtin_tools import BUILTIN_TOOL_NAMES
from .._deck import ActionDecl, Deck, DeckRef, ToolDecl
from .load import Load
from .paths import resolve_deck_path, resolve_execute_path
from .schemas import resolve_schema
from .tables import parse_permissions
from .values import opt_str, type_name

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_LENGTH = 64
# The keys each entry of the four entry arrays may have (seed 002); others warn.
_REF_KEYS = frozenset({"path", "label", "description", "id", "permissions"})
ENTRY_KEYS: dict[str, frozenset[str]] = {
    "actions": frozenset(
        {"name", "description", "path", "execute", "contextSchema", "responseSchema"}
    )
    | _REF_KEYS,
    "tools": frozenset({"name", "description", "inputSchema", "label", "id"}),
    "scenarios": _REF_KEYS,
    "graders": _REF_KEYS,
}
LEGACY_ARRAY_HINTS = {
    "actionDecks": "[[actions]]",
    "testDecks": "[[scenarios]]",
    "graderDecks": "[[graders]]",
}


def _entries(load: Load, value: Any, file: str, key: str) -> list[tuple[int, dict[str, Any]]]:
    entries = _table_entries(load, value, file, key)
    known = ENTRY_KEYS.get(key)
    if known is not None:
        for index, entry in entries:
            for name in entry:
                if name not in known:
                    load.diag.warn(
                        "unknown key; it is ignored",
                        file=file,
                        key=f"{key}[{index + 1}].{name}",
                        hint="known keys: " + ", ".join(sorted(known)),
                    )
    return entries


def _table_entries(load: Load, value: Any, file: str, key: str) -> list[tuple[int, dict[str, Any]]]:
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
    return result


def parse_actions(
    load: Load, attrs: dict[str, Any], file: str, *, require_description: bool
) -> list[ActionDecl]:
    declared: list[tuple[str, int, dict[str, Any]]] = [
        ("actions", i, e) for i, e in _entries(load, attrs.get("actions"), file, "actions")
    ]
    if "actionDecks" in attrs:
        load.diag.deprecated(
            'deprecated "actionDecks"',
            file=file,
            key="actionDecks",
            hint='use "[[actions]]" instead',
        )
        declared += [
            ("actionDecks", i, e)
            for i, e in _entries(load, attrs.get("actionDecks"), file, "actionDecks")
        ]
    actions: dict[str, ActionDecl] = {}
    for source, index, entry in declared:
        key = f"{source}[{index + 1}]"
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            load.diag.error(
                "Action deck must include a name",
                file=file,
                key=f"{key}.name",
                hint='add name = "lookup_order"',
            )
            continue
        name = name.strip()
        key = f"{source}[{name}]"
        check_name(load, name, file, key, "Action")
        description = entry.get("description")
        if not isinstance(description, str) or not description.strip():
            if require_description and source == "actions":
                load.diag.error(
                    "Action deck must include a description",
                    file=file,
                    key=f"{key}.description",
                    hint='add description = "..." telling the model when and why to call it',
                )
            description = ""
        has_path = isinstance(entry.get("path"), str) and entry["path"].strip()
        has_execute = isinstance(entry.get("execute"), str) and entry["execute"].strip()
        if bool(has_path) == bool(has_execute):
            load.diag.error(
                "Action deck must include exactly one of path or execute",
                file=file,
                key=key,
                hint='path = "./actions/x/PROMPT.md" for a deck, or execute = "./actions/x.py" for Python code',
            )
            continue
        action = ActionDecl(name=name, description=description.strip(), declared_in=file)
        if has_path:
            action.path = resolve_deck_path(load, entry["path"], file, f"{key}.path")
        else:
            action.execute = resolve_execute_path(load, entry["execute"], file, f"{key}.execute")
        for schema_key, attr in (
            ("contextSchema", "context_schema"),
            ("responseSchema", "response_schema"),
        ):
            if schema_key in entry:
                setattr(
                    action,
                    attr,
                    resolve_schema(load, entry[schema_key], file, f"{key}.{schema_key}"),
                )
        if "permissions" in entry:
            action.permissions = parse_permissions(
                load, entry["permissions"], file, f"{key}.permissions"
            )
        action.label = opt_str(load, entry, "label", file, key + ".")
        action.id = opt_str(load, entry, "id", file, key + ".")
        if action.target:
            if name in actions and actions[name].declared_in == file:
                load.diag.error(
                    f"duplicate action name {name}",
                    file=file,
                    key=key,
                    hint="action names must be unique in a deck; rename or remove one",
                )
                continue
            # An action of an embedded card is replaced, in place, by the deck's own.
            actions[name] = action
    return list(actions.values())


def check_name(load: Load, name: str, file: str, key: str, what: str) -> None:
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


def parse_refs(
    load: Load, attrs: dict[str, Any], canonical: str, legacy: str, file: str
) -> list[DeckRef]:
    declared = [(canonical, i, e) for i, e in _entries(load, attrs.get(canonical), file, canonical)]
    if legacy in attrs:
        load.diag.deprecated(
            f'deprecated "{legacy}"',
            file=file,
            key=legacy,
            hint=f'use "{LEGACY_ARRAY_HINTS[legacy]}" instead',
        )
        declared += [(legacy, i, e) for i, e in _entries(load, attrs.get(legacy), file, legacy)]
    refs: dict[str, DeckRef] = {}
    for source, index, entry in declared:
        key = f"{source}[{index + 1}]"
        raw = entry.get("path")
        if not isinstance(raw, str) or not raw.strip():
            load.diag.error(
                "Deck reference must include a path",
                file=file,
                key=f"{key}.path",
                hint='path = "./scenarios/x/PROMPT.md"',
            )
            continue
        path = resolve_deck_path(load, raw, file, f"{key}.path", allow_python=True)
        if not path or path in refs:
            continue
        refs[path] = DeckRef(
            path=path,
            label=opt_str(load, entry, "label", file, key + "."),
            description=opt_str(load, entry, "description", file, key + "."),
            id=opt_str(load, entry, "id", file, key + "."),
            permissions=parse_permissions(load, entry["permissions"], file, f"{key}.permissions")
            if "permissions" in entry
            else None,
        )
    return list(refs.values())


def parse_tools(load: Load, value: Any, file: str) -> list[ToolDecl]:
    tools: list[ToolDecl] = []
    names: set[str] = set()
    for index, entry in _entries(load, value, file, "tools"):
        key = f"tools[{index + 1}]"
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            load.diag.error("External tool must include a name", file=file, key=f"{key}.name")
            continue
        name = name.strip()
        key = f"tools[{name}]"
        check_name(load, name, file, key, "External tool")
        if name in names:
            load.diag.error(
                "duplicate tool name",
                file=file,
                key=key,
                hint="tool names must be unique; rename or remove one",
            )
            continue
        names.add(name)
        tool = ToolDecl(
            name=name,
            description=opt_str(load, entry, "description", file, key + "."),
            label=opt_str(load, entry, "label", file, key + "."),
            id=opt_str(load, entry, "id", file, key + "."),
        )
        if "inputSchema" in entry:
            tool.input_schema = resolve_schema(
                load, entry["inputSchema"], file, f"{key}.inputSchema"
            )
        tools.append(tool)
    return tools


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
