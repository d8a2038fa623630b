"""`gambit check --json` prints one strict JSON object on stdout, whatever the decks do while
they load: a compute module that prints when imported, a label that is not a string."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GAMBIT = str(Path(sys.executable).parent / "gambit")


def check_json(deck: Path) -> tuple[dict, subprocess.CompletedProcess]:
    result = subprocess.run(
        [GAMBIT, "check", str(deck), "--json"], capture_output=True, text=True, timeout=60
    )

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(result.stdout, parse_constant=refuse), result


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_what_a_deck_prints_at_import_goes_to_stderr(tmp_path: Path):
    deck = write(
        tmp_path / "deck.py",
        """
        import os
        import sys
        import gambit

        print("from print")
        os.write(1, b"from os.write\\n")
        sys.__stdout__.write("from sys.__stdout__\\n")
        deck = gambit.define_deck(run=lambda ctx: "x", label="loud")
        """,
    )
    report, result = check_json(deck)
    assert result.returncode == 0, result.stderr
    assert report["ok"] is True and report["decks"][0]["label"] == "loud"
    for line in ("from print", "from os.write", "from sys.__stdout__"):
        assert line in result.stderr


def test_what_a_deck_prints_at_import_stays_off_stdout_without_json(tmp_path: Path):
    deck = write(
        tmp_path / "deck.py",
        """
        import os
        import gambit

        os.write(1, b"from os.write\\n")
        deck = gambit.define_deck(run=lambda ctx: "x")
        """,
    )
    result = subprocess.run(
        [GAMBIT, "check", str(deck)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "from os.write" not in result.stdout and "from os.write" in result.stderr


@pytest.mark.parametrize(
    ("label", "message"),
    [("b'x'", "must be a string, not bytes"), ("float('nan')", "must be a string, not nan")],
)
def test_a_compute_deck_label_that_is_not_a_string_is_an_error_in_valid_json(
    tmp_path: Path, label: str, message: str
):
    deck = write(
        tmp_path / "deck.py",
        f"""
        from gambit import DeckDefinition

        deck = DeckDefinition(run=lambda ctx: "x", label={label})
        """,
    )
    report, result = check_json(deck)
    assert result.returncode == 1
    assert report["ok"] is False and report["decks"] == []
    (error,) = report["errors"]
    assert error["file"] == str(deck.resolve())
    assert error["message"].startswith(f"deck.label: {message} (fix: ")


def test_a_compute_deck_whose_run_is_not_callable_fails_check(tmp_path: Path):
    deck = write(
        tmp_path / "deck.py", "from gambit import DeckDefinition\n\ndeck = DeckDefinition(run=5)\n"
    )
    report, result = check_json(deck)
    assert result.returncode == 1
    (error,) = report["errors"]
    assert error["message"].startswith("deck.run: must be a function run(ctx), not 5")
