"""On/off environment variables are read one way (`gambit.env`): GAMBIT_STRICT=yes was
ignored while CI=yes counted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gambit.env import env_flag, is_on

GAMBIT = str(Path(sys.executable).parent / "gambit")


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " yes "])
def test_these_turn_a_setting_on(value):
    assert is_on(value) and env_flag({"X": value}, "X")


@pytest.mark.parametrize("value", [None, "", "0", "false", "No", "off", " "])
def test_these_leave_it_off(value):
    assert not is_on(value)
    assert not env_flag({} if value is None else {"X": value}, "X")


def test_gambit_strict_yes_makes_a_deprecation_an_error(tmp_path):
    deck = tmp_path / "hello.deck.md"  # the deprecated *.deck.md form
    deck.write_text('+++\nlabel = "hi"\n+++\nHi.\n')
    env = {k: v for k, v in os.environ.items() if k != "GAMBIT_STRICT"}

    def check(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [GAMBIT, "check", str(deck)], capture_output=True, text=True,
            env={**env, **extra}, cwd=tmp_path, timeout=60,
        )  # fmt: skip

    assert check().returncode == 0
    assert check(GAMBIT_STRICT="yes").returncode == 1
    assert check(GAMBIT_STRICT="no").returncode == 0
