"""The `gambit` command.

Subcommands are imported when they run (their modules load the engine); `gambit --help`
lists them from the table below without importing any of them.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from gambit import __version__
from gambit.cli import HELP_OPTIONS

# name -> (module, attribute, one-line help shown by `gambit --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": (
        "gambit.cli._check",
        "check_command",
        "Load DECK and every deck it references, and report problems.",
    ),
    "run": (
        "gambit.cli._run",
        "run_command",
        "Run DECK once and print its output (JSON when it is not a string).",
    ),
    "repl": (
        "gambit.cli._run",
        "repl_command",
        "Talk to DECK turn by turn on stdin; replies stream as they arrive.",
    ),
    "scenario": (
        "gambit.cli._scenario",
        "scenario_command",
        "Let a synthetic user (a scenario deck) talk to ROOT, then grade the conversation.",
    ),
    "grade": (
        "gambit.cli._scenario",
        "grade_command",
        "Grade the conversation in --state with GRADER and record the result in the state.",
    ),
    "verify": (
        "gambit.cli._verify",
        "verify_command",
        "Run every scenario --runs times, grade each run --repeats times, and report the metrics.",
    ),
    "serve": (
        "gambit.cli._serve",
        "serve_command",
        "Serve the simulator for a deck or folder (default: the bundled examples).",
    ),
    "worker": (
        "gambit.cli._serve",
        "worker_command",
        "Execute queued simulator runs (the distributed profile's worker processes).",
    ),
    "keys": (
        "gambit.cli._serve",
        "keys_command",
        "Manage the API keys of /v1/* (create NAME, list, revoke NAME).",
    ),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        rows = [(name, short) for name, (_, _, short) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=HELP_OPTIONS)
@click.version_option(__version__, prog_name="gambit")
def cli() -> None:
    """Gambit: write LLM agents as decks, run them, test them with scenarios and grade them."""


def main() -> None:
    cli()
