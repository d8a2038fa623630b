"""Full-text search over each session's conversation, kept by the database itself.

The searched text is every string a user, an assistant or a tool said: the `content` (a
string, or its parts' `text`) and a tool result's `output` of each message and item that is
not a system or developer message (the prompt would match every session of a deck). Every
write path (a turn's checkpoints, recovery, Retry, imports, Verify) stays covered because no
Python code keeps the index: the database does (docs/simulator.md, "Sessions list").

- **SQLite**: an FTS5 table, `decks_app_session_search` (rowid = a stable integer key of the
  session in `decks_app_session_search_key`, since a session's own rowid may change on VACUUM),
  filled and kept by triggers on `decks_app_session`.
- **PostgreSQL**: a GIN index on `to_tsvector('simple', gambit_session_text(messages, items))`,
  an IMMUTABLE SQL function, so the index is kept by PostgreSQL and used by the `@@` query.

Any other database gets no index (search then matches ids, labels and models only).
"""

from __future__ import annotations

from django.db import migrations

# The text of one row of decks_app_session, in SQLite (`{row}` is `new` in a trigger).
SQLITE_TEXT = """coalesce((
  SELECT group_concat(t.value, char(10)) FROM (
    SELECT m.value AS v FROM json_each(
      CASE WHEN json_valid({row}.messages) AND json_type({row}.messages) = 'array'
      THEN {row}.messages ELSE '[]' END) AS m WHERE m.type = 'object'
    UNION ALL
    SELECT m.value FROM json_each(
      CASE WHEN json_valid({row}.items) AND json_type({row}.items) = 'array'
      THEN {row}.items ELSE '[]' END) AS m WHERE m.type = 'object'
  ) AS e, json_tree(e.v) AS t
  WHERE coalesce(json_extract(e.v, '$.role'), '') NOT IN ('system', 'developer')
    AND t.type = 'text' AND t.key IN ('content', 'text', 'output')
), '')"""

SQLITE_FORWARD = [
    "CREATE TABLE decks_app_session_search_key ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " session_id varchar(40) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE decks_app_session_search USING fts5("
    "body, tokenize = 'unicode61 remove_diacritics 2')",
    f"""CREATE TRIGGER decks_app_session_search_insert AFTER INSERT ON decks_app_session
BEGIN
  INSERT OR IGNORE INTO decks_app_session_search_key (session_id) VALUES (new.id);
  INSERT INTO decks_app_session_search (rowid, body) VALUES (
    (SELECT id FROM decks_app_session_search_key WHERE session_id = new.id),
    {SQLITE_TEXT.format(row="new")});
END""",
    f"""CREATE TRIGGER decks_app_session_search_update AFTER UPDATE OF messages, items
ON decks_app_session
WHEN old.messages IS NOT new.messages OR old.items IS NOT new.items
BEGIN
  DELETE FROM decks_app_session_search WHERE rowid =
    (SELECT id FROM decks_app_session_search_key WHERE session_id = old.id);
  INSERT OR IGNORE INTO decks_app_session_search_key (session_id) VALUES (new.id);
  INSERT INTO decks_app_session_search (rowid, body) VALUES (
    (SELECT id FROM decks_app_session_search_key WHERE session_id = new.id),
    {SQLITE_TEXT.format(row="new")});
END""",
    """CREATE TRIGGER decks_app_session_search_delete AFTER DELETE ON decks_app_session
BEGIN
  DELETE FROM decks_app_session_search WHERE rowid =
    (SELECT id FROM decks_app_session_search_key WHERE session_id = old.id);
  DELETE FROM decks_app_session_search_key WHERE session_id = old.id;
END""",
    # the sessions recorded before this migration
    "INSERT INTO decks_app_session_search_key (session_id) SELECT id FROM decks_app_session",
    f"""INSERT INTO decks_app_session_search (rowid, body)
SELECT k.id, {SQLITE_TEXT.format(row="s")}
FROM decks_app_session AS s JOIN decks_app_session_search_key AS k ON k.session_id = s.id""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS decks_app_session_search_insert",
    "DROP TRIGGER IF EXISTS decks_app_session_search_update",
    "DROP TRIGGER IF EXISTS decks_app_session_search_delete",
    "DROP TABLE IF EXISTS decks_app_session_search",
    "DROP TABLE IF EXISTS decks_app_session_search_key",
]

POSTGRES_FORWARD = [
    """CREATE OR REPLACE FUNCTION gambit_session_text(messages jsonb, items jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(t.v #>> '{}', E'\\n'), '')
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
$$""",
    "CREATE INDEX decks_app_session_search ON decks_app_session USING gin "
    "(to_tsvector('simple'::regconfig, gambit_session_text(messages, items)))",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS decks_app_session_search",
    "DROP FUNCTION IF EXISTS gambit_session_text(jsonb, jsonb)",
]


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("decks_app", "0005_run_params_result")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
