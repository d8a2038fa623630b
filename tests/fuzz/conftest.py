"""The fuzz run's own figures, after Hypothesis's statistics: how many cases were timed
against the budget and the slowest of them (tests/fuzz/budget.py)."""

from __future__ import annotations

from typing import Any

from .budget import BUDGET_ENFORCED, CASE_BUDGET_S, measured


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not measured.cases:
        return
    terminalreporter.write_line(
        f"fuzz budget: {measured.cases} cases timed; slowest {measured.cpu:.3f} s of CPU "
        f"(budget {CASE_BUDGET_S:g} s{'' if BUDGET_ENFORCED else ', enforced by ./dev fuzz'}): "
        f"{measured.cpu_case}"
    )
    terminalreporter.write_line(
        f"fuzz budget: slowest by the clock {measured.clock:.3f} s: {measured.clock_case}"
    )
