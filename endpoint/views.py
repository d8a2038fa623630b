"""`/v1/*`: decks served over Open Responses (`POST /v1/responses`, `GET /v1/models`), the
stored responses (`GET` / `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`)
and, when enabled, the legacy `POST /v1/chat/completions`. Every request needs an API key;
every error is `{"error": {type, code, param, message}}` with its HTTP status, never a 500
page.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.views.decorators.csrf import csrf_exempt

from decks_app.workspaces.served import current_workspace
from endpoint import keys as api_keys
from endpoint import store as response_store
from endpoint.call import ResponseCall
from endpoint.models import ApiKey
from endpoint.routing import list_models, served_workspace
from endpoint.schemas import ApiError, parse_body

MAX_BODY = 10 * 1024 * 1024


def error(exc: ApiError) -> JsonResponse:
    response = JsonResponse(exc.to_json(), status=exc.status)
    if isinstance(exc, WrongMethod):
        response["Allow"] = exc.allow
    return response


class WrongMethod(ApiError):
    """405, with the methods the path answers (the `Allow` header)."""

    def __init__(self, *allowed: str):
        super().__init__(405, f"use {' or '.join(allowed)}", code="method_not_allowed")
        self.allow = ", ".join(allowed)


def _unauthorized() -> ApiError:
    return ApiError(
        401,
        "a valid API key is required: Authorization: Bearer <key> "
        "(create one with `gambit keys create NAME`)",
        type="authentication_error",
        code="invalid_api_key",
    )


async def _authorized(request: HttpRequest) -> None:
    key = api_keys.bearer(request.headers.get("Authorization"))
    if not api_keys.environment_key(key) and not await sync_to_async(api_keys.check_key)(key):
        raise _unauthorized()


async def _caller(request: HttpRequest) -> tuple[ApiKey | None, str]:
    """(the stored key, or None for a key of `GAMBIT_API_KEYS`; the caller's owner id), with
    at most one read; the stored key's `last_used_at` is noted later, with the call's
    recording (after the first bytes)."""
    key = api_keys.bearer(request.headers.get("Authorization"))
    if key and api_keys.environment_key(key):
        return None, api_keys.owner(key, None)
    record = await sync_to_async(api_keys.stored_key)(key) if key else None
    if key is None or record is None:
        raise _unauthorized()
    return record, api_keys.owner(key, record)


def _json_body(request: HttpRequest) -> Any:
    declared = request.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        raise ApiError(413, f"the body is larger than {MAX_BODY} bytes", code="body_too_large")
    if not (request.content_type or "").startswith("application/json"):
        raise ApiError(415, "send the body as application/json", code="unsupported_media_type")
    try:
        return json.loads(request.body or b"null")
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not valid JSON", code="invalid_json") from None


@csrf_exempt
async def models(request: HttpRequest) -> HttpResponse:
    try:
        if request.method != "GET":
            raise WrongMethod("GET")
        await _authorized(request)
    except ApiError as exc:
        return error(exc)
    workspace = await sync_to_async(current_workspace)()
    return JsonResponse(await sync_to_async(list_models)(workspace))


@csrf_exempt
async def responses(request: HttpRequest) -> HttpResponseBase:
    try:
        if request.method != "POST":
            raise WrongMethod("POST")
        key, owner = await _caller(request)
        body, items = parse_body(_json_body(request))
        route = response_store.route_of(
            request.headers.get(response_store.SESSION_HEADER), body.user
        )
        # Nothing before the first byte waits for the database when it need not: the
        # workspace row is looked up (or created) with the call's recording, and preparing
        # a provider model reads no table.
        call = ResponseCall(served_workspace(), body, items, key=key, owner=owner, route=route)
        if call.prepare_reads_tables():
            await sync_to_async(call.prepare)()
        else:
            call.prepare()
    except ApiError as exc:
        return error(exc)
    response: HttpResponseBase
    if body.stream:
        response = StreamingHttpResponse(_sse(call), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        final: dict[str, Any] | None = None
        async for event in call.events():
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                final = event["response"]
        assert final is not None
        # A run that failed answers 200 too: the resource says why, with the spec's fields.
        response = JsonResponse(final)
    # The simulator session the call is recorded in (the Test tab's /test/<id>/); a
    # `Gambit-Session` header with this id routes later calls into it.
    response[response_store.SESSION_ID_HEADER] = call.session_id
    return response


async def _as_caller(
    request: HttpRequest, function: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any
) -> JsonResponse:
    """Run a stored-response service function for the calling key, in a thread."""
    key, owner = await _caller(request)

    def work() -> dict[str, Any]:
        if key is not None:
            api_keys.touch(key)
        return function(*args, owner, **kwargs)

    return JsonResponse(await sync_to_async(work)())


@csrf_exempt
async def response_detail(request: HttpRequest, response_id: str) -> HttpResponse:
    """`GET /v1/responses/{id}` (the stored resource), `DELETE` (the deletion object)."""
    try:
        if request.method == "DELETE":
            return await _as_caller(request, response_store.delete, response_id)
        if request.method != "GET":
            raise WrongMethod("GET", "DELETE")
        if request.GET.get("stream", "").lower() in ("true", "1"):
            raise ApiError(
                400,
                "a stored response is retrieved whole; streaming it again is not supported",
                code="unsupported_value",
                param="stream",
            )
        return await _as_caller(request, response_store.retrieve, response_id)
    except ApiError as exc:
        return error(exc)


@csrf_exempt
async def response_input_items(request: HttpRequest, response_id: str) -> HttpResponse:
    """`GET /v1/responses/{id}/input_items?limit=&order=&after=&before=`: the list object."""
    try:
        if request.method != "GET":
            raise WrongMethod("GET")
        query = request.GET
        return await _as_caller(
            request,
            response_store.list_input_items,
            response_id,
            limit=query.get("limit"),
            order=query.get("order"),
            after=query.get("after"),
            before=query.get("before"),
        )
    except ApiError as exc:
        return error(exc)


async def _sse(call: ResponseCall) -> AsyncIterator[bytes]:
    async for event in call.events():
        data = json.dumps(event, ensure_ascii=False)
        yield f"event: {event['type']}\ndata: {data}\n\n".encode()
    yield b"data: [DONE]\n\n"


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """Legacy: off unless enabled; see endpoint/chat_completions.py (docs/endpoint.md)."""
    if not getattr(settings, "GAMBIT_CHAT_COMPLETIONS", False):
        return error(
            ApiError(
                404,
                "/v1/chat/completions is a legacy endpoint and is off; use /v1/responses, or "
                "start the server with --chat-completions",
                type="not_found",
                code="endpoint_disabled",
            )
        )
    from endpoint.chat_completions import handle

    try:
        if request.method != "POST":
            raise WrongMethod("POST")
        key, owner = await _caller(request)
        if key is not None:
            await sync_to_async(api_keys.touch)(key)
        return await handle(request, _json_body(request), owner=owner)
    except ApiError as exc:
        return error(exc)
