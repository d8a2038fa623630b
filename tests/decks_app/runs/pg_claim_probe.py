"""Run by test_slots.py in a process of its own, against a fresh PostgreSQL database
(DATABASE_URL): a slot's one-statement claim (`slots.claim_next_task`) on PostgreSQL's SQL
path, beside django-tasks-db's own order and claim.
Prints one JSON object of what it saw."""

from __future__ import annotations

import datetime
import json
import os
import threading

import django
import psycopg

from tests.support.rows import columns


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import close_old_connections, connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    from decks_app.runs import tasks
    from decks_app.runs.slots import claim_next_task

    call_command("migrate", verbosity=0)
    out: dict = {"vendor": connection.vendor}

    def enqueue(name: str, **using) -> str:
        return tasks.execute_run.using(**using).enqueue(name).id

    # Enqueued in this order; the backend's order is priority, then run_after, then age.
    first = enqueue("first")
    urgent = enqueue("urgent", priority=10)
    later = enqueue("later", run_after=timezone.now() + datetime.timedelta(hours=1))
    # A queue the backend is not configured for cannot be enqueued to: moved there.
    DBTaskResult.objects.filter(pk=enqueue("elsewhere")).update(queue_name="other")
    second = enqueue("second")
    DBTaskResult.objects.filter(pk=second).update(worker_ids=["an earlier worker"])
    out["backends_order"] = [
        str(pk)
        for pk in DBTaskResult.objects.ready()
        .filter(backend_name="default", queue_name__in=["default"])
        .values_list("pk", flat=True)
    ]
    out["expected_order"] = [urgent, first, second]
    claimed = []
    with CaptureQueriesContext(connection) as queries:
        row = claim_next_task("default", ["default"], "probe/0")
    out["queries_per_claim"] = len(queries)
    while row is not None:
        stored = DBTaskResult.objects.get(pk=row.pk)
        claimed.append(
            {
                "id": str(row.pk),
                "as_stored": columns(row) == columns(stored),
                "status": stored.status,
                "started": stored.started_at is not None,
                "worker_ids": stored.worker_ids,
                "args": row.task_result.args,
            }
        )
        row = claim_next_task("default", ["default"], "probe/0")
    out["claimed"] = claimed
    out["later_still_ready"] = DBTaskResult.objects.get(pk=later).status == "READY"
    out["other_queue"] = [str(r.pk) for r in [claim_next_task("default", ["other"], "p/1")] if r]

    # A row another transaction holds is skipped, not waited for.
    held, free = enqueue("held"), enqueue("free")
    with psycopg.connect(os.environ["DATABASE_URL"]) as other:
        other.execute(
            f"SELECT id FROM {DBTaskResult._meta.db_table} WHERE id = %s FOR UPDATE", [held]
        )
        skipped = claim_next_task("default", ["default"], "probe/0")
        out["skipped_held"] = [str(skipped.pk) if skipped else None, free]
    out["held_after"] = str(claim_next_task("default", ["default"], "probe/0").pk) == held

    # Eight slots claiming at once from 40 tasks: each task once.
    many = {enqueue(f"many-{i}") for i in range(40)}
    taken: list[str] = []

    def slot(index: int) -> None:
        try:
            while (row := claim_next_task("default", ["default"], f"probe/{index}")) is not None:
                taken.append(str(row.pk))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=slot, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    out["concurrent"] = {
        "taken": len(taken),
        "distinct": len(set(taken)),
        "all": set(taken) == many,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
