"""Progress of long CLI work (`gambit verify`, `gambit scenario --runs N`) on stderr.

On a terminal: a rich progress bar per phase (scenario runs, grades), redrawn in place. In CI
(the `CI` environment variable set, as CI services set it) or when stderr is not a terminal (a
pipe, a log file): plain lines, one each time a phase passes another tenth of its total and
when it ends, since a redrawn bar becomes a pile of control codes in a log. `--quiet`: none.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import click

from gambit.env import env_flag

ProgressMode = Literal["bar", "lines", "off"]

PHASES = (("run", "scenario runs"), ("grade", "grades"))


def in_ci(env: Mapping[str, str]) -> bool:
    """`CI` is set to something other than empty, 0 or false (GitHub, GitLab and most CI
    services set CI=true)."""
    return env_flag(env, "CI")


def progress_mode(
    *, quiet: bool = False, env: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> ProgressMode:
    if quiet:
        return "off"
    stream = sys.stderr if stream is None else stream
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return "bar" if terminal and not in_ci(os.environ if env is None else env) else "lines"


class ProgressDisplay:
    """Shows the `VerifyProgress` that `run_verify` passes to `on_progress` (totals and
    counts per phase) as it changes, in the given mode; a context manager (the bar is drawn
    between enter and exit)."""

    def __init__(self, mode: ProgressMode):
        self.mode = mode
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}
        self.shown: dict[str, int] = {}  # lines mode: the count last printed per phase

    def __enter__(self) -> ProgressDisplay:
        if self.mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                console=Console(stderr=True),
                transient=False,
            )
            self.progress.__enter__()
            for phase, title in PHASES:
                self.tasks[phase] = self.progress.add_task(title, total=None, detail="")
        return self

    def update(self, state: Any) -> None:
        if self.mode == "bar":
            self._draw(state)
        elif self.mode == "lines":
            self._print(state)

    def _draw(self, state: Any) -> None:
        for phase, task in self.tasks.items():
            counts = state.counts[phase]
            self.progress.update(
                task,
                total=state.totals[phase],
                completed=counts["completed"] + counts["failed"],
                detail=f"running {counts['running']}, failed {counts['failed']}",
            )

    def _print(self, state: Any) -> None:
        for phase, title in PHASES:
            total = state.totals[phase]
            counts = state.counts[phase]
            done = counts["completed"] + counts["failed"]
            last = self.shown.get(phase, 0)
            if not total or done == last:
                continue
            step = max(1, -(-total // 10))  # a line per tenth, rounded up
            if done == total or done // step > last // step:
                self.shown[phase] = done
                click.echo(f"{title}: {done}/{total} done ({counts['failed']} failed)", err=True)

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)
