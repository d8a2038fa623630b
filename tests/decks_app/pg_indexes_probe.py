"""Run by test_indexes.py in a process of its own, against a fresh PostgreSQL database
(DATABASE_URL): the indexes of the tables a run writes, at migration 0007 and after every
migration, the plans of the lookups the dropped indexes used to serve, and what the search
index's `gambit_session_text` returns after 0009 beside 0006's SQL function.
Prints one JSON object of what it saw."""

from __future__ import annotations

import json
import os

import django

TABLES = ("decks_app_run", "decks_app_session", "decks_app_traceevent")

# Conversations as sessions store them: strings, parts, tool output, system prompts, odd
# shapes (not arrays, not objects, numbers where text is expected).
SAMPLES = [
    (
        '[{"role": "system", "content": "the prompt"}, {"role": "user", "content": "hi A1002"},'
        ' {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}]',
        "[]",
    ),
    (
        "[]",
        '[{"type": "function_call_output", "output": "tool said zanzibar"},'
        ' {"type": "message", "role": "developer", "content": "hidden"}]',
    ),
    ('{"not": "an array"}', "null"),
    ('[1, "two", {"content": 3}, {"role": "user", "content": {"text": "nested"}}]', "[]"),
    ("[]", "[]"),
]


def _indexes(cursor) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table in TABLES:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", [table]
        )
        out[table] = [row[0].split(" USING ", 1)[1] for row in cursor.fetchall()]
    return out


def _plan(cursor, sql: str) -> str:
    cursor.execute("SET enable_seqscan = off")  # an empty table: ask which index serves it
    cursor.execute("EXPLAIN " + sql)
    plan = "\n".join(row[0] for row in cursor.fetchall())
    cursor.execute("RESET enable_seqscan")
    return plan


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", "decks_app", "0007", verbosity=0)
    out: dict = {"vendor": connection.vendor}
    with connection.cursor() as cursor:
        out["before"] = _indexes(cursor)
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        out["after"] = _indexes(cursor)
        out["plans"] = {
            "events of a run": _plan(
                cursor, "SELECT * FROM decks_app_traceevent WHERE run_id = 'run-x' ORDER BY seq"
            ),
            "events of a session": _plan(
                cursor, "SELECT * FROM decks_app_traceevent WHERE session_id = 'session-x'"
            ),
            "runs of a session": _plan(
                cursor, "SELECT * FROM decks_app_run WHERE session_id = 'session-x'"
            ),
            "queued runs": _plan(cursor, "SELECT id FROM decks_app_run WHERE status = 'queued'"),
            "sessions of a workspace": _plan(
                cursor, "SELECT id FROM decks_app_session WHERE workspace_id = 'workspace-x'"
            ),
            "replays of a session": _plan(
                cursor, "SELECT id FROM decks_app_session WHERE source_id = 'session-x'"
            ),
        }
        cursor.execute(
            "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
            " WHERE p.proname = 'gambit_session_text'"
        )
        out["language"] = cursor.fetchone()[0]
        from importlib import import_module

        old = import_module("decks_app.migrations.0006_session_search").POSTGRES_FORWARD[0]
        cursor.execute(old.replace("gambit_session_text(", "gambit_session_text_0006(", 1))
        out["texts"] = []
        for messages, items in SAMPLES:
            cursor.execute(
                "SELECT gambit_session_text(%s::jsonb, %s::jsonb),"
                " gambit_session_text_0006(%s::jsonb, %s::jsonb)",
                [messages, items, messages, items],
            )
            out["texts"].append(list(cursor.fetchone()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
