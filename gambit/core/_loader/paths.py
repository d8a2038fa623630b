"""Path rules: what a path in a deck may name, and how a refused path is reported.

- A root deck is a file, or a folder holding `PROMPT.md` (or `deck.py`).
- A deck path (`[[actions]].path`, `[[scenarios]]`/`[[graders]]`, handlers) names a
  `PROMPT.md`: a folder is an error whose hint names the file to point at, a legacy
  `*.deck.md` loads (its deprecation is reported on the deck itself), `gambit://decks/...`
  names a bundled stdlib deck, and TypeScript/JavaScript is an error saying to port it.
- An `execute` target is a `.py` module.
- A path the system refuses (NUL, too long, unreadable, a loop of links) is a problem naming
  it, never an exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .load import Load

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

STDLIB_DECK_PACKAGE = "gambit.core.decks"  # gambit://decks/... (the agent bridge decks)
CODE_SUFFIXES = (".ts", ".tsx", ".js", ".mjs", ".cjs", ".mts")


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


def root_deck_file(load: Load, path: str | Path) -> str | None:
    """The absolute file of the root deck `path` names (a file, or a deck folder)."""
    root_path = Path(path)
    if root_path.is_dir():
        entry = folder_entrypoint(root_path)
        if entry is None:
            load.diag.error(
                "this folder has no PROMPT.md",
                file=str(root_path.resolve()),
                hint=f"pass the deck's file, e.g. {root_path / 'PROMPT.md'}",
            )
            return None
        root_path = entry
    root_file = str(root_path.resolve())
    if not root_path.is_file():
        load.diag.error("deck file not found", file=root_file, hint="check the path")
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
    target = local(load, raw, file, key)
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
    target = local(load, raw, file, key)
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
