"""The tree walk: which decks a root deck reaches, in which role, and what each role demands.

From the root, breadth first: every `[[actions]]` target (a deck or an `execute` module),
`[[scenarios]]`, `[[graders]]` and handler. A deck is loaded once however often it is
referenced (so a cycle ends), but is checked once per role it is reached in. Once every
deck is loaded, each action takes its IO schemas from its target.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .._builtin_schemas import (
    GRADER_CONTEXT_SCHEMA_URIS,
    GRADER_OUTPUT_SCHEMA_URI,
    PLAIN_CHAT_INPUT_OPTIONAL_URI,
    PLAIN_CHAT_OUTPUT_URI,
    builtin_schema,
    grader_compatibility_problems,
)
from .._deck import Deck, DeckRole, DeckTree, DeckTreeEntry
from .._errors import Diagnostics
from .._schema import deep_match_problems
from .deck_file import read_deck
from .load import Load
from .paths import (
    Jail,
    ProjectRoot,
    default_project_root,
    folder_entrypoint,
    root_deck_file,
    subfolder_decks,
)

# What a caller may pass as `project_root=`: a folder, or a ProjectRoot with allowed folders.
ProjectRootSpec = str | os.PathLike[str] | ProjectRoot | None


def load_deck_tree(
    path: str | Path,
    *,
    strict: bool = False,
    role: DeckRole = "root",
    project_root: ProjectRootSpec = None,
) -> DeckTree:
    """Load a root deck and everything it references; raise `DeckLoadError` on any error.

    `role` checks the deck given as that role (a grader given to `gambit grade` must be a
    compatible grader, as it would be under `[[graders]]`). Every file must lie inside
    `project_root` (a folder, or a `ProjectRoot` with folders allowed beside it); None picks
    `default_project_root`: the nearest folder holding gambit.toml at or above the deck, else
    a repository's or package's top, else the folder holding the deck's folder."""
    walk = _TreeWalk(strict=strict)
    tree = walk.load_tree(path, role, project_root)
    walk.load.diag.raise_if_errors()
    assert tree is not None
    return tree


def as_tree(
    deck: str | Path | Deck | DeckTree,
    *,
    strict: bool = False,
    role: DeckRole = "root",
    project_root: ProjectRootSpec = None,
) -> DeckTree:
    """A deck tree from what the engine's callers may pass: a tree as it is, a lone deck
    as a tree of one, a path loaded as `role` (a persona as a scenario, a grader as a
    grader: their rules and defaults apply as under `[[scenarios]]` / `[[graders]]`),
    inside `project_root` (see `load_deck_tree`)."""
    if isinstance(deck, DeckTree | Deck):
        tree = (
            deck
            if isinstance(deck, DeckTree)
            else DeckTree(root=deck, decks={deck.path: deck}, entries=[], warnings=[])
        )
        if role == "grader" and not any(
            e.path == tree.root.path and e.role == "grader" for e in tree.entries
        ):
            # Loaded as something else (a root, a lone Deck): a grader still has to be a
            # compatible grader, with the error `gambit check --as grader` gives.
            load = Load(Diagnostics(strict=strict))
            _apply_role_rules(load, tree.root, "grader")
            load.diag.raise_if_errors()
        return tree
    return load_deck_tree(deck, strict=strict, role=role, project_root=project_root)


def load_deck(
    path: str | Path, *, strict: bool = False, project_root: ProjectRootSpec = None
) -> Deck:
    """Load a deck and its tree (so references are validated), returning the root deck."""
    return load_deck_tree(path, strict=strict, project_root=project_root).root


def check_deck_tree(
    path: str | Path,
    *,
    strict: bool = False,
    role: DeckRole = "root",
    import_modules: bool = True,
    project_root: ProjectRootSpec = None,
) -> tuple[DeckTree | None, Diagnostics]:
    """Load without raising: the tree (None when the root itself failed) and every problem.

    With `import_modules=False` no Python file is imported: a tree that would import one (a
    compute deck, an `execute` action, a `.py` schema) raises `DeckRunsCode` instead, so a
    caller can load it elsewhere (the simulator does, in a child process)."""
    walk = _TreeWalk(strict=strict, import_modules=import_modules)
    tree = walk.load_tree(path, role, project_root)
    return tree, walk.load.diag


def find_workspace_decks(folder: str | Path) -> list[Path]:
    """Root decks of a workspace folder: the folder's own deck, else each subfolder's.

    A deck folder holds `PROMPT.md` (or, for a Python compute deck, `deck.py`).
    """
    folder = Path(folder)
    own = folder_entrypoint(folder)
    return [own] if own is not None else subfolder_decks(folder)


def decks_below_the_listing(folder: str | Path, depth: int = 4) -> list[Path]:
    """Decks `find_workspace_decks` leaves out: those further down than one folder, under
    subfolders that are not decks themselves, to `depth` folders down (at most 20; hidden
    folders and node_modules left out). `gambit check` names them rather than pass them over."""
    found: list[Path] = []

    def walk(here: Path, level: int) -> None:
        if level > depth or len(found) >= 20:
            return
        for child in sorted(p for p in here.iterdir() if p.is_dir()):
            if child.name.startswith(".") or child.name == "node_modules":
                continue
            entry = folder_entrypoint(child)
            if entry is None:
                walk(child, level + 1)
            elif level > 1:
                found.append(entry)  # a deck folder's own subfolders are its parts

    folder = Path(folder)
    if folder_entrypoint(folder) is None:
        try:
            walk(folder, 1)
        except OSError:
            pass
    return found


class _TreeWalk:
    def __init__(self, *, strict: bool, import_modules: bool = True):
        self.load = Load(Diagnostics(strict=strict), import_modules=import_modules)
        self.decks: dict[str, Deck] = {}
        self.failed: set[str] = set()
        self.entries: list[DeckTreeEntry] = []
        self._seen_roles: set[tuple[str, DeckRole]] = set()

    def load_tree(
        self, path: str | Path, role: DeckRole = "root", project_root: ProjectRootSpec = None
    ) -> DeckTree | None:
        if project_root is None:
            project_root = default_project_root(path)
        if not isinstance(project_root, ProjectRoot):
            project_root = ProjectRoot(project_root)
        self.load.jail = Jail(self.load, project_root)
        root_file = root_deck_file(self.load, path)
        if root_file is None:
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
            _apply_role_rules(self.load, deck, role)
            queue.extend(_children(deck))
        _resolve_action_schemas(self.load, self.decks)
        root = self.decks.get(root_file)
        if root is None:
            return None
        return DeckTree(
            root=root,
            decks=self.decks,
            entries=self.entries,
            warnings=self.load.diag.warnings,
            project_root=self.load.jail.project,
        )

    def _load_file(self, file: str) -> Deck | None:
        if file in self.decks:
            return self.decks[file]
        if file in self.failed:
            return None
        deck = read_deck(self.load, file)
        if deck is None:
            self.failed.add(file)
        else:
            self.decks[file] = deck
        return deck


def _children(deck: Deck) -> Iterable[tuple[str, DeckRole]]:
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


def _apply_role_rules(load: Load, deck: Deck, role: DeckRole) -> None:
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
            if v is None and (deck.path, k) not in load.failed_schemas
        ]
        if missing:
            load.diag.deprecated(
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
        if value is None and (deck.path, key) not in load.failed_schemas:
            load.diag.error(
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
    if role == "grader" and (deck.context_schema or deck.response_schema) is not None:
        # Each declared schema is checked even when the other is missing, so every problem
        # is reported at once; the missing one stands in as its built-in default.
        context_problems, response_problems = grader_compatibility_problems(
            deck.context_schema or builtin_schema(GRADER_CONTEXT_SCHEMA_URIS[-1]),
            deck.response_schema or builtin_schema(GRADER_OUTPUT_SCHEMA_URI),
        )
        if deck.context_schema is None:
            context_problems = []
        if deck.response_schema is None:
            response_problems = []
        for key, problems, what, hint in (
            (
                "contextSchema",
                context_problems,
                "the built-in grader context schemas",
                "extend a gambit://schemas/graders/contexts/* schema and make added fields optional",
            ),
            (
                "responseSchema",
                response_problems,
                "the built-in grader output schema",
                "extend gambit://schemas/graders/grader_output.zod.ts and make added fields optional",
            ),
        ):
            for problem in problems:
                load.diag.error(
                    f"not compatible with {what}: {problem}", file=deck.path, key=key, hint=hint
                )


def _resolve_action_schemas(load: Load, decks: dict[str, Deck]) -> None:
    """Give every action its IO schemas (docs/decks.md, "Actions and their results").

    Path actions take them from the action deck; execute actions from the inline
    declaration, the module, or both, which must then match deeply.
    """
    for deck in list(decks.values()):
        for action in deck.actions:
            target = decks.get(action.target)
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
                        load.diag.error(
                            f"action {action.name!r}: inline {key} differs from {where}: {problem}",
                            file=action.declared_in,
                            key=f"actions[{action.name}].{key}",
                            hint="declare the schema in one place, or make both identical",
                        )
                if from_target is not None:
                    setattr(action, attr, from_target)
                elif inline is None and action.execute:
                    load.diag.error(
                        f"Action execute target must include contextSchema and responseSchema (missing {key})",
                        file=action.declared_in,
                        key=f"actions[{action.name}].{key}",
                        hint=f"declare {key} on the [[actions]] entry, or pass {attr}= to define_deck in {action.execute}",
                    )
