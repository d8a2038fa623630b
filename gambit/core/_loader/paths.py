"""Path rules: what a path in a deck may name, and how a refused path is reported.

- A root deck is a file, or a folder holding `PROMPT.md` (or `deck.py`).
- A deck path (`[[actions]].path`, `[[scenarios]]`/`[[graders]]`, handlers) names a
  `PROMPT.md`: a folder is an error whose hint names the file to point at, a legacy
  `*.deck.md` loads (its deprecation is reported on the deck itself), `gambit://decks/...`
  names a bundled stdlib deck, and TypeScript/JavaScript is an error saying to port it.
- An `execute` target is a `.py` module.
- A path the system refuses (NUL, too long, unreadable, a loop of links) is a problem naming
  it, never an exception.
- Every file a deck references, and the root deck itself, must resolve (symlinks followed)
  inside the project root or a folder allowed beside it (`ProjectRoot`, `Jail`); bundled
  `gambit://` files are allowed; nothing under /proc, /sys or /dev ever (docs/decks.md,
  "Trust and limits").
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._permissions import NEVER_TOUCHED, STATE_FOLDER
from .load import Load

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

STDLIB_DECK_PACKAGE = "gambit.core.decks"  # gambit://decks/... (the agent bridge decks)
CODE_SUFFIXES = (".ts", ".tsx", ".js", ".mjs", ".cjs", ".mts")
PROJECT_FILE = "gambit.toml"  # its folder is the default project root
# Without a gambit.toml, the nearest folder holding one of these is the project's top.
PROJECT_MARKERS = (".git", ".hg", "pyproject.toml", "package.json", "deno.json", "deno.jsonc")
# Never read, whatever the root or the allowed folders: what no built-in tool touches either
# (the kernel's views under /proc, /sys and /dev, and the simulator's and CLI's `.gambit`).
NEVER_READ = NEVER_TOUCHED
# Where bundled gambit:// files live (the stdlib decks; snippets are read as resources).
BUNDLED_FOLDER = Path(__file__).resolve().parent.parent / "decks"
WIDEN_HINT = (
    "keep referenced files inside the project, or allow the folder with "
    f"[project] allow_paths in {PROJECT_FILE}"
)
NEVER_HINT = (
    "point at a file inside the project; /proc, /sys and /dev are never read, even when allowed"
)


class ProjectRoot:
    """The folder every file of a deck tree must lie in, symlinks followed, and the folders
    allowed beside it (`allow`, relative ones against `path`).

    The `[project] allow_paths` of `path/gambit.toml` are allowed too. Callers pass one to
    the loader and the runtime as `project_root=`; without it the loader picks
    `default_project_root` (docs/decks.md, "What is read").
    """

    __slots__ = ("allow", "path")

    def __init__(self, path: str | os.PathLike[str], allow: Iterable[str | os.PathLike[str]] = ()):
        self.path = Path(path)
        self.allow = tuple(Path(a) for a in allow)

    def __repr__(self) -> str:
        allow = f", allow={[str(a) for a in self.allow]}" if self.allow else ""
        return f"ProjectRoot({str(self.path)!r}{allow})"


def project_top(root_deck: str | os.PathLike[str]) -> Path | None:
    """The top of the project a root deck lies in: the nearest folder at or above it holding
    gambit.toml, else the nearest holding a repository or a package manifest (.git,
    pyproject.toml, package.json, deno.json...); None when there is neither."""
    deck = Path(root_deck)
    return _nearest(deck, (PROJECT_FILE,)) or _nearest(deck, PROJECT_MARKERS)


def default_project_root(root_deck: str | os.PathLike[str]) -> Path:
    """The project root when the caller names none: `project_top`, else the folder holding
    the root deck's folder (so decks side by side in a folder can reference each other and a
    snippets/ folder beside them). No current directory: the engine reads none."""
    return project_top(root_deck) or deck_folder(root_deck).parent


def deck_folder(root_deck: str | os.PathLike[str]) -> Path:
    """The folder of a root deck given as a file, or the deck folder itself, resolved."""
    deck = _real(Path(root_deck))
    return deck if deck.is_dir() else deck.parent


def _nearest(start: Path, names: tuple[str, ...]) -> Path | None:
    here = deck_folder(start)
    for folder in (here, *here.parents):
        if any((folder / name).exists() for name in names):
            return folder
    return None


class Jail:
    """A `ProjectRoot` made concrete for one load: the resolved root and allowed folders
    (symlinks followed), with problems in gambit.toml's `[project]` reported."""

    __slots__ = ("allowed", "project", "root")

    def __init__(self, load: Load, project: ProjectRoot):
        self.root = _real(project.path)
        allowed = [_real(self.root / a) for a in project.allow]
        allowed += _allow_paths_setting(load, self.root)
        self.allowed = tuple(dict.fromkeys(a for a in allowed if a != self.root))
        # What a load started at run time (a compute deck's spawn_and_wait) is given again.
        self.project = ProjectRoot(self.root, self.allowed)

    def refusal(self, path: Path) -> tuple[str, str] | None:
        """Why `path` (resolved) may not be read, and the fix; None when it may."""
        inside = any(
            path == folder or folder in path.parents
            for folder in (self.root, *self.allowed, BUNDLED_FOLDER)
        )
        for never in NEVER_READ:
            if path == never or never in path.parents:
                where = (
                    f"inside the project root {self.root} but"
                    if inside
                    else f"outside the project root {self.root} and"
                )
                return f"{where} under {never}, which Gambit never reads", NEVER_HINT
        if STATE_FOLDER in path.parts:
            # The simulator's secret key and database, and saved sessions: an embed or a
            # schema there would send them to a model (docs/decks.md, "What the built-in
            # tools never touch", says the same of the tools).
            return (
                f"inside a {STATE_FOLDER} folder, where the simulator and the CLI keep their "
                "state, which decks never read",
                "point at a file of the deck's own",
            )
        if inside:
            return None
        return f"outside the project root {self.root}", WIDEN_HINT


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def _allow_paths_setting(load: Load, root: Path) -> list[Path]:
    """The folders `[project] allow_paths` in root/gambit.toml allows (relative to root)."""
    config = root / PROJECT_FILE
    if not config.is_file():
        return []
    import tomli  # only for a project with a gambit.toml

    try:
        data = tomli.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomli.TOMLDecodeError) as exc:
        load.diag.error(
            f"cannot read the project settings: {exc}",
            file=str(config),
            hint="fix the file: it is TOML, and its [project] table holds allow_paths",
        )
        return []
    project = data.get("project", {})
    entries = project.get("allow_paths", []) if isinstance(project, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, str) and e for e in entries):
        load.diag.error(
            "must be a list of folder paths",
            file=str(config),
            key="project.allow_paths",
            hint='e.g. allow_paths = ["../snippets"] (relative to this file\'s folder)',
        )
        return []
    return [_real(root / e) for e in entries]


def bundled_files(package: str) -> Traversable:
    """The files bundled in `package` (snippets, stdlib decks). importlib.resources is
    imported here, on first use, not with the loader: most decks embed nothing bundled, and
    the import costs every command's start-up a few milliseconds."""
    from importlib import resources

    return resources.files(package)


def folder_entrypoint(folder: Path) -> Path | None:
    for name in ("PROMPT.md", "deck.py"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def subfolder_decks(folder: Path) -> list[Path]:
    """The decks of `folder`'s subfolders, hidden ones left out, in name order: a folder of
    decks as the workspace listing reads it (`find_workspace_decks`)."""
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [e for e in (folder_entrypoint(c) for c in children) if e is not None]


def root_deck_file(load: Load, path: str | Path) -> str | None:
    """The absolute file of the root deck `path` names (a file, or a deck folder); it must
    lie inside the load's jail like every file it references."""
    root_path = Path(path)
    if root_path.is_dir():
        entry = folder_entrypoint(root_path)
        if entry is None:
            inside = subfolder_decks(root_path)[:5]  # as given: the hint can be pasted
            hint = (
                f"pass one of the decks in it: {', '.join(str(e) for e in inside)}"
                if inside
                else "pass a deck's PROMPT.md (or deck.py), or the folder holding one"
            )
            load.diag.error(
                "this folder has no PROMPT.md or deck.py",
                file=str(root_path.resolve()),
                hint=hint,
            )
            return None
        root_path = entry
    root_file = str(root_path.resolve())
    if not root_path.is_file():
        load.diag.error("deck file not found", file=root_file, hint="check the path")
        return None
    refusal = load.jail.refusal(Path(root_file)) if load.jail is not None else None
    if refusal is not None:
        load.diag.error(
            f"the deck {str(path)!r} resolves to {root_file}, {refusal[0]}",
            file=root_file,
            hint=refusal[1],
        )
        return None
    return root_file


def local(load: Load, raw: str, file: str, key: str | None) -> Path | None:
    """`raw` resolved against the declaring file's folder; None (with an error) if impossible."""
    try:
        if "\x00" in raw:
            raise ValueError("it contains a NUL character")
        return (Path(file).parent / raw).resolve()
    except (ValueError, OSError) as exc:
        load.diag.error(f"{raw!r} is not a usable path: {exc}", file=file, key=key)
        return None


def referenced(load: Load, raw: str, file: str, key: str | None) -> Path | None:
    """The file a deck references: `raw` resolved against the declaring file's folder,
    symlinks followed, and inside the load's jail; None (with an error naming the path, the
    root and the fix) if not."""
    target = local(load, raw, file, key)
    if target is None or load.jail is None:
        return target
    refusal = load.jail.refusal(target)
    if refusal is None:
        return target
    load.diag.error(
        f"{raw!r} resolves to {target}, {refusal[0]}", file=file, key=key, hint=refusal[1]
    )
    return None


def read_text(load: Load, file: str) -> str | None:
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        load.diag.error("file not found", file=file, hint="check the path")
    except IsADirectoryError:
        load.diag.error("is a folder, not a file", file=file, hint=f"point at {file}/PROMPT.md")
    except UnicodeDecodeError as exc:
        load.diag.error(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=file,
            hint="save the file as UTF-8",
        )
    except OSError as exc:
        load.diag.error(f"cannot read the file: {exc.strerror}", file=file)
    return None


def report_unreadable(load: Load, exc: OSError, file: str) -> None:
    """A path the deck names that the system refuses to look at (too long, not readable, a
    loop of links): the loader reports, it never raises."""
    name = exc.filename if isinstance(exc.filename, str) else file
    shown = name if len(name) <= 120 else name[:100] + "…" + name[-16:]
    load.diag.error(
        f"cannot read {shown}: {exc.strerror or exc}",
        file=file,
        hint="check the paths this deck names (length, permissions, links)",
    )


def resolve_deck_path(
    load: Load, raw: Any, file: str, key: str, *, allow_python: bool = False
) -> str | None:
    if not isinstance(raw, str) or not raw.strip():
        load.diag.error("must be a path to a PROMPT.md", file=file, key=key)
        return None
    raw = raw.strip()
    if raw.startswith("gambit://"):
        return _resolve_stdlib_deck(load, raw, file, key)
    target = referenced(load, raw, file, key)
    if target is None:
        return None
    if target.is_dir():
        inner = target / "PROMPT.md"
        hint = f'point at the deck file: "{raw.rstrip("/")}/PROMPT.md"'
        if not inner.is_file():
            hint += f" (and create {inner})"
        load.diag.error(
            f"{raw!r} is a folder; paths must name a PROMPT.md", file=file, key=key, hint=hint
        )
        return None
    if not target.is_file():
        _missing(load, raw, target, file, key)
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
        load.diag.error(
            f"{raw!r} is a TypeScript/JavaScript deck, which Gambit for Python cannot run",
            file=file,
            key=key,
            hint=f"port it to Python: {py_name} exporting deck = gambit.define_deck(run=...), then use {use}",
        )
        return None
    load.diag.error(
        f"{raw!r} must point at a PROMPT.md",
        file=file,
        key=key,
        hint=f"move the deck into its own folder as {target.parent / target.stem}/PROMPT.md",
    )
    return None


def _resolve_stdlib_deck(load: Load, raw: str, file: str, key: str) -> str | None:
    rel = raw[len("gambit://") :]
    if not rel.startswith("decks/"):
        load.diag.error(
            f"{raw!r} is not a deck URI",
            file=file,
            key=key,
            hint="stdlib decks are gambit://decks/.../PROMPT.md",
        )
        return None
    if not rel.endswith("/PROMPT.md"):
        load.diag.deprecated(
            f"{raw!r} omits the PROMPT.md suffix",
            file=file,
            key=key,
            hint=f"use {raw.rstrip('/')}/PROMPT.md",
        )
        rel = rel.rstrip("/") + "/PROMPT.md"
    bundled = bundled_files(STDLIB_DECK_PACKAGE).joinpath(rel.removeprefix("decks/"))
    if bundled.is_file():
        return str(Path(str(bundled)).resolve())
    load.diag.error(
        f"stdlib deck {'gambit://' + rel} is not bundled with Gambit for Python",
        file=file,
        key=key,
        hint="the bundled stdlib decks are gambit://decks/openai/codex-sdk/PROMPT.md and gambit://decks/anthropic/agent-sdk/PROMPT.md",
    )
    return None


def resolve_execute_path(load: Load, raw: str, file: str, key: str) -> str | None:
    raw = raw.strip()
    target = referenced(load, raw, file, key)
    if target is None:
        return None
    if target.suffix in CODE_SUFFIXES:
        load.diag.error(
            f"{raw!r} is a TypeScript/JavaScript module, which Gambit for Python cannot run",
            file=file,
            key=key,
            hint=f"port it to Python: {target.with_suffix('.py').name} exporting deck = gambit.define_deck(run=...)",
        )
        return None
    if target.suffix != ".py":
        load.diag.error(
            f"{raw!r} must be a Python module (.py)",
            file=file,
            key=key,
            hint='execute = "./actions/compute.py"',
        )
        return None
    if not target.is_file():
        _missing(load, raw, target, file, key)
        return None
    return str(target)


def _missing(load: Load, raw: str, target: Path, file: str, key: str) -> None:
    """A path that names no file: the error, always the same words."""
    load.diag.error(
        f"{raw!r} does not exist ({target})",
        file=file,
        key=key,
        hint="check the path; it is relative to this file",
    )
