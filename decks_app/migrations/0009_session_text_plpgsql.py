"""PostgreSQL: `gambit_session_text` (0006) becomes a PL/pgSQL function with the same query.

The search index's expression calls it on every write of a session's conversation: once a
run, at its end. A SQL-language function whose body has a FROM clause is not inlined, and
its query is planned again on each statement that calls it; PL/pgSQL keeps the plan for the
connection's life. Same text out, so the index stays valid and is not rebuilt. Measured on
this project's test machine: 400 updates of a one-turn conversation took 144 to 270 ms with
the SQL function and 30 to 55 ms with this one (docs/decisions.md, "No index a query does not
use").
"""

from __future__ import annotations

from django.db import migrations

# The query of 0006's function, unchanged, inside PL/pgSQL.
PLPGSQL = r"""CREATE OR REPLACE FUNCTION gambit_session_text(messages jsonb, items jsonb)
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (
    SELECT coalesce(string_agg(t.v #>> '{}', E'\n'), '')
    FROM jsonb_array_elements(
           (CASE WHEN jsonb_typeof(messages) = 'array' THEN messages ELSE '[]'::jsonb END)
           || (CASE WHEN jsonb_typeof(items) = 'array' THEN items ELSE '[]'::jsonb END)
         ) AS m(e),
         LATERAL (
           SELECT jsonb_path_query(m.e, 'lax $.content ? (@.type() == "string")')
           UNION ALL SELECT jsonb_path_query(m.e, 'lax $.content.text')
           UNION ALL SELECT jsonb_path_query(m.e, 'lax $.output ? (@.type() == "string")')
         ) AS t(v)
    WHERE jsonb_typeof(m.e) = 'object'
      AND coalesce(m.e ->> 'role', '') NOT IN ('system', 'developer')
      AND jsonb_typeof(t.v) = 'string'
  );
END
$$"""


def _forward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PLPGSQL)


def _backward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        from importlib import import_module

        # 0006's SQL function, as it created it.
        schema_editor.execute(
            import_module("decks_app.migrations.0006_session_search").POSTGRES_FORWARD[0]
        )


class Migration(migrations.Migration):
    dependencies = [("decks_app", "0008_lean_indexes")]

    operations = [migrations.RunPython(_forward, _backward)]
