"""No index that no query uses: every non-HOT update of a row writes an entry in each.

On PostgreSQL, Django gives every indexed varchar (a string id, a foreign key to one, the
run's status) a second, `varchar_pattern_ops` index for LIKE 'prefix%'; no query here uses
one. A trace event's run and session had single-column indexes that `trace_event_run_seq`
and `trace_event_session_cursor` already lead with. A one-turn run wrote about 18 events and
updated its run twice and its session once: 80 index entries a run fewer on PostgreSQL
(docs/decisions.md, "No index a query does not use").

The foreign keys and the status keep one plain index each (`Meta.indexes`, which builds no
LIKE copy); the string primary keys of runs and sessions lose their LIKE copy (they keep the
primary key's own index).

The database side drops and creates indexes by name and nothing else. Left to Django, the
`AlterField`s (the state side) would rebuild each table on SQLite, and a rebuilt
`decks_app_session` loses the full-text triggers 0006 put on it.
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

# The single-column indexes (and, on PostgreSQL, their LIKE copies) that go, by column. A
# string primary key's own index is unique, so only its LIKE copy matches.
DROPPED = {
    "decks_app_run": ("id", "session_id", "status"),
    "decks_app_session": ("id", "workspace_id", "source_id"),
    "decks_app_traceevent": ("run_id", "session_id"),
}
# What replaces them: (model, index name, field).
ADDED = (
    ("run", "run_session", "session"),
    ("run", "run_status", "status"),
    ("session", "session_workspace", "workspace"),
    ("session", "session_source", "source"),
)


def drop_indexes(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        for table, columns in DROPPED.items():
            found = connection.introspection.get_constraints(cursor, table)
            for name, info in sorted(found.items()):
                if (
                    info["index"]
                    and not info["unique"]
                    and not info["primary_key"]
                    and len(info["columns"]) == 1
                    and info["columns"][0] in columns
                ):
                    schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")
    for model, name, field in ADDED:
        schema_editor.add_index(
            apps.get_model("decks_app", model), models.Index(fields=[field], name=name)
        )


def restore_indexes(apps, schema_editor) -> None:
    """Back to one plain index per foreign key and status (not PostgreSQL's LIKE copies)."""
    for _model, name, _field in ADDED:
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")
    for table, columns in DROPPED.items():
        for column in columns:
            if column == "id":
                continue  # its primary key's index stays throughout
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(f'{table}_{column}')}"
                f" ON {schema_editor.quote_name(table)} ({schema_editor.quote_name(column)})"
            )


class Migration(migrations.Migration):
    dependencies = [("decks_app", "0007_feedback_rater")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, restore_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="decks_app.session",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("queued", "queued"),
                            ("running", "running"),
                            ("completed", "completed"),
                            ("failed", "failed"),
                            ("canceled", "canceled"),
                            ("interrupted", "interrupted"),
                        ],
                        default="queued",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="source",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="replays",
                        to="decks_app.session",
                    ),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="workspace",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sessions",
                        to="decks_app.workspace",
                    ),
                ),
                migrations.AlterField(
                    model_name="traceevent",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="decks_app.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="traceevent",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="decks_app.session",
                    ),
                ),
                *(
                    migrations.AddIndex(
                        model_name=model, index=models.Index(fields=[field], name=name)
                    )
                    for model, name, field in ADDED
                ),
            ],
        ),
    ]
