"""docs/cli.md is generated from --help and must stay in sync."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_up_to_date():
    spec = importlib.util.spec_from_file_location(
        "generate_cli_reference", ROOT / "docs" / "generate_cli_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    actual = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert actual == expected, (
        "docs/cli.md is stale: run .venv/bin/python docs/generate_cli_reference.py > docs/cli.md"
    )


def test_the_lazy_command_table_matches_each_commands_own_help():
    """`gambit --help` lists commands from a static table (so it imports no engine); each
    entry must stay the first sentence of that command's docstring."""
    import importlib

    from gambit.cli.main import COMMANDS

    for name, (module, attribute, short) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        first = " ".join(command.help.split("\n\n")[0].split())
        assert command.name == name
        assert first.startswith(short.rstrip(".")), (name, first, short)


def test_gambit_help_imports_no_engine():
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from gambit.cli.main import cli; "
        "CliRunner().invoke(cli, ['--help']); "
        "print(sorted(m for m in sys.modules if m.startswith(('gambit.core', 'httpx', 'pydantic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
