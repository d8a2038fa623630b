"""What a run's writes cost PostgreSQL in indexes (docs/decisions.md, "No index a query does
not use"): no index that no query uses (migration 0008; Django added LIKE copies of every
indexed varchar), the lookups those indexes served still find one, and the search index's
text function keeps its plan (0009) and returns what 0006's did. Checked in a process of its
own (`pg_indexes_probe`), once for the module."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.postgres import fresh_database, run_probe


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with fresh_database("gambit_test_indexes") as url:
        out = run_probe("tests.decks_app.pg_indexes_probe", url, tmp_path_factory.mktemp("pg"))
    assert out["vendor"] == "postgresql"
    return out


def test_on_postgresql_a_run_writes_no_index_that_no_query_uses(probed):
    out = probed
    before, after = out["before"], out["after"]
    # The schema this migration started from had them (so the check below can fail).
    assert any("varchar_pattern_ops" in d for d in before["decks_app_traceevent"])
    assert len(before["decks_app_traceevent"]) == 7
    for table, defs in after.items():
        assert not [d for d in defs if "varchar_pattern_ops" in d], table
    assert sorted(after["decks_app_traceevent"]) == [
        "btree (id)",
        "btree (run_id, seq)",
        "btree (session_id, id)",
    ]
    assert "btree (session_id)" in after["decks_app_run"]
    # One active run per session stays enforced: its partial unique index is on the same
    # column as a dropped one (a first version of 0008 dropped it too).
    assert [d for d in after["decks_app_run"] if d.startswith("btree (session_id) WHERE")]
    assert "btree (status)" in after["decks_app_run"]
    assert "btree (workspace_id)" in after["decks_app_session"]
    assert "btree (source_id)" in after["decks_app_session"]
    # Every lookup that used a dropped index is served by one that stayed.
    plans = out["plans"]
    assert "trace_event_run_seq" in plans["events of a run"]
    assert "trace_event_session_cursor" in plans["events of a session"]
    assert "run_session" in plans["runs of a session"] or "one_active" in plans["runs of a session"]
    assert "run_status" in plans["queued runs"]
    assert "session_workspace" in plans["sessions of a workspace"]
    assert "session_source" in plans["replays of a session"]


def test_on_postgresql_the_search_text_keeps_its_plan_and_its_output(probed):
    assert probed["language"] == "plpgsql"
    texts = probed["texts"]
    assert texts[0][0] == "hi A1002\nhello"  # no system prompt
    assert texts[1][0] == "tool said zanzibar"  # no developer message
    assert texts[4][0] == ""
    for new, old in texts:
        assert new == old


@pytest.mark.django_db
def test_on_sqlite_the_same_indexes_and_the_search_triggers_stay():
    from django.db import connection

    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "decks_app_traceevent")
        indexes = sorted(
            tuple(i["columns"])
            for i in found.values()
            if (i["index"] or i["unique"]) and not i["primary_key"]
        )
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
            ["decks_app_session"],
        )
        triggers = {row[0] for row in cursor.fetchall()}
    assert connection.vendor == "sqlite"
    assert indexes == [("run_id", "seq"), ("session_id", "id")]
    # A table rebuilt by an AlterField would have lost the full-text triggers (0006).
    assert {"decks_app_session_search_insert", "decks_app_session_search_update"} <= triggers
