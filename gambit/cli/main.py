"""The `gambit` command.

Subcommands are imported when they run (their modules load the engine); `gambit --help`
lists them from the table below without importing any of them.

Start-up: while `main()` imports a command, Python's cyclic garbage collector is paused.
Importing the engine creates some fifty thousand objects the collector tracks, which live as
long as the process (modules, classes, pydantic schemas); the collector's passes over them
cost a one-turn `gambit run` about 15% of its time, with nothing to free. Once the command
is loaded those objects are frozen (`gc.freeze()`: later passes skip them, the one at exit
too) and the collector is back on for everything the command then does, deck code
included (docs/decisions.md, "Start-up"). So the run-like commands' modules import what
every run needs (the providers and their HTTP stack) when they load, not at first use.
"""

from __future__ import annotations

import gc
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
    "calibrate": (
        "gambit.cli._calibrate",
        "calibrate_command",
        "Pair each grader's scores in GRADES with human ratings and say how far to trust it.",
    ),
    "export": (
        "gambit.cli._export",
        "export_group",
        "Send a recorded trace elsewhere: `export otel FILE` to an OpenTelemetry collector.",
    ),
    "serve": (
        "gambit.cli._serve",
        "serve_command",
        "Serve the simulator for a deck or folder (default: this folder when it holds decks).",
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
        _loaded()
        return command

    def format_commands(self, ctx: click.Context, formatter: Any) -> None:
        rows = [(name, short) for name, (_, _, short) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=HELP_OPTIONS)
@click.version_option(__version__, prog_name="gambit")
def cli() -> None:
    """Gambit: write LLM agents as decks, run them, test them with scenarios and grade them."""


# True while main() holds the collector paused (never in a process that imports `cli`, such
# as the tests: only the console script pauses it).
_collector_paused = False


def _loaded() -> None:
    """The command is imported: freeze what start-up allocated and resume collecting."""
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        gc.enable()


def main() -> None:
    """The console script `gambit`."""
    global _collector_paused
    if gc.isenabled():
        gc.disable()
        _collector_paused = True
    try:
        cli()
    finally:
        _loaded()  # no command was loaded (`gambit --help`, a usage error)
