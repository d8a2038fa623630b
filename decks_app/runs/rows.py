"""A run read with its session (and workspace) in one statement written once, as the worker
reads it when it claims the run (on PostgreSQL read and claimed in one statement:
`claim_queued_run`) and when it ends it; a model's chosen fields saved the same
way (`save_fields`), as it ends the run; a row updated only while it is as expected
(`update_if`), as the worker claims a run and marks its task row done; and the writes that
end a run sent as one statement (`Writes`).

Django's ORM compiles a `select_related` query anew on every call; for this three-table read
that was most of the statement's cost, four to eight times what the same statement costs
when its text is built once per thread (docs/benchmarks.md, "A run's statements, written
once"). The rows still become ordinary model instances, through `Model.from_db` and each
column's converters as the ORM applies them, so no caller can tell the difference.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, cast

from django.db import connections, router
from django.db.models import Field, Model

from decks_app.models import Run, Session, Workspace

type Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class _Table:
    model: type[Model]
    attnames: list[str]  # its concrete fields', in the order of its columns
    # Per column: the backend's converters then the field's, with the column they are for.
    converters: list[tuple[list[Converter], Any]]

    def build(self, alias: str, values: tuple[Any, ...], connection: Any) -> Model:
        converted = list(values)
        for index, (converters, column) in enumerate(self.converters):
            for convert in converters:
                converted[index] = convert(converted[index], column, connection)
        return self.model.from_db(alias, self.attnames, converted)


@dataclass(frozen=True)
class _Statement:
    sql: str
    tables: list[_Table]


# Per thread: a connection (and the backend converters bound to it) belongs to its thread.
_local = threading.local()


def _per_thread[T](cache: str, key: Hashable, build: Callable[[], T]) -> T:
    """`build()`, once per thread for each `key` of the named cache."""
    made: dict[Hashable, Any] = _local.__dict__.setdefault(cache, {})
    if key not in made:
        made[key] = build()
    return made[key]


def _column(field: Field) -> str:
    assert field.column is not None  # a concrete field has its column
    return field.column


def _selected(alias: str, workspace: bool) -> tuple[list[str], list[_Table]]:
    """The columns of a run, its session (and their workspace), qualified by `r`, `s` and
    `w`, and how each table's part of a row becomes its model."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    joined: list[tuple[type[Model], str]] = [(Run, "r"), (Session, "s")]
    if workspace:
        joined.append((Workspace, "w"))
    tables, columns = [], []
    for model, short in joined:
        fields = list(model._meta.concrete_fields)
        converters = []
        for field in fields:
            column = field.get_col(short)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            converters.append((found, column))
            columns.append(f"{short}.{quote(_column(field))}")
        tables.append(_Table(model, [f.attname for f in fields], converters))
    return columns, tables


def _table(alias: str, model: type[Model]) -> str:
    return connections[alias].ops.quote_name(model._meta.db_table)


def _pk(alias: str, model: type[Model]) -> str:
    key = model._meta.pk
    assert key is not None
    return connections[alias].ops.quote_name(_column(key))


def _column_of(alias: str, model: type[Model], name: str) -> str:
    field = next(f for f in model._meta.concrete_fields if f.name == name)
    return connections[alias].ops.quote_name(_column(field))


def _statement(alias: str, *, status: bool, lock: bool, workspace: bool) -> _Statement:
    return _per_thread(
        "statements",
        (alias, status, lock, workspace),
        lambda: _build_statement(alias, status=status, lock=lock, workspace=workspace),
    )


def _build_statement(alias: str, *, status: bool, lock: bool, workspace: bool) -> _Statement:
    connection = connections[alias]
    columns, tables = _selected(alias, workspace)
    sql = (
        f"SELECT {', '.join(columns)} FROM {_table(alias, Run)} r"
        f" JOIN {_table(alias, Session)} s"
        f" ON s.{_pk(alias, Session)} = r.{_column_of(alias, Run, 'session')}"
    )
    if workspace:
        sql += (
            f" JOIN {_table(alias, Workspace)} w"
            f" ON w.{_pk(alias, Workspace)} = s.{_column_of(alias, Session, 'workspace')}"
        )
    sql += f" WHERE r.{_pk(alias, Run)} = %s"
    if status:
        sql += f" AND r.{_column_of(alias, Run, 'status')} = %s"
    if lock and connection.features.has_select_for_update:
        sql += " FOR UPDATE"  # both rows, the run's first (as `select_for_update` locks them)
    return _Statement(sql, tables)


def _rows_to_run(alias: str, statement: _Statement, row: Any, workspace: bool) -> Run:
    connection = connections[alias]
    objects, start = [], 0
    for table in statement.tables:
        end = start + len(table.attnames)
        objects.append(table.build(alias, row[start:end], connection))
        start = end
    run, session = objects[0], objects[1]
    Run._meta.get_field("session").set_cached_value(run, session)
    if workspace:
        Session._meta.get_field("workspace").set_cached_value(session, objects[2])
    assert isinstance(run, Run)
    return run


def read_run(
    run_id: str, *, status: str | None = None, lock: bool = False, workspace: bool = False
) -> Run | None:
    """The run `run_id` with its session loaded (and the session's workspace, with
    `workspace`); None when there is no such run, or it is not in `status`. `lock`: the run
    and its session are locked until the transaction ends (`select_for_update`)."""
    alias = router.db_for_write(Run) if lock else router.db_for_read(Run)
    statement = _statement(alias, status=status is not None, lock=lock, workspace=workspace)
    connection = connections[alias]
    params = [run_id] if status is None else [run_id, status]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    return None if row is None else _rows_to_run(alias, statement, row, workspace)


def _claim_statement(alias: str) -> _Statement:
    """`claim_queued_run`'s UPDATE, built once per thread."""
    return _per_thread("claims", alias, lambda: _build_claim_statement(alias))


def _build_claim_statement(alias: str) -> _Statement:
    columns, tables = _selected(alias, workspace=True)
    run, session = _table(alias, Run), _table(alias, Session)
    run_pk = _pk(alias, Run)

    def column(name: str) -> str:
        return _column_of(alias, Run, name)

    def length(name: str) -> str:  # Python's len(session.<name> or [])
        json = f"s.{_column_of(alias, Session, name)}"
        return f"CASE jsonb_typeof({json}) WHEN 'array' THEN jsonb_array_length({json}) ELSE 0 END"

    # `state.turn_base(session, 0)`, for a run that has none yet (its first start).
    base = (
        f"jsonb_build_object('stateVersion', s.{_column_of(alias, Session, 'state_version')},"
        f" 'messages', {length('messages')}, 'items', {length('items')},"
        f" 'refs', {length('message_refs')}, 'savedMessages', {length('messages')},"
        f" 'savedItems', {length('items')}, 'checkpointSeq', 0)"
    )
    turn_base = column("turn_base")
    sql = (
        f"UPDATE {run} r SET {column('status')} = 'running', {column('worker_id')} = %s,"
        f" {column('started_at')} = %s, {column('heartbeat_at')} = %s,"
        f" {turn_base} = COALESCE(r.{turn_base}, {base})"
        f" FROM {session} s JOIN {_table(alias, Workspace)} w"
        f" ON w.{_pk(alias, Workspace)} = s.{_column_of(alias, Session, 'workspace')},"
        # The row as it was: whether this start wrote its turn base (RETURNING shows the new).
        f" (SELECT r0.{turn_base} IS NULL FROM {run} r0 WHERE r0.{run_pk} = %s) AS before(first)"
        f" WHERE r.{run_pk} = %s AND r.{column('status')} = 'queued'"
        f" AND s.{_pk(alias, Session)} = r.{column('session')}"
        f" RETURNING {', '.join(columns)}, before.first"
    )
    return _Statement(sql, tables)


def claim_queued_run(run_id: str, worker_id: str, now: Any) -> tuple[Run, bool] | None:
    """On PostgreSQL: the queued run `run_id` claimed for `worker_id` (running, started and
    beating at `now`, its turn base written on its first start) and read with its session and
    workspace, in one statement; with whether this was its first start. None when it is not
    queued (any more). What `queue.claim_run` does in two statements elsewhere."""
    alias = router.db_for_write(Run)
    connection = connections[alias]
    statement = _claim_statement(alias)
    stamp = Run._meta.get_field("started_at").get_db_prep_save(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, [worker_id, stamp, stamp, run_id, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return _rows_to_run(alias, statement, row[:-1], workspace=True), bool(row[-1])


@dataclass(frozen=True)
class _Update:
    sql: str
    setting: list[Field]  # the fields of the SET list, in order
    matching: list[Field]  # the primary key, then the fields `when` compares


def _update(
    alias: str, model: type[Model], fields: tuple[str, ...], when: tuple[str, ...]
) -> _Update:
    """`UPDATE table SET field = %s, ... WHERE pk = %s [AND field = %s ...]`, built once per
    thread (and connection alias) for each model and set of fields."""
    return _per_thread(
        "updates", (alias, model, fields, when), lambda: _build_update(alias, model, fields, when)
    )


def _build_update(
    alias: str, model: type[Model], fields: tuple[str, ...], when: tuple[str, ...]
) -> _Update:
    quote = connections[alias].ops.quote_name
    by_name = {f.name: f for f in model._meta.concrete_fields}
    key_field = model._meta.pk
    assert key_field is not None
    setting = [by_name[name] for name in fields]
    matching = [key_field, *(by_name[name] for name in when)]
    sql = (
        f"UPDATE {quote(model._meta.db_table)}"
        f" SET {', '.join(f'{quote(_column(f))} = %s' for f in setting)}"
        f" WHERE {' AND '.join(f'{quote(_column(f))} = %s' for f in matching)}"
    )
    return _Update(sql, setting, matching)


def _save_fields_statement(obj: Model, fields: list[str]) -> tuple[str, list[Any]]:
    model = type(obj)
    alias = router.db_for_write(model)
    connection = connections[alias]
    update = _update(alias, model, tuple(fields), ())
    params = [f.get_db_prep_save(f.pre_save(obj, False), connection) for f in update.setting]
    params.append(obj.pk)
    return update.sql, params


def _gone(obj: Model) -> Exception:
    missing: type[Exception] = cast(Any, type(obj)).DoesNotExist  # every model has one
    return missing(f"{type(obj).__name__} {obj.pk} is gone")


def save_fields(obj: Model, fields: list[str]) -> None:
    """`obj.save(update_fields=fields)` as one UPDATE whose text is built once per thread:
    each field's `pre_save` (an `auto_now` stamp) and `get_db_prep_save` as the ORM applies
    them, without its per-call compilation (docs/benchmarks.md, "A run's start and end in its
    slot's thread"). No `pre_save`/`post_save` signal is sent and the model's own `save` is not
    called: its caller validates what `save` would (`registry.check_run`)."""
    writes = Writes(router.db_for_write(type(obj)))
    writes.save_fields(obj, fields)
    writes.send()


def _update_if_statement(
    model: type[Model], pk: Any, when: dict[str, Any], values: dict[str, Any]
) -> tuple[str, list[Any]]:
    if any(value is None for value in when.values()):
        raise ValueError("update_if compares with '=': a None in `when` would match no row")
    alias = router.db_for_write(model)
    connection = connections[alias]
    update = _update(alias, model, tuple(values), tuple(when))
    params = [
        f.get_db_prep_save(value, connection)
        for f, value in zip(update.setting, values.values(), strict=True)
    ]
    params += [
        f.get_db_prep_value(value, connection, prepared=False)
        for f, value in zip(update.matching, (pk, *when.values()), strict=True)
    ]
    return update.sql, params


def update_if(model: type[Model], pk: Any, when: dict[str, Any], values: dict[str, Any]) -> int:
    """`model.objects.filter(pk=pk, **when).update(**values)` as one UPDATE whose text is built
    once per thread; the number of rows it changed (0 when the row is not, or no longer, as
    `when` says). Each value is prepared by its field as the ORM's `update` prepares it
    (`get_db_prep_save`); an `auto_now` field not among `values` is not stamped, as `update`
    does not stamp it. `when`'s values are compared with `=`, so None is refused (the ORM
    would have written `IS NULL`)."""
    writes = Writes(router.db_for_write(model))
    writes.update_if(model, pk, when, values)
    return writes.send()[0]


@dataclass
class _Write:
    sql: str
    params: list[Any]
    then: Callable[[int], None] | None  # given the number of rows the write changed


class Writes:
    """Writes of one transaction, sent together when it is about to commit: on PostgreSQL as
    one statement (each write a data-modifying `WITH` query), elsewhere one by one in the
    order they were added. A run's end is four writes (its last trace events, the run, its
    session, its task row): one round trip instead of four (docs/benchmarks.md, "A run's
    end in one statement").

    All the writes of one statement see the rows as they were before it, so no write may
    depend on another's effect: each must change rows no other write of the batch touches.
    """

    def __init__(self, alias: str):
        self.alias = alias
        self.pending: list[_Write] = []

    def add(self, sql: str, params: list[Any], then: Callable[[int], None] | None = None) -> None:
        """One INSERT, UPDATE or DELETE (no RETURNING of its own); `then(rows changed)` once
        sent."""
        self.pending.append(_Write(sql, params, then))

    def save_fields(self, obj: Model, fields: list[str]) -> None:
        """`rows.save_fields(obj, fields)` when sent (a row that is gone raises then)."""

        def check(changed: int) -> None:
            if changed != 1:
                raise _gone(obj)

        sql, params = _save_fields_statement(obj, fields)
        self.add(sql, params, check)

    def update_if(
        self,
        model: type[Model],
        pk: Any,
        when: dict[str, Any],
        values: dict[str, Any],
        then: Callable[[int], None] | None = None,
    ) -> None:
        """`rows.update_if(...)` when sent; `then` is given the number of rows it changed."""
        sql, params = _update_if_statement(model, pk, when, values)
        self.add(sql, params, then)

    def send(self) -> list[int]:
        """Send what was added (and forget it), hand each write's count to its `then`, and
        return the counts in the order the writes were added."""
        pending, self.pending = self.pending, []
        if not pending:
            return []
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql" and len(pending) > 1:
                names = [f"w{i}" for i in range(len(pending))]
                sql = (
                    "WITH "
                    + ", ".join(
                        f"{name} AS ({write.sql} RETURNING 1)"
                        for name, write in zip(names, pending, strict=True)
                    )
                    + " SELECT "
                    + ", ".join(f"(SELECT count(*) FROM {name})" for name in names)
                )
                cursor.execute(sql, [param for write in pending for param in write.params])
                counts = list(cursor.fetchone())
            else:
                counts = []
                for write in pending:
                    cursor.execute(write.sql, write.params)
                    counts.append(cursor.rowcount)
        for write, changed in zip(pending, counts, strict=True):
            if write.then is not None:
                write.then(changed)
        return counts
