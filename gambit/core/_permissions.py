"""Permissions: what the built-in file and exec tools may touch (a deck's `[permissions]`).

An effective permission set is layered: a root deck starts from what the
host grants (the caller's `workspace` permissions, and the session's), then intersects its own
`[permissions]` declaration; every deck below the root (an action, a deck spawned by compute
code, a handler) starts from its parent's effective set and intersects its own declaration
and, for an action, the `permissions` of the `[[actions]]` entry that calls it. A child can
therefore only narrow what its parent allows, whatever started it (docs/decisions.md).

Deny by default (a deliberate difference from the TypeScript Gambit, which starts a root run
from "allow all"): a deck that declares no `[permissions]` gets no built-in tool. See
docs/decisions.md.

Intersection is of exact normalised grants (`/a` and `/a/b` intersect to nothing), and a path
is allowed when its canonical form (symlinks followed, for a missing path the nearest
existing ancestor) equals a canonical grant or lies under one, so neither `..` nor a symlink
leads out of a grant.

Some paths no grant reaches (`off_limits`): /proc, /sys and /dev, and any `.gambit` folder
(docs/decks.md, "What the built-in tools never touch").
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._deck import DeckRef, Permissions


@dataclass(frozen=True)
class Scope:
    """One permission kind: everything (`all`), or exactly these values."""

    all: bool = False
    values: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.all and not self.values

    def intersect(self, other: Scope) -> Scope:
        if self.all:
            return other
        if other.all:
            return self
        return Scope(False, self.values & other.values)

    def to_json(self) -> bool | list[str]:
        return True if self.all else sorted(self.values) if self.values else False


@dataclass(frozen=True)
class RunScope:
    """What `run` (the exec built-in tool) may start: everything, or these paths and commands."""

    all: bool = False
    paths: frozenset[str] = frozenset()
    commands: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.all and not self.paths and not self.commands

    def intersect(self, other: RunScope) -> RunScope:
        if self.all:
            return other
        if other.all:
            return self
        return RunScope(False, self.paths & other.paths, self.commands & other.commands)

    def to_json(self) -> bool | dict[str, list[str]]:
        if self.all:
            return True
        if self.empty:
            return False
        return {"paths": sorted(self.paths), "commands": sorted(self.commands)}


ALL = Scope(all=True)
NONE = Scope()

# Never read or written by a built-in tool, whatever the grants (docs/decks.md, "What the
# built-in tools never touch"): the kernel's views of processes (/proc/self/environ holds
# every API key), of the system and of devices, as the loader refuses them...
NEVER_TOUCHED = (Path("/proc"), Path("/sys"), Path("/dev"))
# ...and any folder of this name: the simulator's state (its secret key, its database with
# every conversation, verify sessions) and the CLI's saved sessions live in `.gambit`.
STATE_FOLDER = ".gambit"


@dataclass(frozen=True)
class PermissionSet:
    """The effective permissions of one deck: a scope for each of read, write, net, env and run,
    relative paths resolved from `base_dir`."""

    base_dir: str
    read: Scope = NONE
    write: Scope = NONE
    net: Scope = NONE
    env: Scope = NONE
    run: RunScope = RunScope()

    @classmethod
    def allow_all(cls, base_dir: str | Path) -> PermissionSet:
        return cls(str(base_dir), ALL, ALL, ALL, ALL, RunScope(all=True))

    @classmethod
    def deny_all(cls, base_dir: str | Path) -> PermissionSet:
        return cls(str(base_dir))

    @classmethod
    def from_permissions(cls, perms: Permissions, base_dir: str | Path) -> PermissionSet:
        """A `[permissions]` table; relative path grants resolve against `base_dir`."""
        base = Path(base_dir)

        def scope(value: bool | list[str], paths: bool) -> Scope:
            if value is True:
                return ALL
            if not value:
                return NONE
            return Scope(False, frozenset(_normal(base, v) if paths else v.strip() for v in value))

        run = perms.run
        if run is True:
            run_scope = RunScope(all=True)
        elif isinstance(run, dict):
            run_scope = RunScope(
                False,
                frozenset(_normal(base, p) for p in run.get("paths", [])),
                frozenset(c.strip() for c in run.get("commands", [])),
            )
        else:
            run_scope = RunScope()
        return cls(
            str(base),
            scope(perms.read, True),
            scope(perms.write, True),
            scope(perms.net, False),
            scope(perms.env, False),
            run_scope,
        )

    def rebased(self, base_dir: str | Path) -> PermissionSet:
        """The same grants (they are absolute) seen from another deck's folder."""
        return PermissionSet(str(base_dir), self.read, self.write, self.net, self.env, self.run)

    def intersect(self, other: PermissionSet) -> PermissionSet:
        return PermissionSet(
            self.base_dir,
            self.read.intersect(other.read),
            self.write.intersect(other.write),
            self.net.intersect(other.net),
            self.env.intersect(other.env),
            self.run.intersect(other.run),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "baseDir": self.base_dir,
            "read": self.read.to_json(),
            "write": self.write.to_json(),
            "net": self.net.to_json(),
            "env": self.env.to_json(),
            "run": self.run.to_json(),
        }

    # ---- checks ---------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """`path` against this set's base folder, normalised (not yet canonical)."""
        return Path(os.path.normpath(Path(self.base_dir) / path))

    def can_read(self, path: str | Path) -> bool:
        resolved = self.resolve(str(path))
        return off_limits(resolved) is None and _path_allowed(self.read, resolved)

    def can_write(self, path: str | Path) -> bool:
        resolved = self.resolve(str(path))
        return off_limits(resolved) is None and _path_allowed(self.write, resolved)

    def can_run_command(self, command: str) -> bool:
        return self.run.all or command in self.run.commands

    def can_run_path(self, path: str | Path) -> bool:
        resolved = self.resolve(str(path))
        if off_limits(resolved) is not None:
            return False
        if self.run.all:
            return True
        if canonical_path(resolved) != resolved:
            return False  # a symlink (or a path through one) never matches a run.paths grant
        return any(
            canonical_path(Path(grant)) == Path(grant) and Path(grant) == resolved
            for grant in self.run.paths
        )

    def can_read_env(self, name: str) -> bool:
        return self.env.all or name in self.env.values


@dataclass(frozen=True)
class EntryPermissions:
    """The `permissions` of the `[[scenarios]]` or `[[graders]]` entry a root deck runs as,
    with the folder its relative paths resolve from (the deck that declares the entry)."""

    permissions: Permissions
    base_dir: str


def entry_permissions(
    refs: Iterable[DeckRef], deck_path: str | Path, declared_in: str | Path
) -> EntryPermissions | None:
    """The entry of `refs` (a deck's `scenarios` or `graders`) naming `deck_path`, when it
    declares `permissions`: a scenario or grader started from its entry is narrowed by them,
    as an action is by its `[[actions]]` entry. None when no entry names it or it declares
    none. `declared_in` is the file that declares the entries."""
    target = os.path.realpath(deck_path)
    for ref in refs:
        if ref.permissions is not None and os.path.realpath(ref.path) == target:
            return EntryPermissions(ref.permissions, str(Path(declared_in).parent))
    return None


@dataclass(frozen=True)
class Layer:
    """One step of the narrowing (host or parent, workspace, declaration, reference, session),
    for the trace."""

    name: str
    base_dir: str
    requested: dict[str, Any] | None
    effective: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "baseDir": self.base_dir,
            "requested": self.requested,
            "effective": self.effective,
        }


@dataclass(frozen=True)
class EffectivePermissions:
    """The permissions a deck runs with, and the layers that narrowed them to that."""

    permissions: PermissionSet
    layers: tuple[Layer, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """The trace form: `{baseDir, effective, layers}`."""
        return {
            "baseDir": self.permissions.base_dir,
            "effective": self.permissions.to_json(),
            "layers": [layer.to_json() for layer in self.layers],
        }


def resolve_effective(
    base_dir: str | Path,
    *,
    parent: PermissionSet | None = None,
    workspace: PermissionSet | None = None,
    declaration: Permissions | None = None,
    reference: Permissions | None = None,
    reference_base: str | Path | None = None,
    session: PermissionSet | None = None,
    declares: bool = True,
) -> EffectivePermissions:
    """Layer the grants for one deck, recording each layer.

    A root (no `parent`) starts from the host (allow all), then the `workspace` and
    `session` grants the caller passes; a missing declaration denies everything. A deck that
    cannot declare `[permissions]` (`declares=False`: a compute deck) has no declaration
    layer: it passes on what it was given, narrowed by the `reference`.
    """
    base = str(base_dir)
    layers: list[Layer] = []
    if parent is not None:
        current = parent.rebased(base)
        layers.append(Layer("parent", base, None, current.to_json()))
    else:
        current = PermissionSet.allow_all(base)
        layers.append(Layer("host", base, None, current.to_json()))
        if workspace is not None:
            current = current.intersect(workspace)
            layers.append(
                Layer("workspace", workspace.base_dir, workspace.to_json(), current.to_json())
            )
    if declares:
        declared = (
            PermissionSet.from_permissions(declaration, base)
            if declaration is not None
            else PermissionSet.deny_all(base)
        )
        current = current.intersect(declared)
        layers.append(
            Layer(
                "declaration",
                base,
                declaration.to_json() if declaration is not None else None,
                current.to_json(),
            )
        )
    if reference is not None:
        ref_set = PermissionSet.from_permissions(reference, reference_base or base)
        current = current.intersect(ref_set)
        layers.append(Layer("reference", ref_set.base_dir, reference.to_json(), current.to_json()))
    if parent is None and session is not None:
        current = current.intersect(session)
        layers.append(Layer("session", session.base_dir, session.to_json(), current.to_json()))
    return EffectivePermissions(current, tuple(layers))


def grants(
    base_dir: str | Path,
    *,
    read: bool | Iterable[str] = False,
    write: bool | Iterable[str] = False,
    net: bool | Iterable[str] = False,
    env: bool | Iterable[str] = False,
    run: bool | dict[str, Iterable[str]] = False,
) -> PermissionSet:
    """A permission set from plain values, as a caller gives workspace or session grants."""

    def listed(value: Any) -> bool | list[str]:
        return value if isinstance(value, bool) else list(value)

    run_value: bool | dict[str, list[str]] = (
        run
        if isinstance(run, bool)
        else {"paths": list(run.get("paths", [])), "commands": list(run.get("commands", []))}
    )
    return PermissionSet.from_permissions(
        Permissions(
            read=listed(read), write=listed(write), net=listed(net), env=listed(env), run=run_value
        ),
        base_dir,
    )


def _normal(base: Path, value: str) -> str:
    return os.path.normpath(base / value.strip())


def canonical_path(path: Path) -> Path:
    """Symlinks followed; for a missing path, its nearest existing ancestor's canonical form
    with the rest appended. This is the form every grant check compares."""
    missing: list[str] = []
    current = path
    while not current.exists() and current != current.parent:
        if current.is_symlink():  # a dangling link: where it points is what counts
            break
        missing.append(current.name)
        current = current.parent
    real = Path(os.path.realpath(current))
    for name in reversed(missing):
        real = real / name
    return real


def off_limits(path: Path) -> str | None:
    """Why no built-in tool may touch `path` (absolute, normalised), whatever the grants: the
    rule, in words; None when no rule keeps it out. The path is checked as given and in its
    canonical form (a link into /proc, as /dev/fd is, or to a `.gambit` folder counts), and so
    is its folder's canonical form: an entry of /proc/<pid>/fd resolves to the file it has
    open, or to no file at all."""
    for form in (path, canonical_path(path.parent), canonical_path(path)):
        for never in NEVER_TOUCHED:
            if form == never or never in form.parents:
                return (
                    "built-in tools never read or write under /proc, /sys or /dev, whatever "
                    "the deck's [permissions] grant"
                )
        if STATE_FOLDER in form.parts:
            return (
                f"built-in tools never read or write inside a {STATE_FOLDER} folder (where the "
                "simulator and the CLI keep their state), whatever the deck's [permissions] grant"
            )
    return None


def _path_allowed(scope: Scope, path: Path) -> bool:
    if scope.all:
        return True
    target = canonical_path(path)
    for grant in scope.values:
        root = canonical_path(Path(grant))
        if target == root or root in target.parents:
            return True
    return False
