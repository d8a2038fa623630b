"""The queue's part of a run: claiming it, its heartbeat, Stop, and marking runs whose
process stopped as interrupted. Whatever the kind: the queue knows no feature."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from django.db import connections, router, transaction
from django.utils import timezone

from decks_app.models import Run, Session
from decks_app.runs import registry, rows
from decks_app.runs.recovery import INTERRUPTED, recover_interrupted_turn
from decks_app.runs.state import turn_base

# A running run whose heartbeat is older than this is taken for dead (its worker stopped).
STALE_AFTER_SECONDS = float(os.environ.get("GAMBIT_STALE_AFTER_SECONDS", "60"))
# A live run proves it is alive well within that time.
HEARTBEAT_SECONDS = min(5.0, STALE_AFTER_SECONDS / 4)


@dataclass(frozen=True)
class ClaimedRun:
    """A run this worker claimed, as read when claiming it (`executor.execute_run` takes it
    as it is). `first_start`: its turn base was written by the claim; nothing else of the
    run is written yet."""

    run: Run
    first_start: bool


def claim_run(run_id: str, worker_id: str) -> ClaimedRun | None:
    """Queued -> running for this worker: the claimed run, with its session and workspace
    loaded and its turn base written; None when the run is no longer queued (cancelled, or
    claimed already: a run executes once however often its task is delivered).

    One statement on PostgreSQL (`rows.claim_queued_run`). Elsewhere two: the run is read
    first, then claimed by an update that only a queued run matches, which also writes where
    its turn starts (the session cannot change turns meanwhile: it has one active run at
    most, this one)."""
    worker_id = worker_id[:100]
    if connections[router.db_for_write(Run)].vendor == "postgresql":
        done = rows.claim_queued_run(run_id, worker_id, timezone.now())
        return None if done is None else ClaimedRun(*done)
    claimed = rows.read_run(run_id, status="queued", workspace=True)
    if claimed is None:
        return None
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": "running",
        "worker_id": worker_id,
        "started_at": now,
        "heartbeat_at": now,
    }
    if claimed.turn_base is None:  # a run's first start: nothing of it is written yet
        fields["turn_base"] = turn_base(claimed.session, 0)
    if not rows.update_if(Run, run_id, {"status": "queued"}, fields):
        return None
    for name, value in fields.items():
        setattr(claimed, name, value)
    return ClaimedRun(claimed, first_start="turn_base" in fields)


def claim_next_run(worker_id: str) -> str | None:
    """Claim the oldest queued run, whatever its task (tests and tools drive runs with it)."""
    for run_id in (
        Run.objects.filter(status="queued").order_by("created_at").values_list("pk", flat=True)[:20]
    ):
        if claim_run(run_id, worker_id):
            return run_id
    return None


def cancel_requested(run_id: str) -> bool:
    """Stop asked for, or the run is no longer `running` (another process ended it)."""
    row = Run.objects.filter(pk=run_id).values("cancel_requested", "status").first()
    return row is None or row["cancel_requested"] or row["status"] != "running"


def heartbeat(run_id: str) -> None:
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now())


def mark_run_interrupted(run_id: str) -> bool:
    """One running run whose process can no longer finish it becomes interrupted."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status="running").first()
        if run is None:
            return False
        session = Session.objects.select_for_update().get(pk=run.session_id)
        run.status, run.error, run.finished_at = "interrupted", INTERRUPTED, timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        recover_interrupted_turn(run, session)
        session.save()
    return True


def mark_interrupted(*, stale_only: bool) -> list[str]:
    """Runs left `running` by a stopped process become `interrupted` (with a reason), and
    their turn is recovered into the conversation (`recover_interrupted_turn`).

    `stale_only`: only those whose worker has not sent a heartbeat for a while (safe while
    other workers are alive, in the distributed profile); otherwise every running run (the
    embedded profile's startup, where no other process runs them).
    """
    qs = Run.objects.filter(status="running")
    if stale_only:
        # A kind that sends no heartbeat (an /v1/responses call lives in the web process
        # that answers it) is ended only by a server start-up, when no process is alive.
        qs = qs.exclude(kind__in=registry.names(heartbeats=False)).filter(
            heartbeat_at__lt=timezone.now() - dt.timedelta(seconds=STALE_AFTER_SECONDS)
        )
    done = []
    for run_id in list(qs.values_list("id", flat=True)):
        if mark_run_interrupted(run_id):
            done.append(run_id)
    return done
