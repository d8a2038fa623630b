"""Stored responses of `/v1/responses`: retrieval, input items, deletion, and session routing.

Every call is recorded as a run (kind "api") of a session. The run's result is the call's
record (`endpoint.kinds.ApiCallRecord`), read by the state endpoints:

    {"id": "resp-…", "store": true, "response": {ResponseResource}, "input_items": [items]}

`response` is the resource as it stands (`in_progress` from the first bytes, the final one
when the call ends); `input_items` are the request's input as items with ids (an
`item_reference` resolved to the item it names). A call made with `store: false` keeps only
`{"id", "store": false}`: its response cannot be retrieved, listed or continued. Deleting a
response leaves `{"id", "store", "deleted": true}`; the simulator's recording of the call (the
session's conversation and trace in the Test tab) stays, as the operator's record.

Responses belong to the key that made them (`api_keys.owner`, kept in the session's
`meta.api.owner`): another key gets the same 404 as for an id that does not exist. Sessions
recorded before owners were kept have none and stay open to every key.

Session routing: a `Gambit-Session` header (or the request's `user`) names a conversation.
Calls with the same key, model and name land in one session, whose id is derived from the
three (`routed_session_id`), so concurrent first calls cannot create two. A header holding a
session id (`session-<24 hex>`) continues that API session instead.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import transaction

from decks_app.models import Run, Session
from endpoint.kinds import ApiCallRecord
from endpoint.schemas import (
    ApiError,
    FunctionCallOutputParam,
    FunctionCallParam,
    Item,
    ItemReferenceParam,
    MessageParam,
)
from gambit.core import is_valid_id, new_id

SESSION_HEADER = "Gambit-Session"
SESSION_ID_HEADER = "Gambit-Session-Id"
MAX_ROUTE = 256
DEFAULT_LIMIT = 20
MAX_LIMIT = 100


# ---------------------------------------------------------------- the record of a call


def call_record(
    response_id: str, store: bool, resource: dict[str, Any], input_items: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a run's result holds for a call (see the module's docstring)."""
    if not store:
        return {"id": response_id, "store": False}
    return {"id": response_id, "store": True, "response": resource, "input_items": input_items}


def _record(run: Run) -> ApiCallRecord:
    return run.read_result(ApiCallRecord) or ApiCallRecord(id="", store=False)


def _message_item(
    role: str, text: str, item_id: str | None, media: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    if role == "assistant":
        part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    else:
        part = {"type": "input_text", "text": text}
    return {
        "type": "message",
        "id": item_id or new_id("msg"),
        "role": role,
        "status": "completed",
        "content": [part, *(media or [])],
    }


def _listed_media(part: dict[str, Any]) -> dict[str, Any]:
    """An image or file part as an input item lists it: a file's data is not repeated."""
    if part["type"] == "input_file":
        return {k: v for k, v in part.items() if k in ("type", "filename", "file_url")}
    return part


def input_items(items: list[Item], references: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's input as the items `GET .../input_items` lists, each with an id. An
    `item_reference` becomes the item it names (`references`, from `referenced_items`)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, MessageParam):
            media = [_listed_media(part.to_item_part()) for part in item.media()]
            out.append(_message_item(item.role, item.text(), item.id, media))
        elif isinstance(item, FunctionCallParam):
            out.append(
                {
                    "type": "function_call",
                    "id": item.id or new_id("fc"),
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments,
                    "status": "completed",
                }
            )
        elif isinstance(item, FunctionCallOutputParam):
            out.append(
                {
                    "type": "function_call_output",
                    "id": item.id or new_id("fco"),
                    "call_id": item.call_id,
                    "output": item.text(),
                    "status": "completed",
                }
            )
        elif isinstance(item, ItemReferenceParam) and item.id in references:
            out.append(dict(references[item.id]))
    return out


def referenced_items(
    ids: list[str], owner: str | None, session_id: str | None
) -> dict[str, dict[str, Any]]:
    """The items `item_reference`s name, by id: an input or output item of a stored response
    of this key, the session's own first (the one the call continues, if any). Ids that
    name none are left out (the caller answers 400)."""
    wanted = set(ids)
    found: dict[str, dict[str, Any]] = {}

    def take(run: Run) -> None:
        record = _record(run)
        if not record.store or record.deleted:
            return
        output = (record.response or {}).get("output") or []
        for item in [*(record.input_items or []), *output]:
            if isinstance(item, dict) and item.get("id") in wanted and item["id"] not in found:
                found[item["id"]] = item

    if session_id is not None:
        for run in Run.objects.filter(kind="api", session_id=session_id).order_by("created_at"):
            take(run)
    for item_id in wanted - set(found):
        if not item_id or len(item_id) > 200:
            continue
        candidates = Run.objects.select_related("session").filter(
            kind="api", result__icontains=item_id
        )
        for run in candidates.order_by("created_at")[:20]:
            if may_use(run.session, owner):
                take(run)
    return found


# ---------------------------------------------------------------- looking a response up


def _not_found(response_id: str, code: str, param: str, why: str = "") -> ApiError:
    return ApiError(
        404,
        f"no response {response_id[:100]!r}{why}",
        type="invalid_request_error",
        code=code,
        param=param,
    )


def find_call(
    response_id: Any,
    owner: str | None,
    *,
    code: str = "response_not_found",
    param: str = "response_id",
    purpose: str = "",
) -> Run:
    """The run that recorded response `response_id`, if `owner` may see it and it is stored.

    The id is checked before it touches storage; an unknown id, another key's response, a
    deleted one and one made with `store: false` are all 404s (the last two say why; the
    second is indistinguishable from an unknown id)."""
    if not isinstance(response_id, str) or not is_valid_id(response_id, "resp"):
        raise _not_found(str(response_id), code, param, " (response ids look like resp-<24 hex>)")
    run = (
        Run.objects.select_related("session")
        .filter(kind="api", result__id=response_id)
        .order_by("created_at")
        .first()
    )
    if run is None or not may_use(run.session, owner):
        raise _not_found(response_id, code, param)
    record = _record(run)
    if record.deleted:
        raise _not_found(response_id, code, param, f": it was deleted{purpose}")
    if record.store is False:
        raise _not_found(
            response_id, code, param, f": it was created with store: false and not kept{purpose}"
        )
    return run


def may_use(session: Session, owner: str | None) -> bool:
    """Whether the key `owner` may read or continue `session` (an API session without a
    recorded owner predates owners and is open to every key)."""
    recorded = ((session.meta or {}).get("api") or {}).get("owner")
    return recorded is None or recorded == owner


def retrieve(response_id: str, owner: str) -> dict[str, Any]:
    """`GET /v1/responses/{id}`: the stored `ResponseResource`."""
    run = find_call(response_id, owner)
    resource = _record(run).response
    if resource is None:  # a record without its resource (never expected): not retrievable
        raise _not_found(response_id, "response_not_found", "response_id")
    return resource


def list_input_items(
    response_id: str,
    owner: str,
    *,
    limit: Any = None,
    order: Any = None,
    after: Any = None,
    before: Any = None,
) -> dict[str, Any]:
    """`GET /v1/responses/{id}/input_items`: the request's input items, a page at a time.

    `order` is `desc` (the default: the last input item first) or `asc`; `limit` is 1-100
    (default 20); `after` / `before` are item ids of the list (the cursors): the page starts
    after `after`, or ends just before `before`, in the requested order."""
    size = _limit(limit)
    if order in (None, ""):
        order = "desc"
    if order not in ("asc", "desc"):
        raise ApiError(400, 'order must be "asc" or "desc"', code="invalid_value", param="order")
    for name, value in (("after", after), ("before", before)):
        if value is not None and (not value or len(value) > 200):
            raise ApiError(400, f"{name} must be an item id", code="invalid_value", param=name)
    run = find_call(response_id, owner)
    items = list(_record(run).input_items or [])
    if order == "desc":
        items.reverse()
    ids = [item.get("id") for item in items]
    if after is not None:
        if after not in ids:
            raise ApiError(
                400,
                f"after: {after[:100]!r} is not an input item of this response",
                code="invalid_value",
                param="after",
            )
        items = items[ids.index(after) + 1 :]
        ids = ids[ids.index(after) + 1 :]
    if before is not None:
        if before not in ids:
            raise ApiError(
                400,
                f"before: {before[:100]!r} is not an input item of this response "
                "(after the `after` cursor, if given)",
                code="invalid_value",
                param="before",
            )
        items = items[: ids.index(before)]
        page, has_more = items[-size:], len(items) > size
    else:
        page, has_more = items[:size], len(items) > size
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": has_more,
    }


def _limit(value: Any) -> int:
    if value in (None, ""):
        return DEFAULT_LIMIT
    text = str(value)
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise ApiError(
            400,
            f"limit must be a whole number from 1 to {MAX_LIMIT}",
            code="invalid_value",
            param="limit",
        )
    return int(text)


def delete(response_id: str, owner: str) -> dict[str, Any]:
    """`DELETE /v1/responses/{id}`: forget the stored response and its input items."""
    with transaction.atomic():
        run = find_call(response_id, owner)
        run = Run.objects.select_for_update().get(pk=run.pk)
        resource = _record(run).response or {}
        # Until its final resource is stored (just after the run's end) a response is still
        # in progress: deleting it then would be undone by that write.
        if run.status in Run.ACTIVE or resource.get("status") == "in_progress":
            raise ApiError(
                409,
                f"response {response_id!r} is still in progress; it can be deleted once it ends",
                code="response_in_progress",
                param="response_id",
            )
        run.result = ApiCallRecord(id=response_id, store=True, deleted=True)
        run.save(update_fields=["result"])
    return {"id": response_id, "object": "response", "deleted": True}


# ---------------------------------------------------------------- session routing


def route_of(header: str | None, user: str | None) -> tuple[str, str] | None:
    """(routing value, where it came from) of a call: the `Gambit-Session` header, else the
    body's `user`; None when neither is given."""
    if header is not None:
        value = header.strip()
        if not value or len(value) > MAX_ROUTE or not value.isprintable():
            raise ApiError(
                400,
                f"the {SESSION_HEADER} header must be 1-{MAX_ROUTE} printable characters",
                code="invalid_value",
                param=SESSION_HEADER,
            )
        return value, SESSION_HEADER
    if user is not None:
        if not user.strip() or not user.isprintable():
            raise ApiError(400, "user must be printable text", code="invalid_value", param="user")
        return user, "user"
    return None


def is_session_id(value: str) -> bool:
    return is_valid_id(value, "session")


def routed_session_id(owner: str | None, root: str, model: str, name: str) -> str:
    """The session that the calls of `owner` to `model` (of the workspace at `root`) named
    `name` share: derived from them, so it is the same id in every process and two first
    calls race to one row."""
    parts = [owner or "", root, model, name]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"session-{digest[:24]}"
