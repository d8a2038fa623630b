"""`gambit check DECK [--json] [--strict]` (DESIGN §9, a stable interface)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from gambit.core import Problem, check_deck_tree, find_workspace_decks


def check_report(target: Path, *, strict: bool) -> dict:
    """The `--json` object: `{ok, errors, warnings, decks}`.

    A folder without its own PROMPT.md is a workspace: every deck folder directly inside it
    is checked as a root deck.
    """
    roots = find_workspace_decks(target) if target.is_dir() else [target]
    errors: list[Problem] = []
    warnings: list[Problem] = []
    decks: list[dict] = []
    seen: set[tuple[str, str]] = set()
    if target.is_dir() and not roots:
        errors.append(
            Problem(
                "no deck found: the folder has no PROMPT.md and no subfolder with one",
                file=str(target.resolve()),
                hint="pass a deck's PROMPT.md, or a folder of deck folders",
            )
        )
    for root in roots:
        tree, diag = check_deck_tree(root, strict=strict)
        errors.extend(p for p in diag.errors if p not in errors)
        warnings.extend(p for p in diag.warnings if p not in warnings)
        if tree is not None:
            for entry in tree.entries:
                if (entry.path, entry.role) not in seen:
                    seen.add((entry.path, entry.role))
                    decks.append({"path": entry.path, "role": entry.role, "label": entry.label})
    return {
        "ok": not errors,
        "errors": [p.to_json() for p in errors],
        "warnings": [p.to_json() for p in warnings],
        "decks": decks,
        "_problems": (errors, warnings),
    }


@click.command("check")
@click.argument("deck", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: {ok, errors, warnings, decks}."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Treat deprecated keys and URIs as errors (1.0 behaviour; also GAMBIT_STRICT=1).",
)
def check_command(deck: Path, as_json: bool, strict: bool) -> None:
    """Load DECK and every deck it references, and report problems.

    DECK is a PROMPT.md, a Python compute deck (.py), a deck folder, or a folder of deck
    folders. Exits 0 when everything loads (warnings allowed), 1 on any error.
    """
    strict = strict or os.environ.get("GAMBIT_STRICT") == "1"
    started = time.perf_counter()
    report = check_report(deck, strict=strict)
    elapsed_ms = (time.perf_counter() - started) * 1000
    errors, warnings = report.pop("_problems")
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for entry in report["decks"]:
            label = f"  {entry['label']}" if entry["label"] else ""
            click.echo(f"{entry['role']:<8} {_relative(entry['path'])}{label}")
        for problem in warnings:
            click.echo(click.style("warning: ", fg="yellow") + _render(problem), err=True)
        for problem in errors:
            click.echo(click.style("error: ", fg="red") + _render(problem), err=True)
        summary = f"{len(report['decks'])} decks, {len(errors)} errors, {len(warnings)} warnings ({elapsed_ms:.0f} ms)"
        click.echo(("ok: " if report["ok"] else "failed: ") + summary, err=not report["ok"])
    sys.exit(0 if report["ok"] else 1)


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
