"""`gambit check DECK [--json] [--strict] [--providers]`, a stable interface (docs/decks.md,
"Checking decks").

`--providers` adds, for every model the deck tree uses, which provider serves it and whether
that provider is configured (no network access); the JSON object gains a `providers` key
only then, and a deck whose model list has no configured candidate is an error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.cli._project import allow_path_option, project_root_for
from gambit.core import Problem, check_deck_tree, decks_below_the_listing, find_workspace_decks
from gambit.env import env_flag


def check_report(
    target: Path,
    *,
    strict: bool,
    role: str = "root",
    providers: bool = False,
    env: Mapping[str, str] | None = None,
) -> dict:
    """The `--json` object: `{ok, errors, warnings, decks}` (plus `providers` when asked).

    A folder without its own PROMPT.md is a workspace: every deck folder directly inside it
    is checked as a root deck. With `providers`, `env` (default: `os.environ`) decides which
    providers are configured.
    """
    roots = find_workspace_decks(target) if target.is_dir() else [target]
    errors: list[Problem] = []
    warnings: list[Problem] = []
    decks: list[dict] = []
    seen: set[tuple[str, str]] = set()
    models_by_deck: dict[str, list[str]] = {}
    deeper = decks_below_the_listing(target) if target.is_dir() else []
    if target.is_dir() and not roots:
        errors.append(
            Problem(
                "no deck found: the folder has no PROMPT.md and no subfolder with one",
                file=str(target.resolve()),
                hint="pass a deck's PROMPT.md, or a folder of deck folders"
                + (
                    f" (decks lie deeper: {', '.join(_relative(str(d)) for d in deeper)})"
                    if deeper
                    else ""
                ),
            )
        )
    elif deeper:
        # A folder of decks is read one level down, as `gambit serve` lists it: say what that
        # leaves out rather than pass it over.
        warnings.extend(
            Problem(
                "not checked: this deck lies more than one folder down, where a folder of "
                "decks is not searched (nor listed by gambit serve)",
                file=str(deck),
                hint=f"check it by path: gambit check {_relative(str(deck))}",
                severity="warning",
            )
            for deck in deeper
        )
    _check_configs(roots, errors, warnings)
    for root in roots:
        tree, diag = check_deck_tree(
            root,
            strict=strict,
            role=role,  # type: ignore[arg-type]
            project_root=project_root_for(root),
        )
        _extend_new(errors, diag.errors)
        _extend_new(warnings, diag.warnings)
        if tree is not None:
            for entry in tree.entries:
                if (entry.path, entry.role) not in seen:
                    seen.add((entry.path, entry.role))
                    decks.append({"path": entry.path, "role": entry.role, "label": entry.label})
            for path, deck in tree.decks.items():
                if deck.model_params.models and path not in models_by_deck:
                    models_by_deck[path] = list(deck.model_params.models)
    report: dict[str, Any] = {}
    if providers:
        report["providers"] = provider_report(
            models_by_deck, os.environ if env is None else env, errors, warnings
        )
    return {
        "ok": not errors,
        "errors": [p.to_json() for p in errors],
        "warnings": [p.to_json() for p in warnings],
        "decks": decks,
        **report,
        "_problems": (errors, warnings),
    }


def _check_configs(roots: list[Path], errors: list[Problem], warnings: list[Problem]) -> None:
    """Each `gambit.toml` the decks would run with (the nearest above each), read as `gambit
    run` reads it: an error there fails every run, so it fails the check too."""
    from gambit.providers import ConfigError, find_config, load_config

    seen: set[str] = set()
    for root in roots:
        folder = Path(root).resolve().parent
        try:
            config = load_config(folder)
        except ConfigError as exc:
            path = str(find_config(folder) or "gambit.toml")
            message = str(exc).removeprefix(f"{path}: ")  # the file is the problem's own
            _extend_new(errors, [Problem(message, file=path)])
            continue
        where = str(config.path) if config.path else None
        if where is None or where in seen:
            continue
        seen.add(where)
        _extend_new(warnings, [_config_warning(m, where) for m in config.warnings])


def _config_warning(message: str, where: str | None) -> Problem:
    """A gambit.toml warning as a problem of that file (its message names the file too)."""
    if where:
        message = message.removeprefix(f"{where}: ")
    return Problem(message, file=where, severity="warning")


def _extend_new(problems: list[Problem], more: Iterable[Problem]) -> None:
    """Append each of `more` that `problems` does not hold yet. Looked up in a set: a
    mutated deck can have thousands of problems, and a list scan for each is quadratic."""
    seen = set(problems)
    for problem in more:
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)


def provider_report(
    models_by_deck: Mapping[str, list[str]],
    env: Mapping[str, str],
    errors: list[Problem],
    warnings: list[Problem],
) -> dict[str, Any]:
    """`{"models": [...], "decks": [...]}` for `--providers`; adds its problems to the lists.

    `models`: one entry per model (aliases and lists expanded; `describe_providers` fields
    plus `decks`, the deck paths that use it). `decks`: per deck that sets a model, the list
    as written, the candidate that would serve it (`model`, None when none can) and
    `available`. Each deck uses the `gambit.toml` found from its own folder.
    """
    from gambit.cli._common import without_foreign_base_urls
    from gambit.providers import ConfigError, describe_model_list, load_config

    models: dict[str, dict[str, Any]] = {}
    deck_rows: list[dict[str, Any]] = []
    for path, names in models_by_deck.items():
        try:
            # as a run reads it: a foreign gambit.toml's base_url is not where keys go
            config = without_foreign_base_urls(load_config(Path(path).parent))
        except ConfigError as exc:
            problem = Problem(str(exc), file=path, key="modelParams.model")
            if problem not in errors:
                errors.append(problem)
            continue
        for message in config.warnings:
            problem = _config_warning(message, str(config.path) if config.path else None)
            if problem not in warnings:
                warnings.append(problem)
        described = describe_model_list(names, env, config)
        for message in described["warnings"]:
            warnings.append(
                Problem(message, file=path, key="modelParams.model", severity="warning")
            )
        for candidate in described["candidates"]:
            entry = models.setdefault(candidate["model"], {**candidate, "decks": []})
            if path not in entry["decks"]:
                entry["decks"].append(path)
        deck_rows.append(
            {
                "path": path,
                "models": names,
                "model": described["model"],
                "available": described["available"],
            }
        )
        if not described["available"]:
            errors.append(
                Problem(
                    "no provider is configured for any model in the list; tried: "
                    + (described["tried"] or "nothing"),
                    file=path,
                    key="modelParams.model",
                    hint="set the variable named above, or change the model (the other "
                    "commands would answer with offline/demo; --providers asks for a real one)",
                )
            )
    return {"models": list(models.values()), "decks": deck_rows}


@click.command("check", context_settings=HELP_OPTIONS)
@click.argument("deck", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: {ok, errors, warnings, decks}."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Treat deprecated keys and URIs as errors (1.0 behaviour; also GAMBIT_STRICT=1).",
)
@click.option(
    "--providers",
    "with_providers",
    is_flag=True,
    help="Also report, per model the decks use, which provider serves it and whether it is "
    "configured (no network access; JSON: a `providers` key). A deck whose model list has no "
    "configured candidate is an error.",
)
@click.option(
    "--as",
    "role",
    type=click.Choice(["root", "action", "scenario", "grader"]),
    default="root",
    show_default=True,
    help="Check DECK in this role: `--as grader` applies the grader rules (schemas "
    "compatible with the built-in grader schemas) as `[[graders]]` would.",
)
@allow_path_option
def check_command(deck: Path, as_json: bool, strict: bool, with_providers: bool, role: str) -> None:
    """Load DECK and every deck it references, and report problems.

    DECK is a PROMPT.md, a Python compute deck (.py), a deck folder, or a folder of deck
    folders. Exits 0 when everything loads (warnings allowed), 1 on any error.

    Checking a deck runs its code: every Python file the decks name (a compute deck, an
    `execute` action, a `.py` schema) is imported, so its module-level code runs with your
    permissions, as `python FILE` would. Check only decks you would run.

    Every file a deck references must lie, symlinks followed, inside its project root: the
    nearest folder holding gambit.toml (else a repository or package top: .git,
    pyproject.toml, package.json, deno.json), else the current directory when it holds the
    deck, else the folder holding the deck's folder. Widen it with --allow-path or
    [project] allow_paths in gambit.toml; /proc, /sys, /dev and .gambit folders are never read.
    """
    strict = strict or env_flag(os.environ, "GAMBIT_STRICT")
    started = time.perf_counter()
    with deck_output_to_stderr():
        report = check_report(deck, strict=strict, providers=with_providers, role=role)
    elapsed_ms = (time.perf_counter() - started) * 1000
    errors, warnings = report.pop("_problems")
    if as_json:
        # Strict JSON: every value is a string, a boolean or a list of them (a compute deck's
        # label is checked to be a string), so a NaN here is a bug to see, not to print.
        click.echo(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        for entry in report["decks"]:
            label = f"  {entry['label']}" if entry["label"] else ""
            click.echo(f"{entry['role']:<8} {_relative(entry['path'])}{label}")
        if "providers" in report:
            for line in provider_lines(report["providers"]):
                click.echo(line)
        for problem in warnings:
            click.echo(click.style("warning: ", fg="yellow") + _render(problem), err=True)
        for problem in errors:
            click.echo(click.style("error: ", fg="red") + _render(problem), err=True)
        summary = f"{len(report['decks'])} decks, {len(errors)} errors, {len(warnings)} warnings ({elapsed_ms:.0f} ms)"
        click.echo(("ok: " if report["ok"] else "failed: ") + summary, err=not report["ok"])
    sys.exit(0 if report["ok"] else 1)


@contextmanager
def deck_output_to_stderr() -> Iterator[None]:
    """What decks print while they load goes to stderr, so stdout holds only check's own
    output (with --json, one JSON object).

    A compute module runs when it is imported, and may `print` or `os.write(1, ...)`; file
    descriptor 1 itself is pointed at stderr, so writes below `sys.stdout` are caught too.
    Buffered text is flushed before it is pointed back.
    """
    streams = [s for s in (sys.stdout, sys.__stdout__) if s is not None]
    for stream in streams:
        stream.flush()
    saved: int | None = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 (closed by the caller): Python's streams only
        if saved is not None:
            os.close(saved)
            saved = None
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        for stream in streams:
            try:
                stream.flush()
            except (OSError, ValueError):  # closed by a deck
                pass
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def provider_lines(providers: Mapping[str, Any]) -> list[str]:
    """One human line per model: `model    NAME  -> provider: status`."""
    lines = []
    for entry in providers["models"]:
        name = entry["model"] + (f" (alias {entry['alias']})" if entry.get("alias") else "")
        provider = entry["provider"] or "(no default provider)"
        if not entry["configured"]:
            status = f"not configured: {entry['reason']}"
        elif entry["offline"]:
            status = "offline (no network)"
        else:
            status = f"configured, {entry['baseUrl']}"
            if entry["provider"] == "ollama":
                status += " (whether the model is pulled is not checked)"
        lines.append(f"{'model':<8} {name}  -> {provider}: {status}")
    if not providers["models"]:
        lines.append(f"{'model':<8} (no deck sets [modelParams].model)")
    return lines


def _relative(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _render(problem: Problem) -> str:
    if problem.file:
        problem = Problem(
            problem.message,
            _relative(problem.file),
            problem.key,
            problem.hint,
            problem.severity,
            problem.line,
        )
    return problem.render()
