"""The worker's one-statement reads, saves, updates and appends (`decks_app.runs.rows.read_run`,
`rows.save_fields`, `rows.update_if`, `events.append_events`) give what the ORM gives: on
SQLite here, and on the real PostgreSQL (127.0.0.1:5432), where they take their own SQL
path, in a process of its own (`pg_rows_probe`)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from decks_app.models import Run, TraceEvent
from decks_app.runs import rows
from decks_app.runs.events import append_events
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace
from tests.support.postgres import run_probe
from tests.support.rows import columns

pytestmark = pytest.mark.django_db(transaction=True)


def _queued_run() -> Run:
    session = create_session(current_workspace(), "support/PROMPT.md", model="offline/echo")
    session.messages = [{"role": "user", "content": "earlier ✓"}]
    session.save()
    return send_message(session, "where is my order?")


def test_read_run_gives_the_orms_run_session_and_workspace_in_one_query():
    queued = _queued_run()
    orm = Run.objects.select_related("session__workspace").get(pk=queued.pk)
    with CaptureQueriesContext(connection) as queries:
        run = rows.read_run(queued.pk, status="queued", workspace=True)
        assert run is not None
        workspace = run.session.workspace  # loaded with it: no second query
    assert len(queries) == 1
    assert columns(run) == columns(orm)
    assert columns(run.session) == columns(orm.session)
    assert columns(workspace) == columns(orm.session.workspace)
    assert run._state.adding is False and run._state.db == "default"
    assert run.session.messages == [{"role": "user", "content": "earlier ✓"}]


def test_read_run_is_none_for_another_status_or_no_such_run():
    queued = _queued_run()
    assert rows.read_run(queued.pk, status="running") is None
    assert rows.read_run("run-0000000000000000") is None
    with transaction.atomic():
        locked = rows.read_run(queued.pk, lock=True)
    assert locked is not None and locked.session_id == queued.session_id


def test_a_read_run_saves_like_an_orm_run():
    run = rows.read_run(_queued_run().pk, status="queued")
    assert run is not None
    run.status, run.error = "failed", "because"
    run.save(update_fields=["status", "error"])
    assert Run.objects.values_list("status", "error").get(pk=run.pk) == ("failed", "because")


def test_save_fields_writes_what_an_orm_save_of_those_fields_writes():
    run = rows.read_run(_queued_run().pk, status="queued")
    assert run is not None
    session, before = run.session, run.session.updated_at
    run.status, run.error, run.usage, run.cost = (
        "completed",
        "",
        {"totalTokens": 11, "é": [1]},
        None,
    )
    run.turn_base = {"messages": 2, "checkpointSeq": 4}
    session.messages = [{"role": "user", "content": "✓ 👋"}]
    session.deck_label = "not written"  # not among the fields: stays as stored
    with CaptureQueriesContext(connection) as queries:
        rows.save_fields(run, ["status", "error", "usage", "cost", "turn_base"])
        rows.save_fields(session, ["messages", "updated_at"])
    assert len(queries) == 2
    stored = Run.objects.select_related("session").get(pk=run.pk)
    assert columns(stored) == columns(run)
    assert stored.session.messages == [{"role": "user", "content": "✓ 👋"}]
    assert stored.session.deck_label != "not written"
    # `auto_now` is stamped as `save` stamps it, on the object too.
    assert stored.session.updated_at == session.updated_at > before
    Run.objects.filter(pk=run.pk).delete()
    with pytest.raises(Run.DoesNotExist):
        rows.save_fields(run, ["status"])


def test_update_if_writes_what_the_orms_update_writes_and_only_while_the_row_is_as_expected():
    run = _queued_run()
    orm_twin = _queued_run()
    stamp = timezone.now()
    values = {"status": "running", "worker_id": "w ✓", "started_at": stamp, "turn_base": {"m": 1}}
    with CaptureQueriesContext(connection) as queries:
        assert rows.update_if(Run, run.pk, {"status": "queued"}, values) == 1
    assert len(queries) == 1
    assert Run.objects.filter(pk=orm_twin.pk, status="queued").update(**values) == 1
    mine, orm = Run.objects.get(pk=run.pk), Run.objects.get(pk=orm_twin.pk)
    assert (mine.status, mine.worker_id, mine.started_at, mine.turn_base) == (
        "running",
        "w ✓",
        stamp,
        {"m": 1},
    )
    assert [getattr(mine, name) for name in values] == [getattr(orm, name) for name in values]
    # Claimed already: nothing changes, and the caller is told.
    assert rows.update_if(Run, run.pk, {"status": "queued"}, {"worker_id": "another"}) == 0
    assert rows.update_if(Run, "run-0000000000000000", {"status": "queued"}, values) == 0
    assert Run.objects.get(pk=run.pk).worker_id == "w ✓"
    with pytest.raises(ValueError, match="None"):
        rows.update_if(Run, run.pk, {"started_at": None}, {"error": "x"})


def test_append_events_numbers_types_and_keeps_every_payload():
    run = _queued_run()
    events = [
        {"type": "run.start", "ts": 1700000000001, "runId": run.pk},
        {"type": "response.output_text.delta", "delta": "héllo 👋", "nested": {"a": [1, None]}},
        {"ts": 5},  # no type: "unknown"
        {"type": "x" * 100, "ts": "7"},
    ]
    append_events(run.pk, run.session_id, 3, events)
    stored = list(TraceEvent.objects.filter(run=run).order_by("id"))
    assert [e.seq for e in stored] == [3, 4, 5, 6]
    assert [e.type for e in stored] == [
        "run.start",
        "response.output_text.delta",
        "unknown",
        "x" * 80,
    ]
    assert [e.ts for e in stored] == [1700000000001, 0, 5, 7]
    assert [e.payload for e in stored] == events
    append_events(run.pk, run.session_id, 7, [])  # nothing to write
    assert TraceEvent.objects.filter(run=run).count() == 4


def test_on_postgresql_reads_lock_and_appends_as_the_orm_does(pg_database, tmp_path):
    # GAMBIT_DB_POOL_SIZE=0: connected as a `gambit worker` is.
    out = run_probe(
        "tests.decks_app.runs.pg_rows_probe", pg_database, tmp_path, GAMBIT_DB_POOL_SIZE="0"
    )
    assert out["vendor"] == "postgresql"
    assert out["queries"] == 1
    # The worker's connection prepared the read it ran over and over.
    assert any("decks_app_run" in statement for statement in out["prepared"]), out["prepared"]
    assert out["read_after_prepared"]
    assert out["same_run"] and out["same_session"] and out["same_workspace"]
    assert out["wrong_status"] is None
    # While one transaction holds read_run(lock=True), another can lock neither row.
    assert out["run_locked"] and out["session_locked"]
    assert out["after_commit"] == "free"
    assert out["seqs"] == [3, 4, 5, 6]
    assert out["ids_rise"] is True
    assert out["types"] == ["run.start", "response.output_text.delta", "unknown", "x" * 80]
    assert out["ts"] == [1700000000001, 0, 5, 7]
    assert out["payloads_equal"] is True
    assert out["duplicate_seq"] == "IntegrityError"
    assert out["empty_batch_rows"] == 4
    assert out["saved_fields"] == {"same_run": True, "messages": True, "stamped": True}
    one_claim = {
        "queries": 1,
        "first_start": True,
        "turn_base": True,
        "same_run": True,
        "same_session": True,
        "same_workspace": True,
        "running": ["running", 100],
        "beat_at_start": True,
        "again": None,
    }
    assert out["claims"] == [one_claim] * 3
    assert out["claimed_again"] == {"first_start": False, "turn_base_kept": True, "worker": "w2"}
    assert out["writes"] == {
        "unsent_events": 0,
        "statements": ["WITH w0"],  # the four writes, one statement
        "events": [[1, "run.end"]],  # (JSON)
        "run": ["completed", "✓ done"],
        "messages": True,
        "twin": "twin ✓",
        "counts": [1, 0],
        "gone": True,
        "twin_after_gone": "twin ✓",
    }
    assert out["update_if"] == {
        "changed": [1, 0],
        "run": [True, True, True, True],
        "task_marked": 1,
        "task": [True, True, True],
    }
