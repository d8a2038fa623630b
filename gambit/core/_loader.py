"""The deck loader (seed 002, with reference §1 where the seed is silent).

`load_deck_tree` loads a root deck and every deck it reaches: actions (deck paths and
Python `execute` modules), scenarios, graders and handlers. Problems are collected, not
raised one at a time, so an author sees everything wrong at once; the load then raises one
`DeckLoadError` listing every error (warnings are kept on the result).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import importlib.util
import json
import math
import re
import sys
import threading
import traceback
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from ._builtin_schemas import (
    PLAIN_CHAT_INPUT_OPTIONAL_URI,
    PLAIN_CHAT_OUTPUT_URI,
    builtin_schema,
    grader_compatibility_problems,
    resolve_builtin_schema_uri,
)
from ._builtin_tools import BUILTIN_TOOL_NAMES
from ._compute import DeckDefinition
from ._deck import (
    REASONING_EFFORTS,
    REASONING_SUMMARIES,
    SUPPORTED_MODEL_PARAMS,
    ActionDecl,
    Deck,
    DeckRef,
    DeckRole,
    DeckTree,
    DeckTreeEntry,
    Guardrails,
    HandlerDecl,
    ModelParams,
    Permissions,
    ToolDecl,
)
from ._errors import Diagnostics
from ._frontmatter import FrontMatterError, parse_front_matter
from ._schema import Schema, deep_match_problems, schema_from_json, schema_from_pydantic
from ._zod import ZodTranslationError, translate_zod_file

MAX_SCHEMA_DEPTH = 128  # levels of JSON nesting in a schema file (two per nested object property)
MAX_EMBED_DEPTH = 32  # snippets embedded inside snippets
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
# Only `.md` and `gambit://` targets are embeds; any other image stays an image.
EMBED_RE = re.compile(r"!\[([^\]\n]*)\]\(([^)\s]+)\)")
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
# Accepted and kept (reference §1.3) or tolerated without effect; not worth a warning.
PASSTHROUGH_KEYS = {"workloop", "responseItemExtensions", "acceptsUserTurns", "description", "id"}
LEGACY_KEYS = {"actionDecks", "testDecks", "graderDecks", "inputSchema", "outputSchema", "execute"}
LEGACY_ARRAY_HINTS = {
    "actionDecks": "[[actions]]",
    "testDecks": "[[scenarios]]",
    "graderDecks": "[[graders]]",
}
SNIPPET_PACKAGE = "gambit.core.snippets"
STDLIB_DECK_PACKAGE = "gambit.core.decks"  # gambit://decks/... (the agent bridge decks)
DEPRECATED_SNIPPETS = {"generate-test-input.md": "gambit://snippets/init.md"}
CODE_SUFFIXES = (".ts", ".tsx", ".js", ".mjs", ".cjs", ".mts")


def load_deck_tree(path: str | Path, *, strict: bool = False, role: DeckRole = "root") -> DeckTree:
    """Load a root deck and everything it references; raise `DeckLoadError` on any error.

    `role` checks the deck given as that role (a grader given to `gambit grade` must be a
    compatible grader, as it would be under `[[graders]]`)."""
    loader = _Loader(strict=strict)
    tree = loader.load_tree(path, role)
    loader.diag.raise_if_errors()
    assert tree is not None
    return tree


def load_deck(path: str | Path, *, strict: bool = False) -> Deck:
    """Load a deck and its tree (so references are validated), returning the root deck."""
    return load_deck_tree(path, strict=strict).root


def check_deck_tree(
    path: str | Path, *, strict: bool = False, role: DeckRole = "root", import_modules: bool = True
) -> tuple[DeckTree | None, Diagnostics]:
    """Load without raising: the tree (None when the root itself failed) and every problem.

    With `import_modules=False` no Python file is imported: a tree that would import one (a
    compute deck, an `execute` action, a `.py` schema) raises `DeckRunsCode` instead, so a
    caller can load it elsewhere (the simulator does, in a child process)."""
    loader = _Loader(strict=strict, import_modules=import_modules)
    tree = loader.load_tree(path, role)
    return tree, loader.diag


class DeckRunsCode(Exception):
    """Loading this deck tree would import `file` (raised only with `import_modules=False`)."""

    def __init__(self, file: str):
        super().__init__(f"loading this deck imports {file}")
        self.file = file


# A compute deck's module is imported with this time limit (seconds): a module whose import
# never ends must not hang `gambit check`, a run or the simulator's deck listing.
IMPORT_TIME_LIMIT = 10.0

# Files whose import is still running past the limit. Python cannot stop a thread, and its
# import lock for that module stays taken, so they are not imported again until it ends.
_STUCK_IMPORTS: dict[str, threading.Thread] = {}


class _ImportTimedOut(Exception):
    pass


def _exec_with_time_limit(loader: Any, module: Any, file: str) -> None:
    """`loader.exec_module(module)` in a daemon thread, waiting at most IMPORT_TIME_LIMIT."""
    stuck = _STUCK_IMPORTS.get(file)
    if stuck is not None:
        if stuck.is_alive():
            raise _ImportTimedOut
        del _STUCK_IMPORTS[file]
    outcome: list[BaseException] = []

    def target() -> None:
        try:
            loader.exec_module(module)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append(exc)

    thread = threading.Thread(target=target, name=f"import {Path(file).name}", daemon=True)
    thread.start()
    thread.join(IMPORT_TIME_LIMIT)
    if thread.is_alive():
        _STUCK_IMPORTS[file] = thread
        raise _ImportTimedOut
    if outcome:
        raise outcome[0]


def find_workspace_decks(folder: str | Path) -> list[Path]:
    """Root decks of a workspace folder: the folder's own deck, else each subfolder's.

    A deck folder holds `PROMPT.md` (or, for a Python compute deck, `deck.py`).
    """
    folder = Path(folder)
    own = _folder_entrypoint(folder)
    if own is not None:
        return [own]
    found = []
    for child in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        entry = _folder_entrypoint(child)
        if entry is not None:
            found.append(entry)
    return found


def _folder_entrypoint(folder: Path) -> Path | None:
    for name in ("PROMPT.md", "deck.py"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


class _Loader:
    def __init__(self, *, strict: bool, import_modules: bool = True):
        self.diag = Diagnostics(strict=strict)
        self.import_modules = import_modules
        self.decks: dict[str, Deck] = {}
        self.failed: set[str] = set()
        self.entries: list[DeckTreeEntry] = []
        self._seen_roles: set[tuple[str, DeckRole]] = set()
        self._modules: dict[str, Any] = {}
        # (file, key) of schemas a deck declares but that failed to load (already an error).
        self._failed_schemas: set[tuple[str, str]] = set()

    def _local(self, raw: str, file: str, key: str | None) -> Path | None:
        """`raw` resolved against the declaring file's folder; None (with an error) if impossible."""
        try:
            if "\x00" in raw:
                raise ValueError("it contains a NUL character")
            return (Path(file).parent / raw).resolve()
        except (ValueError, OSError) as exc:
            self.diag.error(f"{raw!r} is not a usable path: {exc}", file=file, key=key)
            return None

    # ---- tree -------------------------------------------------------------------------------

    def load_tree(self, path: str | Path, role: DeckRole = "root") -> DeckTree | None:
        root_path = Path(path)
        if root_path.is_dir():
            entry = _folder_entrypoint(root_path)
            if entry is None:
                self.diag.error(
                    "this folder has no PROMPT.md",
                    file=str(root_path.resolve()),
                    hint=f"pass the deck's file, e.g. {root_path / 'PROMPT.md'}",
                )
                return None
            root_path = entry
        root_file = str(root_path.resolve())
        if not root_path.is_file():
            self.diag.error("deck file not found", file=root_file, hint="check the path")
            return None
        queue: list[tuple[str, DeckRole]] = [(root_file, role)]
        while queue:
            file, role = queue.pop(0)
            if (file, role) in self._seen_roles:
                continue
            self._seen_roles.add((file, role))
            deck = self._load_file(file)
            if deck is None:
                continue
            self.entries.append(DeckTreeEntry(path=file, role=role, label=deck.label))
            self._apply_role_rules(deck, role)
            queue.extend(self._children(deck))
        self._resolve_action_schemas()
        root = self.decks.get(root_file)
        if root is None:
            return None
        return DeckTree(
            root=root, decks=self.decks, entries=self.entries, warnings=self.diag.warnings
        )

    def _children(self, deck: Deck) -> Iterable[tuple[str, DeckRole]]:
        for action in deck.actions:
            if action.path:
                yield action.path, "action"
            elif action.execute:
                yield action.execute, "action"
        for ref in deck.scenarios:
            yield ref.path, "scenario"
        for ref in deck.graders:
            yield ref.path, "grader"
        for handler in deck.handlers.values():
            yield handler.path, "action"

    def _load_file(self, file: str) -> Deck | None:
        if file in self.decks:
            return self.decks[file]
        if file in self.failed:
            return None
        if file.endswith((".md", ".py")):
            try:
                if file.endswith(".md"):
                    deck = self._load_markdown_deck(file)
                else:
                    deck = self._load_compute_deck(file)
            except OSError as exc:
                # A path the deck names that the system refuses to look at (too long, not
                # readable, a loop of links): the loader reports, it never raises.
                name = exc.filename if isinstance(exc.filename, str) else file
                shown = name if len(name) <= 120 else name[:100] + "…" + name[-16:]
                self.diag.error(
                    f"cannot read {shown}: {exc.strerror or exc}",
                    file=file,
                    hint="check the paths this deck names (length, permissions, links)",
                )
                deck = None
            except RecursionError:
                self.diag.error(
                    "this deck nests too deeply to load (front matter, schemas or snippets)",
                    file=file,
                    hint="flatten the nesting",
                )
                deck = None
        else:
            self.diag.error(
                "not a deck file",
                file=file,
                hint="a deck is a PROMPT.md (or a Python compute module ending in .py)",
            )
            deck = None
        if deck is None:
            self.failed.add(file)
        else:
            self.decks[file] = deck
        return deck

    def _apply_role_rules(self, deck: Deck, role: DeckRole) -> None:
        if role == "root" or (role == "action" and deck.kind == "compute"):
            # Compute action schemas may also be declared inline: checked per action later.
            return
        if role == "scenario":
            missing = [
                k
                for k, v in (
                    ("contextSchema", deck.context_schema),
                    ("responseSchema", deck.response_schema),
                )
                if v is None and (deck.path, k) not in self._failed_schemas
            ]
            if missing:
                self.diag.deprecated(
                    f"scenario deck declares no {' or '.join(missing)}; using the plain-chat schemas",
                    file=deck.path,
                    key=missing[0],
                    hint=f'add contextSchema = "{PLAIN_CHAT_INPUT_OPTIONAL_URI}" and responseSchema = "{PLAIN_CHAT_OUTPUT_URI}"',
                )
                if deck.context_schema is None:
                    deck.context_schema = builtin_schema(PLAIN_CHAT_INPUT_OPTIONAL_URI)
                if deck.response_schema is None:
                    deck.response_schema = builtin_schema(PLAIN_CHAT_OUTPUT_URI)
            return
        what = "an action deck" if role == "action" else "a grader deck"
        for key, value in (
            ("contextSchema", deck.context_schema),
            ("responseSchema", deck.response_schema),
        ):
            if value is None and (deck.path, key) not in self._failed_schemas:
                self.diag.error(
                    f"{what} must declare {key}",
                    file=deck.path,
                    key=key,
                    hint=(
                        f'add {key} = "gambit://schemas/graders/'
                        + (
                            "contexts/conversation.zod.ts"
                            if key == "contextSchema"
                            else "grader_output.zod.ts"
                        )
                        + '"'
                        if role == "grader"
                        else f'add {key} = "./schemas/{"input" if key == "contextSchema" else "output"}.json" (or a built-in gambit://schemas/... URI)'
                    ),
                )
        if (
            role == "grader"
            and deck.context_schema is not None
            and deck.response_schema is not None
        ):
            context_problems, response_problems = grader_compatibility_problems(
                deck.context_schema, deck.response_schema
            )
            for problem in context_problems:
                self.diag.error(
                    f"not compatible with the built-in grader context schemas: {problem}",
                    file=deck.path,
                    key="contextSchema",
                    hint="extend a gambit://schemas/graders/contexts/* schema and make added fields optional",
                )
            for problem in response_problems:
                self.diag.error(
                    f"not compatible with the built-in grader output schema: {problem}",
                    file=deck.path,
                    key="responseSchema",
                    hint="extend gambit://schemas/graders/grader_output.zod.ts and make added fields optional",
                )

    def _resolve_action_schemas(self) -> None:
        """Give every action its IO schemas (seed 002 "Action target consistency").

        Path actions take them from the action deck; execute actions from the inline
        declaration, the module, or both, which must then match deeply.
        """
        for deck in list(self.decks.values()):
            for action in deck.actions:
                target = self.decks.get(action.target)
                if target is None:
                    continue
                where = "the action deck's" if action.path else "the module's"
                for key, attr in (
                    ("contextSchema", "context_schema"),
                    ("responseSchema", "response_schema"),
                ):
                    inline = getattr(action, attr)
                    from_target = getattr(target, attr)
                    if inline is not None and from_target is not None:
                        for problem in deep_match_problems(inline, from_target):
                            self.diag.error(
                                f"action {action.name!r}: inline {key} differs from {where}: {problem}",
                                file=action.declared_in,
                                key=f"actions[{action.name}].{key}",
                                hint="declare the schema in one place, or make both identical",
                            )
                    if from_target is not None:
                        setattr(action, attr, from_target)
                    elif inline is None and action.execute:
                        self.diag.error(
                            f"Action execute target must include contextSchema and responseSchema (missing {key})",
                            file=action.declared_in,
                            key=f"actions[{action.name}].{key}",
                            hint=f"declare {key} on the [[actions]] entry, or pass {attr}= to define_deck in {action.execute}",
                        )

    # ---- Markdown decks ---------------------------------------------------------------------

    def _read_text(self, file: str) -> str | None:
        try:
            return Path(file).read_text(encoding="utf-8")
        except FileNotFoundError:
            self.diag.error("file not found", file=file, hint="check the path")
        except IsADirectoryError:
            self.diag.error("is a folder, not a file", file=file, hint=f"point at {file}/PROMPT.md")
        except UnicodeDecodeError as exc:
            self.diag.error(
                f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                file=file,
                hint="save the file as UTF-8",
            )
        except OSError as exc:
            self.diag.error(f"cannot read the file: {exc.strerror}", file=file)
        return None

    def _load_markdown_deck(self, file: str) -> Deck | None:
        text = self._read_text(file)
        if text is None:
            return None
        try:
            parsed = parse_front_matter(text)
        except FrontMatterError as exc:
            self.diag.error(
                f"Failed to parse front matter: {exc}",
                file=file,
                line=exc.line,
                hint=_front_matter_hint(exc),
            )
            return None
        name = Path(file).name
        if name.endswith(".deck.md"):
            self.diag.deprecated(
                "*.deck.md decks are deprecated",
                file=file,
                hint=f"move it to {Path(file).with_suffix('').with_suffix('')}/PROMPT.md",
            )
        if parsed.format in ("yaml", "json"):
            self.diag.deprecated(
                f"{parsed.format.upper()} front matter is deprecated",
                file=file,
                hint="use TOML front matter between +++ lines",
            )
        attrs = parsed.attrs
        if isinstance(attrs.get("deck"), dict):
            attrs = attrs["deck"]
        deck = Deck(path=file, kind="markdown")
        self._check_keys(attrs, file)
        self._parse_top_level(deck, attrs, file)
        # Reference §1.4.1 merge order: card actions in flattened embed order, then the deck's
        # own; a later entry with the same name replaces the earlier one in place.
        own_actions, deck.actions = deck.actions, []
        deck.body, embeds = self._expand_body(parsed.body, file, [file], deck)
        deck.embeds = embeds
        deck.actions = _merge_actions(deck.actions, own_actions)
        self._finish_tools(deck)
        return deck

    def _check_keys(self, attrs: dict[str, Any], file: str) -> None:
        known = CANONICAL_KEYS | PASSTHROUGH_KEYS | LEGACY_KEYS | {"mcpServers"}
        for key in attrs:
            if key in known:
                continue
            close = difflib.get_close_matches(key, sorted(CANONICAL_KEYS), n=1)
            self.diag.warn(
                "unknown key; it is ignored",
                file=file,
                key=key,
                hint=f"did you mean {close[0]!r}?"
                if close
                else "see the deck format (seed 002) for the canonical keys",
            )

    def _parse_top_level(self, deck: Deck, attrs: dict[str, Any], file: str) -> None:
        if "execute" in attrs:
            self.diag.error(
                "Top-level execute in PROMPT.md is unsupported",
                file=file,
                key="execute",
                hint='declare compute code as an [[actions]] entry with execute = "./module.py", or make the deck a Python module with define_deck(run=...)',
            )
        if "mcpServers" in attrs:
            self.diag.error(
                "Deck-level [[mcpServers]] is unsupported in this phase",
                file=file,
                key="mcpServers",
                hint="remove the [[mcpServers]] tables; declare external tools with [[tools]] and handle them with on_tool",
            )
        deck.label = self._opt_str(attrs, "label", file)
        start_mode = attrs.get("startMode")
        if start_mode is not None:
            if start_mode in ("assistant", "user"):
                deck.start_mode = start_mode
            else:
                self.diag.error(
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
                self.diag.deprecated(
                    f'deprecated "{legacy}"',
                    file=file,
                    key=legacy,
                    hint=f'rename it to "{canonical}"',
                )
            if ref is not None:
                schema = self._resolve_schema(ref, file, key)
                if schema is None:
                    self._failed_schemas.add((file, canonical))
                setattr(
                    deck,
                    "context_schema" if canonical == "contextSchema" else "response_schema",
                    schema,
                )
        deck.respond = self._opt_bool(attrs, "respond", file) or False
        deck.allow_end = self._opt_bool(attrs, "allowEnd", file) or False
        if "modelParams" in attrs:
            deck.model_params = self._parse_model_params(attrs["modelParams"], file)
        if "guardrails" in attrs:
            deck.guardrails = self._parse_guardrails(attrs["guardrails"], file)
        if "permissions" in attrs:
            deck.permissions = self._parse_permissions(attrs["permissions"], file, "permissions")
        if "handlers" in attrs:
            deck.handlers = self._parse_handlers(attrs["handlers"], file)
        deck.actions = self._parse_actions(attrs, file, require_description=True)
        deck.scenarios = self._parse_refs(attrs, "scenarios", "testDecks", file)
        deck.graders = self._parse_refs(attrs, "graders", "graderDecks", file)
        deck.tools = self._parse_tools(attrs.get("tools"), file)
        for key in PASSTHROUGH_KEYS:
            if key in attrs:
                deck.passthrough[key] = attrs[key]
        if "responseItemExtensions" in attrs:
            deck.item_extensions = self._parse_item_extensions(
                attrs["responseItemExtensions"], file
            )

    def _parse_item_extensions(self, value: Any, file: str) -> dict[str, Schema]:
        """`[[responseItemExtensions]]`: `{type = "ns:name", dataSchema = "...", description?}`."""
        key = "responseItemExtensions"
        if not isinstance(value, list):
            self.diag.error(
                f"must be an array of tables, not {_type_name(value)}",
                file=file,
                key=key,
                hint='[[responseItemExtensions]]\ntype = "acme:search"\ndataSchema = "./search.json"',
            )
            return {}
        out: dict[str, Schema] = {}
        for index, entry in enumerate(value):
            where = f"{key}[{index}]"
            if not isinstance(entry, dict):
                self.diag.error(f"must be a table, not {_type_name(entry)}", file=file, key=where)
                continue
            kind = entry.get("type")
            if not isinstance(kind, str) or not kind.strip():
                self.diag.error(
                    "a response item extension must include a type",
                    file=file,
                    key=f"{where}.type",
                    hint='e.g. type = "acme:search"',
                )
                continue
            if ":" not in kind:
                self.diag.error(
                    f"response item extension type {kind!r} must be namespaced (namespace:type)",
                    file=file,
                    key=f"{where}.type",
                    hint=f'e.g. type = "myapp:{kind}"',
                )
                continue
            if kind in out:
                self.diag.error(
                    f"duplicate response item extension type {kind!r}",
                    file=file,
                    key=f"{where}.type",
                )
                continue
            for extra in entry:
                if extra not in ("type", "dataSchema", "description"):
                    self.diag.warn(
                        "unknown key; it is ignored",
                        file=file,
                        key=f"{where}.{extra}",
                        hint="keys are type, dataSchema and description",
                    )
            if "dataSchema" not in entry:
                self.diag.error(
                    f"response item extension {kind!r} must include dataSchema",
                    file=file,
                    key=f"{where}.dataSchema",
                    hint='e.g. dataSchema = "./schemas/search.json"',
                )
                continue
            schema = self._resolve_schema(entry["dataSchema"], file, f"{where}.dataSchema")
            if schema is not None:
                out[kind] = schema
        return out

    # ---- scalar helpers ---------------------------------------------------------------------

    def _opt_str(self, table: dict[str, Any], key: str, file: str, prefix: str = "") -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.diag.error(
                f"must be a string, not {_type_name(value)}", file=file, key=prefix + key
            )
            return None
        return value

    def _opt_bool(
        self, table: dict[str, Any], key: str, file: str, prefix: str = ""
    ) -> bool | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.diag.error(
                f"must be true or false, not {_type_name(value)}",
                file=file,
                key=prefix + key,
                hint=f"{key} = true",
            )
            return None
        return value

    def _opt_number(
        self,
        table: dict[str, Any],
        key: str,
        file: str,
        prefix: str,
        *,
        integer: bool = False,
        minimum: float | None = None,
    ) -> Any:
        value = table.get(key)
        if value is None:
            return None
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if (
            isinstance(value, bool)
            or not ok
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            kind = "a whole number" if integer else "a number"
            self.diag.error(f"must be {kind}, not {_type_name(value)}", file=file, key=prefix + key)
            return None
        if minimum is not None and value < minimum:
            self.diag.error(
                f"must be at least {minimum:g}, not {value}", file=file, key=prefix + key
            )
            return None
        return value

    def _table(self, value: Any, file: str, key: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.diag.error(
                f"must be a table, not {_type_name(value)}",
                file=file,
                key=key,
                hint=f"write it as [{key}]",
            )
            return None
        return value

    # ---- modelParams, guardrails, permissions, handlers --------------------------------------

    def _parse_model_params(self, value: Any, file: str) -> ModelParams:
        params = ModelParams()
        table = self._table(value, file, "modelParams")
        if table is None:
            return params
        prefix = "modelParams."
        model = table.get("model")
        if model is not None:
            if isinstance(model, str) and model.strip():
                params.models = [model.strip()]
            elif (
                isinstance(model, list)
                and model
                and all(isinstance(m, str) and m.strip() for m in model)
            ):
                params.models = [m.strip() for m in model]
            else:
                self.diag.error(
                    "must be a model name or a non-empty list of model names (an ordered fallback list)",
                    file=file,
                    key=prefix + "model",
                    hint='model = "openrouter/openai/gpt-4o-mini" or model = ["ollama/llama3.1", "openrouter/openai/gpt-4o-mini"]',
                )
        params.temperature = self._opt_number(table, "temperature", file, prefix, minimum=0)
        params.top_p = self._opt_number(table, "top_p", file, prefix, minimum=0)
        params.frequency_penalty = self._opt_number(table, "frequency_penalty", file, prefix)
        params.presence_penalty = self._opt_number(table, "presence_penalty", file, prefix)
        params.max_tokens = self._opt_number(
            table, "max_tokens", file, prefix, integer=True, minimum=1
        )
        if "reasoning" in table:
            params.reasoning = self._parse_reasoning(table["reasoning"], file)
        if "additionalParams" in table:
            extra = self._table(table["additionalParams"], file, prefix + "additionalParams")
            if extra is not None:
                bad = _non_json_paths(extra, prefix + "additionalParams")
                for path, kind in bad:
                    self.diag.error(
                        f"is a {kind}, which is not JSON-serialisable",
                        file=file,
                        key=path,
                        hint="quote it as a string",
                    )
                if not bad:
                    params.additional_params = extra
                for key in extra:
                    if key in SUPPORTED_MODEL_PARAMS and key in table:
                        self.diag.warn(
                            f"set both in [modelParams] and in additionalParams; [modelParams].{key} wins",
                            file=file,
                            key=prefix + "additionalParams." + key,
                            hint="remove one of them",
                        )
        for key in table:
            if key not in (*SUPPORTED_MODEL_PARAMS, "model", "additionalParams"):
                self.diag.warn(
                    "is not a supported model parameter, so it is not passed to the provider",
                    file=file,
                    key=prefix + key,
                    hint=f"move it under [modelParams.additionalParams] ({key} = ...)",
                )
        return params

    def _parse_reasoning(self, value: Any, file: str) -> dict[str, str] | None:
        table = self._table(value, file, "modelParams.reasoning")
        if table is None:
            return None
        result: dict[str, str] = {}
        for key, allowed in (("effort", REASONING_EFFORTS), ("summary", REASONING_SUMMARIES)):
            if key not in table:
                continue
            if table[key] in allowed:
                result[key] = table[key]
            else:
                self.diag.error(
                    f"must be one of {', '.join(allowed)}; got {table[key]!r}",
                    file=file,
                    key=f"modelParams.reasoning.{key}",
                )
        for key in table:
            if key not in ("effort", "summary"):
                self.diag.error(
                    "unknown reasoning setting",
                    file=file,
                    key=f"modelParams.reasoning.{key}",
                    hint="reasoning supports effort and summary; put provider-specific settings in additionalParams",
                )
        return result

    def _parse_guardrails(self, value: Any, file: str) -> Guardrails:
        table = self._table(value, file, "guardrails")
        if table is None:
            return Guardrails()
        guardrails = Guardrails(
            max_depth=self._opt_number(
                table, "maxDepth", file, "guardrails.", integer=True, minimum=1
            ),
            max_passes=self._opt_number(
                table, "maxPasses", file, "guardrails.", integer=True, minimum=1
            ),
            timeout_ms=self._opt_number(
                table, "timeoutMs", file, "guardrails.", integer=True, minimum=0
            ),
        )
        for key in table:
            if key not in ("maxDepth", "maxPasses", "timeoutMs"):
                self.diag.warn(
                    "unknown guardrail; it is ignored",
                    file=file,
                    key=f"guardrails.{key}",
                    hint="use maxDepth, maxPasses or timeoutMs",
                )
        return guardrails

    def _parse_permissions(self, value: Any, file: str, key: str) -> Permissions | None:
        if not isinstance(value, dict):
            self.diag.error(f"must be a table, not {_type_name(value)}", file=file, key=key)
            return None
        base = Path(file).parent
        perms = Permissions()
        for kind in ("read", "write", "net", "env"):
            raw = value.get(kind)
            resolved = self._permission_list(
                raw, kind, file, key, base if kind in ("read", "write") else None
            )
            if resolved is not None:
                setattr(perms, kind, resolved)
        raw_run = value.get("run")
        if raw_run is None or isinstance(raw_run, bool):
            perms.run = bool(raw_run)
        elif isinstance(raw_run, list):
            commands = self._permission_list(raw_run, "run", file, key, None)
            perms.run = {"paths": [], "commands": commands} if commands else False
        elif isinstance(raw_run, dict):
            for sub in raw_run:
                if sub not in ("paths", "commands"):
                    self.diag.warn(
                        "unknown key; it is ignored",
                        file=file,
                        key=f"{key}.run.{sub}",
                        hint="[permissions.run] has paths and commands",
                    )
            lists: dict[str, list[str]] = {}
            for sub in ("paths", "commands"):
                entry = raw_run.get(sub)
                if isinstance(entry, bool):
                    self.diag.error(
                        f"permissions.run.{sub} must be an array in object form; use permissions.run=true for full run access",
                        file=file,
                        key=f"{key}.run.{sub}",
                    )
                    continue
                resolved = self._permission_list(
                    entry, f"run.{sub}", file, key, base if sub == "paths" else None
                )
                lists[sub] = resolved if isinstance(resolved, list) else []
            perms.run = lists if (lists.get("paths") or lists.get("commands")) else False
            if perms.run:
                perms.run = {"paths": lists.get("paths", []), "commands": lists.get("commands", [])}
        else:
            self.diag.error(
                "permissions.run must be boolean, array, or object", file=file, key=f"{key}.run"
            )
        for sub in value:
            if sub not in ("read", "write", "net", "env", "run"):
                self.diag.warn(
                    "unknown permission kind; it is ignored", file=file, key=f"{key}.{sub}"
                )
        return perms

    def _permission_list(
        self, raw: Any, kind: str, file: str, key: str, base: Path | None
    ) -> bool | list[str] | None:
        if raw is None:
            return False
        if isinstance(raw, bool):
            return raw
        if not isinstance(raw, list):
            self.diag.error(
                f"permissions.{kind} must be boolean or array", file=file, key=f"{key}.{kind}"
            )
            return None
        out: set[str] = set()
        for entry in raw:
            if not isinstance(entry, str):
                self.diag.error(
                    f"permissions.{kind} entries must be strings", file=file, key=f"{key}.{kind}"
                )
                return None
            entry = entry.strip()
            if not entry:
                continue
            if base is None:
                out.add(entry)
                continue
            resolved = self._local(entry, str(base / "PROMPT.md"), f"{key}.{kind}")
            if resolved is None:
                return None
            out.add(str(resolved))
        return sorted(out)

    def _parse_handlers(self, value: Any, file: str) -> dict[str, HandlerDecl]:
        table = self._table(value, file, "handlers")
        if table is None:
            return {}
        handlers: dict[str, HandlerDecl] = {}
        for kind, raw in table.items():
            key = f"handlers.{kind}"
            if kind == "onInterval":
                self.diag.deprecated(
                    "handlers.onInterval is deprecated",
                    file=file,
                    key=key,
                    hint="rename it to [handlers.onBusy]",
                )
                if "onBusy" in table:
                    continue
                kind = "onBusy"
            if kind not in ("onBusy", "onIdle", "onError"):
                self.diag.error(
                    "unknown handler",
                    file=file,
                    key=key,
                    hint="handlers are onBusy, onIdle and onError",
                )
                continue
            entry = self._table(raw, file, key)
            if entry is None:
                continue
            path = self._resolve_deck_path(
                entry.get("path"), file, f"{key}.path", allow_python=True
            )
            label = self._opt_str(entry, "label", file, key + ".")
            handler = HandlerDecl(kind=kind, path=path or "", label=label)
            allowed = {"path", "label"}
            if kind in ("onBusy", "onIdle"):
                allowed |= {"delayMs", "repeatMs", "intervalMs"}
                handler.delay_ms = self._opt_number(
                    entry, "delayMs", file, key + ".", integer=True, minimum=0
                )
                handler.repeat_ms = self._opt_number(
                    entry, "repeatMs", file, key + ".", integer=True, minimum=0
                )
                if "intervalMs" in entry:
                    self.diag.deprecated(
                        f"handlers.{kind}.intervalMs is deprecated",
                        file=file,
                        key=f"{key}.intervalMs",
                        hint="rename it to repeatMs",
                    )
                    if handler.repeat_ms is None:
                        handler.repeat_ms = self._opt_number(
                            entry, "intervalMs", file, key + ".", integer=True, minimum=0
                        )
            for sub in entry:
                if sub not in allowed:
                    self.diag.warn(
                        "unknown handler setting; it is ignored", file=file, key=f"{key}.{sub}"
                    )
            if path:
                handlers[kind] = handler
        return handlers

    # ---- arrays -----------------------------------------------------------------------------

    def _entries(self, value: Any, file: str, key: str) -> list[tuple[int, dict[str, Any]]]:
        entries = self._table_entries(value, file, key)
        known = ENTRY_KEYS.get(key)
        if known is not None:
            for index, entry in entries:
                for name in entry:
                    if name not in known:
                        self.diag.warn(
                            "unknown key; it is ignored",
                            file=file,
                            key=f"{key}[{index + 1}].{name}",
                            hint="known keys: " + ", ".join(sorted(known)),
                        )
        return entries

    def _table_entries(self, value: Any, file: str, key: str) -> list[tuple[int, dict[str, Any]]]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.diag.error(
                f"must be an array of tables, not {_type_name(value)}",
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
                self.diag.error(
                    f"entry {index + 1} must be a table, not {_type_name(entry)}",
                    file=file,
                    key=key,
                )
        return result

    def _parse_actions(
        self, attrs: dict[str, Any], file: str, *, require_description: bool
    ) -> list[ActionDecl]:
        declared: list[tuple[str, int, dict[str, Any]]] = [
            ("actions", i, e) for i, e in self._entries(attrs.get("actions"), file, "actions")
        ]
        if "actionDecks" in attrs:
            self.diag.deprecated(
                'deprecated "actionDecks"',
                file=file,
                key="actionDecks",
                hint='use "[[actions]]" instead',
            )
            declared += [
                ("actionDecks", i, e)
                for i, e in self._entries(attrs.get("actionDecks"), file, "actionDecks")
            ]
        actions: dict[str, ActionDecl] = {}
        for source, index, entry in declared:
            key = f"{source}[{index + 1}]"
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                self.diag.error(
                    "Action deck must include a name",
                    file=file,
                    key=f"{key}.name",
                    hint='add name = "lookup_order"',
                )
                continue
            name = name.strip()
            key = f"{source}[{name}]"
            self._check_name(name, file, key, "Action")
            description = entry.get("description")
            if not isinstance(description, str) or not description.strip():
                if require_description and source == "actions":
                    self.diag.error(
                        "Action deck must include a description",
                        file=file,
                        key=f"{key}.description",
                        hint='add description = "..." telling the model when and why to call it',
                    )
                description = ""
            has_path = isinstance(entry.get("path"), str) and entry["path"].strip()
            has_execute = isinstance(entry.get("execute"), str) and entry["execute"].strip()
            if bool(has_path) == bool(has_execute):
                self.diag.error(
                    "Action deck must include exactly one of path or execute",
                    file=file,
                    key=key,
                    hint='path = "./actions/x/PROMPT.md" for a deck, or execute = "./actions/x.py" for Python code',
                )
                continue
            action = ActionDecl(name=name, description=description.strip(), declared_in=file)
            if has_path:
                action.path = self._resolve_deck_path(entry["path"], file, f"{key}.path")
            else:
                action.execute = self._resolve_execute_path(
                    entry["execute"], file, f"{key}.execute"
                )
            for schema_key, attr in (
                ("contextSchema", "context_schema"),
                ("responseSchema", "response_schema"),
            ):
                if schema_key in entry:
                    setattr(
                        action,
                        attr,
                        self._resolve_schema(entry[schema_key], file, f"{key}.{schema_key}"),
                    )
            if "permissions" in entry:
                action.permissions = self._parse_permissions(
                    entry["permissions"], file, f"{key}.permissions"
                )
            action.label = self._opt_str(entry, "label", file, key + ".")
            action.id = self._opt_str(entry, "id", file, key + ".")
            if action.target:
                if name in actions and actions[name].declared_in == file:
                    self.diag.error(
                        f"duplicate action name {name}",
                        file=file,
                        key=key,
                        hint="action names must be unique in a deck; rename or remove one",
                    )
                    continue
                # An action of an embedded card is replaced, in place, by the deck's own.
                actions[name] = action
        return list(actions.values())

    def _check_name(self, name: str, file: str, key: str, what: str) -> None:
        if name in BUILTIN_TOOL_NAMES:
            self.diag.error(
                f"{what} name {name} conflicts with a built-in tool name",
                file=file,
                key=key,
                hint=f"{name} is a built-in workspace tool (granted by [permissions]); rename it",
            )
        elif name.startswith("gambit_"):
            self.diag.error(
                f"{what} name {name} is reserved (prefix gambit_)",
                file=file,
                key=key,
                hint="names starting with gambit_ belong to Gambit's synthetic tools; rename it",
            )
        elif not NAME_RE.match(name) or len(name) > MAX_NAME_LENGTH:
            self.diag.error(
                f"{what} name {name} must match /^[A-Za-z_][A-Za-z0-9_]*$/ and be <= 64 characters",
                file=file,
                key=key,
                hint="use letters, digits and underscores, starting with a letter or underscore",
            )

    def _parse_refs(
        self, attrs: dict[str, Any], canonical: str, legacy: str, file: str
    ) -> list[DeckRef]:
        declared = [
            (canonical, i, e) for i, e in self._entries(attrs.get(canonical), file, canonical)
        ]
        if legacy in attrs:
            self.diag.deprecated(
                f'deprecated "{legacy}"',
                file=file,
                key=legacy,
                hint=f'use "{LEGACY_ARRAY_HINTS[legacy]}" instead',
            )
            declared += [(legacy, i, e) for i, e in self._entries(attrs.get(legacy), file, legacy)]
        refs: dict[str, DeckRef] = {}
        for source, index, entry in declared:
            key = f"{source}[{index + 1}]"
            raw = entry.get("path")
            if not isinstance(raw, str) or not raw.strip():
                self.diag.error(
                    "Deck reference must include a path",
                    file=file,
                    key=f"{key}.path",
                    hint='path = "./scenarios/x/PROMPT.md"',
                )
                continue
            path = self._resolve_deck_path(raw, file, f"{key}.path", allow_python=True)
            if not path or path in refs:
                continue
            refs[path] = DeckRef(
                path=path,
                label=self._opt_str(entry, "label", file, key + "."),
                description=self._opt_str(entry, "description", file, key + "."),
                id=self._opt_str(entry, "id", file, key + "."),
                permissions=self._parse_permissions(
                    entry["permissions"], file, f"{key}.permissions"
                )
                if "permissions" in entry
                else None,
            )
        return list(refs.values())

    def _parse_tools(self, value: Any, file: str) -> list[ToolDecl]:
        tools: list[ToolDecl] = []
        names: set[str] = set()
        for index, entry in self._entries(value, file, "tools"):
            key = f"tools[{index + 1}]"
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                self.diag.error("External tool must include a name", file=file, key=f"{key}.name")
                continue
            name = name.strip()
            key = f"tools[{name}]"
            self._check_name(name, file, key, "External tool")
            if name in names:
                self.diag.error(
                    "duplicate tool name",
                    file=file,
                    key=key,
                    hint="tool names must be unique; rename or remove one",
                )
                continue
            names.add(name)
            tool = ToolDecl(
                name=name,
                description=self._opt_str(entry, "description", file, key + "."),
                label=self._opt_str(entry, "label", file, key + "."),
                id=self._opt_str(entry, "id", file, key + "."),
            )
            if "inputSchema" in entry:
                tool.input_schema = self._resolve_schema(
                    entry["inputSchema"], file, f"{key}.inputSchema"
                )
            tools.append(tool)
        return tools

    def _finish_tools(self, deck: Deck) -> None:
        action_names = {a.name for a in deck.actions}
        for tool in deck.tools:
            if tool.name in action_names:
                tool.shadowed = True
                self.diag.warn(
                    f"tool {tool.name} is shadowed by an action",
                    file=deck.path,
                    key=f"tools[{tool.name}]",
                    hint="the action wins and the tool is never offered; rename one of them",
                )

    # ---- paths ------------------------------------------------------------------------------

    def _resolve_deck_path(
        self, raw: Any, file: str, key: str, *, allow_python: bool = False
    ) -> str | None:
        if not isinstance(raw, str) or not raw.strip():
            self.diag.error("must be a path to a PROMPT.md", file=file, key=key)
            return None
        raw = raw.strip()
        if raw.startswith("gambit://"):
            return self._resolve_stdlib_deck(raw, file, key)
        target = self._local(raw, file, key)
        if target is None:
            return None
        if target.is_dir():
            inner = target / "PROMPT.md"
            hint = f'point at the deck file: "{raw.rstrip("/")}/PROMPT.md"'
            if not inner.is_file():
                hint += f" (and create {inner})"
            self.diag.error(
                f"{raw!r} is a folder; paths must name a PROMPT.md", file=file, key=key, hint=hint
            )
            return None
        if not target.is_file():
            self.diag.error(
                f"{raw!r} does not exist ({target})",
                file=file,
                key=key,
                hint="check the path; it is relative to this file",
            )
            return None
        if target.name == "PROMPT.md":
            return str(target)
        if target.name.endswith(".deck.md"):
            # The deprecation itself is reported once, on the referenced deck.
            return str(target)
        if allow_python and target.suffix == ".py":
            return str(target)
        if target.suffix in CODE_SUFFIXES:
            # A path action must name a PROMPT.md; ported compute code is an `execute` target.
            py_name = target.name.removesuffix(target.suffix).removesuffix(".deck") + ".py"
            py_rel = (Path(raw).parent / py_name).as_posix()
            py_rel = py_rel if py_rel.startswith(("../", "/")) else "./" + py_rel
            use = f'path = "{py_rel}"' if allow_python else f'execute = "{py_rel}" instead of path'
            self.diag.error(
                f"{raw!r} is a TypeScript/JavaScript deck, which Gambit for Python cannot run",
                file=file,
                key=key,
                hint=f"port it to Python: {py_name} exporting deck = gambit.define_deck(run=...), then use {use}",
            )
            return None
        self.diag.error(
            f"{raw!r} must point at a PROMPT.md",
            file=file,
            key=key,
            hint=f"move the deck into its own folder as {target.parent / target.stem}/PROMPT.md",
        )
        return None

    def _resolve_stdlib_deck(self, raw: str, file: str, key: str) -> str | None:
        rel = raw[len("gambit://") :]
        if not rel.startswith("decks/"):
            self.diag.error(
                f"{raw!r} is not a deck URI",
                file=file,
                key=key,
                hint="stdlib decks are gambit://decks/.../PROMPT.md",
            )
            return None
        if not rel.endswith("/PROMPT.md"):
            self.diag.deprecated(
                f"{raw!r} omits the PROMPT.md suffix",
                file=file,
                key=key,
                hint=f"use {raw.rstrip('/')}/PROMPT.md",
            )
            rel = rel.rstrip("/") + "/PROMPT.md"
        bundled = resources.files(STDLIB_DECK_PACKAGE).joinpath(rel.removeprefix("decks/"))
        if bundled.is_file():
            return str(Path(str(bundled)).resolve())
        self.diag.error(
            f"stdlib deck {'gambit://' + rel} is not bundled with Gambit for Python",
            file=file,
            key=key,
            hint="the bundled stdlib decks are gambit://decks/openai/codex-sdk/PROMPT.md and gambit://decks/anthropic/agent-sdk/PROMPT.md",
        )
        return None

    def _resolve_execute_path(self, raw: str, file: str, key: str) -> str | None:
        raw = raw.strip()
        target = self._local(raw, file, key)
        if target is None:
            return None
        if target.suffix in CODE_SUFFIXES:
            self.diag.error(
                f"{raw!r} is a TypeScript/JavaScript module, which Gambit for Python cannot run",
                file=file,
                key=key,
                hint=f"port it to Python: {target.with_suffix('.py').name} exporting deck = gambit.define_deck(run=...)",
            )
            return None
        if target.suffix != ".py":
            self.diag.error(
                f"{raw!r} must be a Python module (.py)",
                file=file,
                key=key,
                hint='execute = "./actions/compute.py"',
            )
            return None
        if not target.is_file():
            self.diag.error(
                f"{raw!r} does not exist ({target})",
                file=file,
                key=key,
                hint="check the path; it is relative to this file",
            )
            return None
        return str(target)

    # ---- compute decks ----------------------------------------------------------------------

    def _import_module(self, file: str) -> Any | None:
        if file in self._modules:
            return self._modules[file]
        if not self.import_modules:
            raise DeckRunsCode(file)
        digest = hashlib.sha256(file.encode()).hexdigest()[:16]
        name = f"gambit_deck_module_{digest}"
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            self.diag.error("cannot import this file as a Python module", file=file)
            self._modules[file] = None
            return None
        module = importlib.util.module_from_spec(spec)
        folder = str(Path(file).parent)
        added = folder not in sys.path
        if added:
            sys.path.insert(0, folder)
        try:
            sys.modules[name] = module
            _exec_with_time_limit(spec.loader, module, file)
        except _ImportTimedOut:
            sys.modules.pop(name, None)
            self.diag.error(
                f"{Path(file).name} did not finish importing within {IMPORT_TIME_LIMIT:g} s",
                file=file,
                hint="do the slow work inside run(ctx), not when the module is imported",
            )
            module = None
        except BaseException as exc:  # a user module may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            sys.modules.pop(name, None)
            line = _traceback_line(exc, file)
            self.diag.error(
                f"importing the module failed: {type(exc).__name__}: {exc}",
                file=file,
                line=line,
                hint="fix the error in the module",
            )
            module = None
        finally:
            if added:
                try:
                    sys.path.remove(folder)
                except ValueError:
                    pass
        self._modules[file] = module
        return module

    def _definition(self, file: str) -> DeckDefinition | None:
        module = self._import_module(file)
        if module is None:
            return None
        definition = getattr(module, "deck", None)
        if isinstance(definition, DeckDefinition):
            return definition
        if definition is None and callable(getattr(module, "run", None)):
            hint = "wrap it: deck = gambit.define_deck(run=run, context_schema=..., response_schema=...)"
            self.diag.error(
                "defines run() at module level but exports no deck",
                file=file,
                key="deck",
                hint=hint,
            )
        else:
            self.diag.error(
                "did not export a valid deck definition",
                file=file,
                key="deck",
                hint="add a module-level deck = gambit.define_deck(run=...)",
            )
        return None

    def _load_compute_deck(self, file: str) -> Deck | None:
        definition = self._definition(file)
        if definition is None:
            return None
        deck = Deck(path=file, kind="compute", label=definition.label, definition=definition)
        deck.context_schema = self._schema_from_spec(
            definition.context_schema, file, "context_schema"
        )
        deck.response_schema = self._schema_from_spec(
            definition.response_schema, file, "response_schema"
        )
        return deck

    def _schema_from_spec(self, spec: Any, file: str, key: str) -> Schema | None:
        if spec is None:
            return None
        if isinstance(spec, Schema):
            return spec
        if isinstance(spec, str):
            return self._resolve_schema(spec, file, key)
        if isinstance(spec, dict):
            try:
                return schema_from_json(spec, source=f"{file}#{key}")
            except ValueError as exc:
                self.diag.error(f"invalid JSON Schema: {exc}", file=file, key=key)
                return None
        if isinstance(spec, type) and hasattr(spec, "model_json_schema"):
            try:
                return schema_from_pydantic(spec, source=f"{file}#{key}")
            except Exception as exc:
                self.diag.error(
                    f"cannot convert the pydantic model {spec.__name__}: {exc}", file=file, key=key
                )
                return None
        self.diag.error(
            f"must be a pydantic model class, a JSON Schema dict or a schema path, not {_type_name(spec)}",
            file=file,
            key=key,
        )
        return None

    # ---- schemas ----------------------------------------------------------------------------

    def _resolve_schema(self, ref: Any, file: str, key: str) -> Schema | None:
        if not isinstance(ref, str) or not ref.strip():
            self.diag.error(
                f"must be a schema path string, not {_type_name(ref)}",
                file=file,
                key=key,
                hint='e.g. "./schemas/input.json" or "gambit://schemas/graders/grader_output.zod.ts"',
            )
            return None
        ref = ref.strip()
        if ref.startswith("gambit://"):
            if not ref.startswith("gambit://schemas/"):
                self.diag.error(
                    f"{ref!r} is not a schema URI",
                    file=file,
                    key=key,
                    hint="built-in schemas live under gambit://schemas/",
                )
                return None
            try:
                resolved = resolve_builtin_schema_uri(ref)
            except ValueError as exc:
                self.diag.error(str(exc), file=file, key=key)
                return None
            if resolved.deprecated_reason:
                self.diag.deprecated(resolved.deprecated_reason, file=file, key=key)
            return builtin_schema(resolved.canonical_uri)
        target = self._local(ref, file, key)
        if target is None:
            return None
        if not target.is_file():
            self.diag.error(
                f"schema file {ref!r} does not exist ({target})",
                file=file,
                key=key,
                hint="check the path; it is relative to this file",
            )
            return None
        name = target.name
        if name.endswith(".json"):
            text = self._read_text(str(target))
            if text is None:
                return None
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                self.diag.error(f"invalid JSON: {exc.msg}", file=str(target), line=exc.lineno)
                return None
            except RecursionError:
                self.diag.error("invalid JSON: nested too deeply", file=str(target))
                return None
            if not isinstance(data, dict):
                self.diag.error("a JSON Schema file must hold an object", file=str(target))
                return None
            if not self._shallow_enough(data, str(target)):
                return None
            try:
                return schema_from_json(data, source=str(target))
            except ValueError as exc:
                self.diag.error(f"invalid JSON Schema: {exc}", file=str(target))
                return None
        if name.endswith(".py"):
            module = self._import_module(str(target))
            if module is None:
                return None
            if not hasattr(module, "schema"):
                self.diag.error(
                    "a Python schema module must define `schema` (a pydantic model class or a JSON Schema dict)",
                    file=str(target),
                    key="schema",
                )
                return None
            return self._schema_from_spec(module.schema, str(target), "schema")
        if name.endswith(".ts"):
            try:
                translated = translate_zod_file(target)
                if not self._shallow_enough(translated, str(target)):
                    return None
                return schema_from_json(translated, source=str(target))
            except RecursionError:
                self.diag.error(
                    f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
                    file=str(target),
                    hint="flatten it, or split it with $defs and $ref",
                )
                return None
            except ZodTranslationError as exc:
                self.diag.error(
                    exc.message,
                    file=exc.file,
                    line=exc.line,
                    hint="port this TypeScript: write the schema as JSON Schema (a .json file) "
                    "or in the static zod subset docs/decks.md lists",
                )
                return None
            except ValueError as exc:
                self.diag.error(f"translated schema is invalid: {exc}", file=str(target))
                return None
        self.diag.error(
            f"unsupported schema file type {target.suffix or name!r}",
            file=file,
            key=key,
            hint="use a .json JSON Schema, a .py module exporting `schema`, a .zod.ts file or a gambit://schemas/ URI",
        )
        return None

    def _shallow_enough(self, data: Any, file: str) -> bool:
        """A schema nested past MAX_SCHEMA_DEPTH is an error naming the file and the limit
        (deeper ones would exhaust the recursion of the validators)."""
        depth = _json_depth(data, MAX_SCHEMA_DEPTH + 1)
        if depth > MAX_SCHEMA_DEPTH:
            self.diag.error(
                f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
                file=file,
                hint="flatten it, or split it with $defs and $ref",
            )
            return False
        return True

    # ---- body and embeds --------------------------------------------------------------------

    def _expand_body(
        self, body: str, file: str, stack: list[str], deck: Deck
    ) -> tuple[str, list[str]]:
        embeds: list[str] = []
        pieces: list[str] = []
        last = 0
        for match in EMBED_RE.finditer(body):
            target = match.group(2)
            if not (target.startswith("gambit://") or target.split("#", 1)[0].endswith(".md")):
                continue  # an ordinary image: keep it
            pieces.append(body[last : match.start()])
            last = match.end()
            pieces.append(self._embed(target, file, stack, deck, embeds))
        pieces.append(body[last:])
        return "".join(pieces).strip(), embeds

    def _embed(
        self, target: str, file: str, stack: list[str], deck: Deck, embeds: list[str]
    ) -> str:
        if len(stack) > MAX_EMBED_DEPTH:
            self.diag.error(
                f"snippets are embedded more than {MAX_EMBED_DEPTH} levels deep (at ![]({target}))",
                file=file,
                hint="embed the snippets side by side instead of each inside the next",
            )
            return ""
        if target in LEGACY_MARKERS:
            text, replacement = LEGACY_MARKERS[target]
            self.diag.deprecated(
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
                self.diag.error(
                    f'unknown legacy card "{target}"',
                    file=file,
                    hint=f"use one of the built-in snippets: {', '.join(_snippet_uris())}",
                )
                return ""
            self.diag.deprecated(
                f'"{target}" is deprecated', file=file, hint=f"use ![]({replacement}) instead"
            )
            target = replacement
        if target.startswith("gambit://snippets/"):
            rel = target[len("gambit://snippets/") :]
            if not rel or not _snippet_exists(rel):
                self.diag.error(
                    f'unknown built-in snippet "{target}"',
                    file=file,
                    hint=f"the built-in snippets are {', '.join(_snippet_uris())}",
                )
                return ""
            if rel in DEPRECATED_SNIPPETS:
                self.diag.deprecated(
                    f'"{target}" is deprecated',
                    file=file,
                    hint=f"use ![]({DEPRECATED_SNIPPETS[rel]}) instead",
                )
            ident = target
            text = resources.files(SNIPPET_PACKAGE).joinpath(rel).read_text(encoding="utf-8")
            return self._embed_text(ident, text, stack, deck, embeds, base_file=file)
        if target.startswith("gambit://"):
            self.diag.error(
                f'unknown gambit:// embed "{target}"',
                file=file,
                hint=f"the built-in snippets are {', '.join(_snippet_uris())}",
            )
            return ""
        local = self._local(target.split("#", 1)[0], file, f"![]({target})")
        if local is None:
            return ""
        path = str(local)
        if path in stack:
            chain = " -> ".join([*stack[stack.index(path) :], path])
            self.diag.error(
                f"Card/embed cycle detected: {chain}",
                file=file,
                hint="remove one of the embeds in the chain",
            )
            return ""
        text = self._read_text(path) if Path(path).is_file() else None
        if text is None:
            if not Path(path).is_file():
                self.diag.error(
                    f'embedded snippet "{target}" does not exist ({path})',
                    file=file,
                    hint="check the path; it is relative to this file",
                )
            return ""
        return self._embed_text(path, text, stack, deck, embeds, base_file=path)

    def _embed_text(
        self,
        ident: str,
        text: str,
        stack: list[str],
        deck: Deck,
        embeds: list[str],
        *,
        base_file: str,
    ) -> str:
        if ident in stack:
            chain = " -> ".join([*stack[stack.index(ident) :], ident])
            self.diag.error(
                f"Card/embed cycle detected: {chain}",
                file=stack[-1],
                hint="remove one of the embeds in the chain",
            )
            return ""
        try:
            parsed = parse_front_matter(text)
        except FrontMatterError as exc:
            self.diag.error(
                f"Failed to parse front matter: {exc}",
                file=ident,
                line=exc.line,
                hint=_front_matter_hint(exc),
            )
            return ""
        embeds.append(ident)
        self._apply_card(parsed.attrs, ident, deck)
        body, nested = self._expand_body(parsed.body, base_file, [*stack, ident], deck)
        embeds.extend(nested)
        return body

    def _apply_card(self, attrs: dict[str, Any], file: str, deck: Deck) -> None:
        """Front matter of an embedded snippet (a legacy card) contributes to the deck."""
        if "mcpServers" in attrs:
            self.diag.error(
                "[[mcpServers]] in a snippet's front matter is unsupported in this phase",
                file=file,
                key="mcpServers",
                hint="remove the [[mcpServers]] tables; declare external tools with [[tools]] in the deck",
            )
        if attrs.get("handlers"):
            self.diag.error(
                "Card at this path cannot declare handlers (deck-only)",
                file=file,
                key="handlers",
                hint="move [handlers] into the deck's PROMPT.md",
            )
        if attrs.get("respond") is True:
            deck.respond = True
        if attrs.get("allowEnd") is True:
            deck.allow_end = True
        card_actions = self._parse_actions(attrs, file, require_description=False)
        if card_actions:
            deck.actions = _merge_actions(deck.actions, card_actions)
        for canonical, legacy, attr in (
            ("contextFragment", "inputSchema", "context_schema"),
            ("responseFragment", "outputSchema", "response_schema"),
        ):
            ref = attrs.get(canonical)
            key = canonical
            if ref is None and legacy in attrs:
                ref, key = attrs[legacy], legacy
                self.diag.deprecated(
                    f'deprecated "{legacy}" on a card',
                    file=file,
                    key=legacy,
                    hint=f'rename it to "{canonical}"',
                )
            if ref is None:
                continue
            fragment = self._resolve_schema(ref, file, key)
            if fragment is None:
                continue
            current = getattr(deck, attr)
            if current is None:
                setattr(deck, attr, fragment)
                continue
            try:
                setattr(deck, attr, current.merge_fragment(fragment))
            except ValueError as exc:
                self.diag.error(str(exc), file=file, key=key)
        for key, target_list in (("testDecks", deck.scenarios), ("graderDecks", deck.graders)):
            if key in attrs:
                existing = {r.path for r in target_list}
                for ref in self._parse_refs({key: attrs[key]}, key, "__none__", file):
                    if ref.path not in existing:
                        target_list.append(ref)


# ---- module helpers ---------------------------------------------------------------------------


def _merge_actions(earlier: list[ActionDecl], later: list[ActionDecl]) -> list[ActionDecl]:
    """`earlier` then `later`; a later action replaces an earlier one of the same name in place."""
    merged = {a.name: a for a in earlier}
    for action in later:
        merged[action.name] = action
    return list(merged.values())


def _json_depth(value: Any, stop: int) -> int:
    """Nesting depth of a JSON value, counted without recursion (stops counting at `stop`)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > deepest:
            deepest = depth
            if deepest >= stop:
                return deepest
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return deepest


def _snippet_exists(rel: str) -> bool:
    if "/" in rel or "\\" in rel or rel.startswith("."):
        return False
    try:
        return resources.files(SNIPPET_PACKAGE).joinpath(rel).is_file()
    except (OSError, ValueError):
        return False


def _snippet_uris() -> list[str]:
    return sorted(
        f"gambit://snippets/{p.name}"
        for p in resources.files(SNIPPET_PACKAGE).iterdir()
        if p.name.endswith(".md") and p.name not in DEPRECATED_SNIPPETS
    )


def _front_matter_hint(exc: FrontMatterError) -> str:
    text = str(exc)
    if "never closed" in text:
        return "close the front matter with a line holding only +++"
    return "fix the front matter syntax (TOML between +++ lines)"


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return "a date/time"
    return type(value).__name__


def _non_json_paths(value: Any, path: str) -> list[tuple[str, str]]:
    """Dotted paths of values JSON cannot carry (TOML dates and times, NaN, infinity)."""
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out.extend(_non_json_paths(item, f"{path}.{key}"))
        return out
    if isinstance(value, list):
        out = []
        for index, item in enumerate(value):
            out.extend(_non_json_paths(item, f"{path}.{index}"))
        return out
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return [(path, "TOML date/time")]
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, "non-finite number")]
    if value is None or isinstance(value, str | int | float | bool):
        return []
    return [(path, type(value).__name__)]


def _traceback_line(exc: BaseException, file: str) -> int | None:
    if isinstance(exc, SyntaxError) and exc.lineno and (exc.filename or "") == file:
        return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == file:
            line = frame.lineno
    return line
