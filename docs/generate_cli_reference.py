"""Regenerate docs/cli.md from the commands' own --help (so the reference cannot drift).

.venv/bin/python docs/generate_cli_reference.py > docs/cli.md
"""

from __future__ import annotations

import click
from click.testing import CliRunner

from gambit.cli.main import cli

HEADER = """# The `gambit` command

Generated from `gambit --help` by `docs/generate_cli_reference.py`; a test fails when it is
out of date. Exit codes: 0 on success; 1 with a one-line reason on stderr when the command
fails (a deck that does not load, a failed run, a missed gate); 2 when the command line itself
is wrong (an unknown option, a value out of range), with the usage and the reason on stderr.
"""


def render() -> str:
    runner = CliRunner()
    parts = [HEADER]
    top = runner.invoke(cli, ["--help"], prog_name="gambit", terminal_width=100)
    parts.append(f"```\n{top.output.rstrip()}\n```\n")
    assert isinstance(cli, click.Group)
    # The group loads its commands lazily: ask it for the names, not `cli.commands`.
    for name in sorted(cli.list_commands(click.Context(cli))):
        result = runner.invoke(cli, [name, "--help"], prog_name="gambit", terminal_width=100)
        parts.append(f"## gambit {name}\n\n```\n{result.output.rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
