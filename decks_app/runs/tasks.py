"""The django.tasks task of the simulator: execute one queued run.

Every `Run` created `queued` is enqueued as `execute_run(run_id)` (decks_app.runs.worker). Whichever
backend thread picks it up claims the run and executes it on its process's run loop; status,
cancellation, heartbeats and "interrupted" stay on the `Run` row, the task only delivers it.
"""

from __future__ import annotations

from django.tasks import task


@task
def execute_run(run_id: str) -> str:
    """Claim the run (queued -> running) and execute it; its final status, or "skipped" when
    it was no longer queued (cancelled, or claimed by another worker)."""
    from decks_app.runs import worker

    return worker.execute(run_id)
