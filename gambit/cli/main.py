"""The `gambit` command."""

from __future__ import annotations

import click

from gambit import __version__

from ._check import check_command
from ._run import repl_command, run_command
from ._scenario import grade_command, scenario_command
from ._serve import serve_command, worker_command
from ._verify import verify_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gambit")
def cli() -> None:
    """Gambit: write LLM agents as decks, run them, test them with scenarios and grade them."""


for command in (
    check_command,
    run_command,
    repl_command,
    scenario_command,
    grade_command,
    verify_command,
    serve_command,
    worker_command,
):
    cli.add_command(command)


def main() -> None:
    cli()
