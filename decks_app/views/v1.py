"""`/v1/*`: decks served over Open Responses (`POST /v1/responses`, `GET /v1/models`) and,
when enabled, the legacy `POST /v1/chat/completions`. Every request needs an API key; every
error is `{"error": {type, code, param, message}}` with its HTTP status, never a 500 page.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
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

from decks_app.api.responses_schemas import ApiError, parse_body
from decks_app.models import ApiKey
from decks_app.services import api_keys
from decks_app.services.responses_api import ResponseCall, list_models, served_workspace
from decks_app.services.workspaces import current_workspace

MAX_BODY = 10 * 1024 * 1024


def error(exc: ApiError) -> JsonResponse:
    return JsonResponse(exc.to_json(), status=exc.status)


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


async def _key_record(request: HttpRequest) -> ApiKey | None:
    """Check the key with at most one read; the stored key's `last_used_at` is noted later,
    with the call's recording (after the first bytes)."""
    key = api_keys.bearer(request.headers.get("Authorization"))
    if api_keys.environment_key(key):
        return None
    record = await sync_to_async(api_keys.stored_key)(key) if key else None
    if record is None:
        raise _unauthorized()
    return record


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
            raise ApiError(405, "use GET", code="method_not_allowed")
        await _authorized(request)
    except ApiError as exc:
        return error(exc)
    workspace = await sync_to_async(current_workspace)()
    return JsonResponse(await sync_to_async(list_models)(workspace))


@csrf_exempt
async def responses(request: HttpRequest) -> HttpResponseBase:
    try:
        if request.method != "POST":
            raise ApiError(405, "use POST", code="method_not_allowed")
        key = await _key_record(request)
        body, items = parse_body(_json_body(request))
        # Nothing before the first byte waits for the database when it need not: the
        # workspace row is looked up (or created) with the call's recording, and preparing
        # a provider model reads no table.
        call = ResponseCall(served_workspace(), body, items, key=key)
        if call.prepare_reads_tables():
            await sync_to_async(call.prepare)()
        else:
            call.prepare()
    except ApiError as exc:
        return error(exc)
    if body.stream:
        response = StreamingHttpResponse(_sse(call), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    final: dict[str, Any] | None = None
    async for event in call.events():
        if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
            final = event["response"]
    assert final is not None
    if final["status"] == "failed" and final.get("error"):
        # The run failed: the resource says why, with the spec's error fields.
        return JsonResponse(final, status=200)
    return JsonResponse(final)


async def _sse(call: ResponseCall) -> AsyncIterator[bytes]:
    async for event in call.events():
        data = json.dumps(event, ensure_ascii=False)
        yield f"event: {event['type']}\ndata: {data}\n\n".encode()
    yield b"data: [DONE]\n\n"


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """Legacy (seed 003): off unless enabled; see decks_app/api/chat_completions.py."""
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
    from decks_app.api.chat_completions import handle

    try:
        if request.method != "POST":
            raise ApiError(405, "use POST", code="method_not_allowed")
        await _authorized(request)
        return await handle(request, _json_body(request))
    except ApiError as exc:
        return error(exc)
