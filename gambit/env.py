"""Reading the on/off environment variables (`GAMBIT_STRICT`, `GAMBIT_REQUIRE_PROVIDER`,
`GAMBIT_CHAT_FALLBACK`, `GAMBIT_CHAT_COMPLETIONS`, `GAMBIT_DEBUG`, `CI`) one way everywhere.

A variable is on when it is set to anything but empty, `0`, `false`, `no` or `off` (any
case), as CI services set `CI=true`: `GAMBIT_STRICT=yes` was ignored while `CI=yes` counted.
"""

from __future__ import annotations

from collections.abc import Mapping

OFF = frozenset({"", "0", "false", "no", "off"})


def is_on(value: str | None) -> bool:
    """Whether an environment variable's value turns its setting on."""
    return (value or "").strip().lower() not in OFF


def env_flag(env: Mapping[str, str], name: str) -> bool:
    """Whether `name` is on in `env`."""
    return is_on(env.get(name))
