"""The README's "Using it" commands, run as written from a fresh copy of `examples/`, in order
(the grade lines read the session.json the run line wrote), with no API key: each exits as its
comment says (`exit 1` when it says so, else 0) and prints what the comment quotes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GAMBIT = str(Path(sys.executable).parent / "gambit")


def readme_commands() -> list[tuple[list[str], str]]:
    """(argv after `gambit`, comment) for each command of the section's first sh block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Using it\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for logical in block.replace("\\\n", " ").splitlines():
        command, _, comment = logical.partition("  # ")
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/gambit", logical
        commands.append((argv[1:], comment.strip()))
    return commands


def test_every_using_it_command_does_what_the_readme_says(tmp_path: Path):
    shutil.copytree(
        ROOT / "examples",
        tmp_path / "examples",
        ignore=shutil.ignore_patterns(".gambit", "__pycache__"),
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL") and k != "GAMBIT_API_KEYS"
    }
    commands = readme_commands()
    assert len(commands) >= 9
    exits = []
    for argv, comment in commands:
        result = subprocess.run(
            [GAMBIT, *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        expected = 1 if "exit 1" in comment else 0
        said = result.stdout + result.stderr
        assert result.returncode == expected, (argv, result.stderr)
        assert "Traceback" not in said, said
        printed = re.match(r"prints (.+?) \(", comment)
        if printed:
            assert printed.group(1) in result.stdout, (argv, result.stdout)
        for quoted in re.findall(r'"([^"]+)"', comment):
            assert quoted in said, (argv, quoted, said)
        exits.append(result.returncode)
    assert exits.count(1) == 1  # exactly the gate labelled as failing
    assert (tmp_path / "verify.xml").is_file() and (tmp_path / "grades.csv").is_file()
