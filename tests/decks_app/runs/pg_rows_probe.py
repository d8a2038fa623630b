"""Run by test_rows.py in a process of its own, against a fresh PostgreSQL database
(DATABASE_URL): the worker's one-statement read, lock, save and append on PostgreSQL's SQL
path.
Prints one JSON object of what it saw."""

from __future__ import annotations

import json
import os

import django
import psycopg

from tests.support.rows import columns


def _lockable(sql: str, key: str) -> bool:
    """Whether a second connection can lock the row now (NOWAIT: an error when it is held)."""
    with psycopg.connect(os.environ["DATABASE_URL"]) as other:
        try:
            other.execute(f"{sql} FOR UPDATE NOWAIT", [key])
            return True
        except psycopg.errors.LockNotAvailable:
            return False


def main() -> None:
    # Django's modules are imported once it is set up, for the DATABASE_URL given.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import IntegrityError, connection, transaction
    from django.test.utils import CaptureQueriesContext

    from decks_app.models import Run, Session, TraceEvent
    from decks_app.runs import rows
    from decks_app.runs.events import append_events
    from decks_app.sessions.actions import create_session, send_message
    from decks_app.workspaces.served import current_workspace

    call_command("migrate", verbosity=0)
    out: dict = {"vendor": connection.vendor}
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    session.messages = [{"role": "user", "content": "earlier ✓"}]
    session.save()
    queued = send_message(session, "where is my order?")
    orm = Run.objects.select_related("session__workspace").get(pk=queued.pk)
    with CaptureQueriesContext(connection) as queries:
        run = rows.read_run(queued.pk, status="queued", workspace=True)
        workspace = run.session.workspace
    out["queries"] = len(queries)
    out["same_run"] = columns(run) == columns(orm)
    out["same_session"] = columns(run.session) == columns(orm.session)
    out["same_workspace"] = columns(workspace) == columns(orm.session.workspace)
    out["wrong_status"] = rows.read_run(queued.pk, status="running")

    run_sql = "SELECT id FROM decks_app_run WHERE id = %s"
    session_sql = "SELECT id FROM decks_app_session WHERE id = %s"
    with transaction.atomic():
        rows.read_run(queued.pk, lock=True)
        out["run_locked"] = not _lockable(run_sql, queued.pk)
        out["session_locked"] = not _lockable(session_sql, session.pk)
    free = _lockable(run_sql, queued.pk) and _lockable(session_sql, session.pk)
    out["after_commit"] = "free" if free else "still locked"

    events = [
        {"type": "run.start", "ts": 1700000000001, "runId": queued.pk},
        {"type": "response.output_text.delta", "delta": "héllo 👋", "nested": {"a": [1, None]}},
        {"ts": 5},
        {"type": "x" * 100, "ts": "7"},
    ]
    append_events(queued.pk, session.pk, 3, events)
    stored = list(TraceEvent.objects.filter(run_id=queued.pk).order_by("id"))
    out["seqs"] = [e.seq for e in stored]
    out["ids_rise"] = [e.id for e in stored] == sorted(e.id for e in stored)
    out["types"] = [e.type for e in stored]
    out["ts"] = [e.ts for e in stored]
    out["payloads_equal"] = [e.payload for e in stored] == events
    try:
        with transaction.atomic():
            append_events(queued.pk, session.pk, 6, [{"type": "again"}])
        out["duplicate_seq"] = "written"
    except IntegrityError:
        out["duplicate_seq"] = "IntegrityError"
    append_events(queued.pk, session.pk, 7, [])
    out["empty_batch_rows"] = TraceEvent.objects.filter(run_id=queued.pk).count()
    run = rows.read_run(queued.pk)
    stamp = run.session.updated_at
    run.status, run.usage, run.turn_base = "completed", {"é": [1, None]}, {"messages": 2}
    run.session.messages = [{"role": "user", "content": "✓ 👋"}]
    rows.save_fields(run, ["status", "usage", "turn_base"])
    rows.save_fields(run.session, ["messages", "updated_at"])
    stored = Run.objects.select_related("session").get(pk=queued.pk)
    out["saved_fields"] = {
        "same_run": columns(stored) == columns(run),
        "messages": stored.session.messages == run.session.messages,
        "stamped": stored.session.updated_at == run.session.updated_at > stamp,
    }
    # A conditional update (a claim; a task row marked done) writes what the ORM's `update`
    # writes, a task status (a TextChoices member) and JSON included, and matches only the
    # row as expected.
    from django.tasks import TaskResultStatus
    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    twin = send_message(create_session(current_workspace(), "support/PROMPT.md"), "twin")
    now = timezone.now()
    values = {"status": "running", "worker_id": "w ✓", "started_at": now, "turn_base": {"m": 1}}
    claimed = rows.update_if(Run, twin.pk, {"status": "queued"}, values)
    again = rows.update_if(Run, twin.pk, {"status": "queued"}, {"worker_id": "another"})
    stored = Run.objects.get(pk=twin.pk)
    task = DBTaskResult.objects.order_by("enqueued_at").first()
    DBTaskResult.objects.filter(pk=task.pk).update(status=TaskResultStatus.RUNNING)
    done = {
        "status": TaskResultStatus.SUCCESSFUL,
        "return_value": "completed",
        "finished_at": now,
        "exception_class_path": "",
        "traceback": "",
    }
    marked = rows.update_if(DBTaskResult, task.pk, {"status": TaskResultStatus.RUNNING}, done)
    task.refresh_from_db()
    out["update_if"] = {
        "changed": [claimed, again],
        "run": [getattr(stored, name) == value for name, value in values.items()],
        "task_marked": marked,
        "task": [
            task.status == "SUCCESSFUL",
            task.return_value == "completed",
            task.finished_at == now,
        ],
    }
    # A statement run five times on this kept connection is prepared (simulator.profiles):
    # PostgreSQL then holds it for the connection, and the same read still gives the row.
    for _ in range(5):
        again = rows.read_run(queued.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        out["prepared"] = [row[0] for row in cursor.fetchall()]
    out["read_after_prepared"] = columns(again) == columns(rows.read_run(queued.pk))

    # The writes that end a run, sent together: one statement, every write stored, each
    # count handed to its `then`; a save that matches no row raises, and nothing of that
    # statement stays.
    third = rows.read_run(send_message(session, "third").pk)
    third.status, third.error = "completed", "✓ done"
    third.session.messages = [{"role": "assistant", "content": "ok 👋"}]
    counts: list[int] = []
    with transaction.atomic():
        writes = rows.Writes(connection.alias)
        append_events(third.pk, session.pk, 1, [{"type": "run.end", "ts": 9}], writes=writes)
        writes.save_fields(third, ["status", "error"])
        writes.save_fields(third.session, ["messages", "updated_at"])
        writes.update_if(Run, twin.pk, {"status": "running"}, {"error": "twin ✓"}, counts.append)
        writes.update_if(Run, twin.pk, {"status": "queued"}, {"error": "no"}, counts.append)
        unsent = TraceEvent.objects.filter(run_id=third.pk).count()
        with CaptureQueriesContext(connection) as sent:
            writes.send()
    stored = Run.objects.select_related("session").get(pk=third.pk)
    out["writes"] = {
        "unsent_events": unsent,
        "statements": [q["sql"].split(" AS (")[0] for q in sent.captured_queries],
        "events": list(TraceEvent.objects.filter(run_id=third.pk).values_list("seq", "type")),
        "run": [stored.status, stored.error],
        "messages": stored.session.messages == third.session.messages,
        "twin": Run.objects.get(pk=twin.pk).error,
        "counts": counts,
    }
    gone = rows.read_run(send_message(session, "fourth").pk)
    try:
        with transaction.atomic():
            writes = rows.Writes(connection.alias)
            writes.update_if(Run, twin.pk, {"status": "running"}, {"error": "rolled back"})
            writes.save_fields(gone, ["status"])
            Run.objects.filter(pk=gone.pk).delete()
            writes.send()
        out["writes"]["gone"] = "saved"
    except Run.DoesNotExist as exc:
        out["writes"]["gone"] = str(exc) == f"Run {gone.pk} is gone"
    out["writes"]["twin_after_gone"] = Run.objects.get(pk=twin.pk).error

    # A run's claim in one statement: what the read and the conditional update wrote and
    # read before, its turn base as `state.turn_base` computes it, whatever the session holds.
    from decks_app.runs import queue
    from decks_app.runs.state import turn_base

    claims = []
    for messages, items, refs in (
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], None, [1]),
        (None, [], None),
        ([], [{"type": "message"}] * 3, [1, 2]),
    ):
        fresh = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
        fresh.messages, fresh.items, fresh.message_refs = messages, items, refs
        fresh.state_version = 3
        fresh.save()
        queued = send_message(fresh, "claim me")
        expected = turn_base(Run.objects.select_related("session").get(pk=queued.pk).session, 0)
        with CaptureQueriesContext(connection) as queries:
            claimed = queue.claim_run(queued.pk, "w" * 120)
        stored = Run.objects.select_related("session__workspace").get(pk=queued.pk)
        claims.append(
            {
                "queries": len(queries),
                "first_start": claimed.first_start,
                "turn_base": claimed.run.turn_base == expected == stored.turn_base,
                "same_run": columns(claimed.run) == columns(stored),
                "same_session": columns(claimed.run.session) == columns(stored.session),
                "same_workspace": columns(claimed.run.session.workspace)
                == columns(stored.session.workspace),
                "running": [stored.status, len(stored.worker_id)],
                "beat_at_start": stored.started_at == stored.heartbeat_at is not None,
                "again": queue.claim_run(queued.pk, "another"),
            }
        )
    # Queued again (as a retried run is): its turn base stays the one of its first start.
    Run.objects.filter(pk=queued.pk).update(status="queued")
    Session.objects.filter(pk=fresh.pk).update(messages=[{"role": "user", "content": "later"}])
    again = queue.claim_run(queued.pk, "w2")
    out["claims"] = claims
    out["claimed_again"] = {
        "first_start": again.first_start,
        "turn_base_kept": again.run.turn_base == stored.turn_base,
        "worker": again.run.worker_id,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
