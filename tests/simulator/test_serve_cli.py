"""The click commands behind `gambit serve` and `gambit worker`."""

import subprocess
import sys

from click.testing import CliRunner

from gambit.cli._serve import serve_command, worker_command


def test_the_commands_document_their_options():
    out = CliRunner().invoke(serve_command, ["--help"]).output
    assert "DECK_OR_FOLDER" in out and "--host" in out and "127.0.0.1" in out and "--port" in out
    out = CliRunner().invoke(worker_command, ["--help"]).output
    assert "--slots" in out and "--burst" in out


def test_importing_the_cli_does_not_import_django():
    code = "import sys, gambit.cli._serve; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
