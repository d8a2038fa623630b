"""A Verify batch's progress (`batch_table.progress`): parts that add up, no early guess."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from decks_app.grading.batch_table import progress
from decks_app.models import Run

SETTINGS = {"runs": 6, "scenarios": ["s"], "repeats": 2, "graders": ["g"]}


def _run(seconds_ago: float = 4.0) -> Run:
    return Run(status="running", started_at=timezone.now() - dt.timedelta(seconds=seconds_ago))


def test_runs_saved_ahead_of_the_live_counts_leave_running_and_queued():
    # The page said "1 of 4 done (0 completed, 0 failed, 1 running, 3 queued)": a run saved
    # before the live counts were written again counted as done but as nothing else.
    live = {"run": {"total": 6, "completed": 0, "failed": 0, "running": 3, "queued": 3}}
    p = progress(_run(), SETTINGS, live, saved=(1, 0))
    run = p["run"]
    assert (run["done"], run["completed"], run["running"], run["queued"]) == (1, 1, 2, 3)
    assert run["completed"] + run["failed"] + run["running"] + run["queued"] == run["total"]
    many = progress(_run(), SETTINGS, live, saved=(4, 0))["run"]
    assert (many["completed"], many["running"], many["queued"]) == (4, 0, 2)


def test_no_time_left_is_guessed_before_a_tenth_of_the_work_is_done():
    live = {"run": {"total": 6, "completed": 1, "running": 3, "queued": 2}}
    assert progress(_run(), SETTINGS, live)["secondsLeft"] is None  # 1 of 18 done
    live = {"run": {"total": 6, "completed": 2, "running": 3, "queued": 1}}
    assert progress(_run(4.0), SETTINGS, live)["secondsLeft"] == 32  # 2 of 18 in 4 s
