"""The trace-event log: append first, notify second; read after a cursor.

Text deltas are coalesced before they are stored: consecutive `response.output_text.delta`
events of the same item become one event whose `delta` is the joined text (and whose
`coalesced` says how many were merged). The stored trace stays a valid trace file: the
replay provider reads `model.result` events, never the deltas.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connections, router, transaction
from django.db.models import Func, JSONField

from decks_app.models import TraceEvent
from decks_app.runs import outage
from decks_app.runs.rows import Writes

log = logging.getLogger(__name__)

TEXT_DELTA = "response.output_text.delta"


def group_name(session_id: str) -> str:
    return f"session-{session_id}"


def coalesce(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in events:
        prev = out[-1] if out else None
        if (
            prev is not None
            and event.get("type") == TEXT_DELTA
            and prev.get("type") == TEXT_DELTA
            and prev.get("item_id") == event.get("item_id")
            and prev.get("_gambit") == event.get("_gambit")
        ):
            merged = dict(prev)
            merged["delta"] = (prev.get("delta") or "") + (event.get("delta") or "")
            merged["coalesced"] = prev.get("coalesced", 1) + 1
            merged["sequence_number"] = event.get("sequence_number", prev.get("sequence_number"))
            out[-1] = merged
        else:
            out.append(dict(event))
    return out


def append_events(
    run_id: str,
    session_id: str,
    first_seq: int,
    events: list[dict[str, Any]],
    *,
    writes: Writes | None = None,
) -> None:
    """Store events with seq first_seq, first_seq+1, ... in one statement (inside the
    caller's transaction it needs no savepoint of its own). With `writes`, on PostgreSQL,
    that statement goes with the transaction's other writes (`rows.Writes`); elsewhere they
    are stored at once, as without it."""
    if not events:
        return
    rows = [(str(event.get("type", "unknown"))[:80], int(event.get("ts") or 0)) for event in events]
    connection = connections[router.db_for_write(TraceEvent)]
    if connection.vendor == "postgresql":
        # The batch goes as one JSON document, unpacked by the database: the ORM's
        # `bulk_create` built a model per event and quoted every array element in Python,
        # eight times the CPU (docs/benchmarks.md, "A run's statements, written once").
        batch = [[kind, ts, event] for (kind, ts), event in zip(rows, events, strict=True)]
        sql = _append_sql(connection.alias)
        params: list[Any] = [run_id, session_id, first_seq, json.dumps(batch)]
        if writes is not None:
            writes.add(sql, params)
            return
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return
    with transaction.atomic(using=connection.alias, savepoint=False):
        TraceEvent.objects.bulk_create(
            TraceEvent(
                run_id=run_id,
                session_id=session_id,
                seq=first_seq + i,
                type=kind,
                payload=event,
                ts=ts,
            )
            for i, ((kind, ts), event) in enumerate(zip(rows, events, strict=True))
        )


@functools.cache
def _append_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    column = {field.name: field.column for field in TraceEvent._meta.concrete_fields}
    columns = ", ".join(
        quote(str(column[name])) for name in ("run", "session", "seq", "type", "payload", "ts")
    )
    # Elements in order (WITH ORDINALITY), so ids rise with seq as they did.
    return (
        f"INSERT INTO {quote(TraceEvent._meta.db_table)} ({columns})"
        " SELECT %s, %s, %s + e.n - 1, e.x->>0, e.x->2, (e.x->>1)::bigint"
        " FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(x, n) ORDER BY e.n"
    )


def events_after(session_id: str, after: int, limit: int = 1000) -> list[TraceEvent]:
    return list(
        TraceEvent.objects.filter(session_id=session_id, id__gt=after).order_by("id")[:limit]
    )


# The session page lists at most this many of the newest events; the trace page has them all.
RECENT_LIMIT = 100  # the session page and its twin; the trace page pages through all


def recent_events(session_id: str, cursor: int, limit: int | None = None) -> list[TraceEvent]:
    """The newest `limit` (default RECENT_LIMIT) events up to the cursor, oldest first, with
    light `model.call` payloads (`light_payloads`)."""
    newest = TraceEvent.objects.filter(session_id=session_id, id__lte=cursor).order_by("-id")
    return list(reversed(light_payloads(newest[: limit or RECENT_LIMIT])))


def light_payloads(events: Any) -> list[TraceEvent]:
    """The events of a queryset, where each `model.call` payload is read without the
    conversation it sent (`items`, `tools`): those grow with every turn, so a long
    session's event list would be quadratic in its length. The call's page
    (`/test/<session>/trace/calls/<id>/`) and the exported trace have them whole; the light
    payload says how many items it left out under `itemsOmitted`."""
    rows = list(events.defer("payload"))
    calls = [e.id for e in rows if e.type == "model.call"]
    whole = dict(
        TraceEvent.objects.filter(
            id__in=[e.id for e in rows if e.type != "model.call"]
        ).values_list("id", "payload")
    )
    light = {}
    if calls:
        for pk, payload in call_payloads(TraceEvent.objects.filter(id__in=calls)):
            light[pk] = {**payload, "itemsOmitted": payload.get("messageCount")}
    for event in rows:
        event.payload = light[event.id] if event.id in light else whole.get(event.id, {})
    return rows


class _WithoutConversation(Func):
    """A `model.call` payload without the conversation it sent (`items`, `tools`), taken
    apart by the database so the rest is read in one piece: `json_remove` on SQLite, the
    `-` operator on PostgreSQL's jsonb."""

    output_field = JSONField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="json_remove(%(expressions)s, '$.items', '$.tools')"
        )

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="(%(expressions)s - 'items' - 'tools')")


def call_payloads(queryset: Any) -> Iterable[tuple[int, dict[str, Any]]]:
    """`(id, payload)` of the `model.call` events of a queryset, light (see `light_payloads`)."""
    rows = queryset.annotate(light=_WithoutConversation("payload")).values_list("id", "light")
    for pk, payload in rows:
        if isinstance(payload, str):  # a backend that hands the JSON back as text
            payload = json.loads(payload)
        yield pk, payload or {}


def event_dict(event: TraceEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "runId": event.run_id,
        "seq": event.seq,
        "type": event.type,
        "ts": event.ts,
        "payload": event.payload,
    }


def last_event_id(session_id: str) -> int:
    last = TraceEvent.objects.filter(session_id=session_id).order_by("-id").values("id").first()
    return last["id"] if last else 0


def changed_message(session_id: str) -> dict[str, Any]:
    return {"type": "session.changed", "session": session_id}


async def notify(session_id: str) -> None:
    """Tell the session's sockets that something changed. Losing this only delays them."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group_name(session_id), changed_message(session_id))
    except Exception as exc:  # the database is the truth; a dropped notification is not an error
        outage.failed("the channel layer", exc)
    else:
        outage.recovered("the channel layer")


def notify_sync(session_id: str) -> None:
    async_to_sync(notify)(session_id)
