"""Open Responses wire schemas for `POST /v1/responses`: the subset docs/endpoint.md,
"Requests", lists.

Only this module defines the request shapes the endpoint accepts; it shares no types with the
legacy Chat Completions module (`chat_schemas.py`). Unknown top-level fields are kept (the
spec grows) but never acted on. Images and files (`input_image`, `input_file` in a user
message) are checked here (a data URL or an https URL); whether the model takes them is the
call's routing (`routing.resolve`). Other content parts (audio, video) are refused with a
structured `invalid_request_error` naming the parameter.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Role = Literal["system", "developer", "user", "assistant"]
TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
# Parts a user message may carry besides text, passed to a model whose provider takes them.
MEDIA_PARTS = {"input_image", "input_file"}
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
IMAGE_DETAILS = ("auto", "low", "high")
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)


class ApiError(Exception):
    """An error the endpoint answers with `{"error": {type, code, param, message}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def to_json(self) -> dict[str, Any]:
        return {
            "error": {
                "type": self.type,
                "code": self.code,
                "param": self.param,
                "message": self.message,
            }
        }


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


class ContentPart(_Wire):
    type: str
    text: str | None = None

    def to_item_part(self) -> dict[str, Any]:
        """The part as a conversation item carries it: text as `input_text`, an image or a
        file with the fields that reach the model."""
        if self.type in MEDIA_PARTS:
            fields = self.model_extra or {}
            keys = ("image_url", "detail") if self.type == "input_image" else FILE_KEYS
            part = {"type": self.type, **{k: fields[k] for k in keys if fields.get(k)}}
            if self.type == "input_image":
                part.setdefault("detail", "auto")
            return part
        return {"type": "input_text", "text": self.text or ""}


FILE_KEYS = ("file_data", "file_url", "filename")


def _joined_text(content: str | list[ContentPart]) -> str:
    """A message's content or a tool's output as one text: its text parts, joined."""
    if isinstance(content, str):
        return content
    return "".join(part.text or "" for part in content)


class MessageParam(_Wire):
    type: Literal["message"] = "message"
    role: Role
    content: str | list[ContentPart]
    id: str | None = None

    def text(self) -> str:
        return _joined_text(self.content)

    def media(self) -> list[ContentPart]:
        """Its image and file parts."""
        if isinstance(self.content, str):
            return []
        return [part for part in self.content if part.type in MEDIA_PARTS]


class FunctionCallParam(_Wire):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None


class FunctionCallOutputParam(_Wire):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ContentPart]
    id: str | None = None

    def text(self) -> str:
        return _joined_text(self.output)


class ItemReferenceParam(_Wire):
    type: Literal["item_reference"]
    id: str


class FunctionTool(_Wire):
    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CreateResponseBody(_Wire):
    model: str = Field(min_length=1, max_length=300)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Any = None
    # The specification's bounds: at least 16 output tokens; temperature 0-2; top_p 0-1.
    max_output_tokens: int | None = Field(default=None, ge=16)
    metadata: dict[str, str] | None = None
    stream: bool = False
    previous_response_id: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    # `store: false`: the response is not kept for `GET /v1/responses/{id}` (nor for
    # `previous_response_id`); the call is still recorded in the simulator.
    store: bool | None = None
    # Echoed by the response (the specification's bounds). Neither routes a call: a safety
    # identifier names an end user for abuse monitoring, a cache key a prompt prefix.
    safety_identifier: str | None = Field(default=None, max_length=64)
    prompt_cache_key: str | None = Field(default=None, max_length=64)
    # OpenAI's `user` (not in the specification, which replaced it with the two above):
    # routes the call into one simulator session per key, model and value, like the
    # `Gambit-Session` header (docs/endpoint.md, "Sessions").
    user: str | None = Field(default=None, min_length=1, max_length=256)
    # Sent to the model (a deck's model calls get it as a model parameter); the response
    # reports it (true unless false).
    parallel_tool_calls: bool | None = None
    # A proxied provider model gets it; a deck refuses it (routing.resolve).
    max_tool_calls: int | None = Field(default=None, ge=1)
    # Refused when set (parse_body): no background mode, no conversation objects.
    background: bool | None = None
    conversation: Any = None

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) > 16:
            raise ValueError("metadata holds at most 16 keys")
        return value


Item = MessageParam | FunctionCallParam | FunctionCallOutputParam | ItemReferenceParam
_ITEM_TYPES: dict[str, type[_Wire]] = {
    "message": MessageParam,
    "function_call": FunctionCallParam,
    "function_call_output": FunctionCallOutputParam,
    "item_reference": ItemReferenceParam,
}


def parse_body(data: Any) -> tuple[CreateResponseBody, list[Item]]:
    """The request and its input items, or an `ApiError` naming the parameter at fault."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    try:
        body = CreateResponseBody.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise ApiError(400, f"{param}: {first['msg']}", code="invalid_value", param=param) from None
    body.tool_choice = parse_tool_choice(body.tool_choice, body.tools or [])
    if body.background:
        raise ApiError(
            400,
            "background: responses run while the request is open; background mode is not "
            "supported (send the request without it, or stream the response)",
            code="unsupported_value",
            param="background",
        )
    if body.conversation is not None:
        raise ApiError(
            400,
            "conversation: conversation objects are not supported; continue a conversation "
            "with previous_response_id, or name it with the Gambit-Session header",
            code="unsupported_value",
            param="conversation",
        )
    if isinstance(body.input, str):
        return body, [MessageParam(role="user", content=body.input)]
    items: list[Item] = []
    for index, raw in enumerate(body.input):
        param = f"input[{index}]"
        kind = raw.get("type", "message" if "role" in raw else None)
        model = _ITEM_TYPES.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise ApiError(
                400,
                f"{param}: item type {kind!r} is not supported here "
                "(message, function_call, function_call_output, item_reference)",
                code="unsupported_item_type",
                param=f"{param}.type",
            )
        try:
            item = model.model_validate({"type": kind, **raw})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join([param, *(str(p) for p in first["loc"])])
            raise ApiError(
                400, f"{where}: {first['msg']}", code="invalid_value", param=where
            ) from None
        media_allowed = isinstance(item, MessageParam) and item.role == "user"
        for part_index, part in enumerate(_parts(item)):
            where = f"{param}.content[{part_index}]"
            if part.type in MEDIA_PARTS and media_allowed:
                check_media(part, where)
            elif part.type not in TEXT_PARTS:
                kinds = "text, input_image and input_file" if media_allowed else "text"
                raise ApiError(
                    400,
                    f"{where}: content part {part.type!r} is not supported here (only "
                    f"{kinds} parts are)",
                    code="unsupported_content",
                    param=f"{where}.type",
                )
        items.append(item)  # type: ignore[arg-type]
    if not items:
        raise ApiError(400, "input must not be empty", code="invalid_value", param="input")
    return body, items


def check_media(part: ContentPart, where: str) -> None:
    """An image or file part: a data URL (base64) or an https URL; no uploaded-file ids
    (there is no files API here). The body's size limit bounds what a data URL carries."""
    fields = part.model_extra or {}

    def refuse(message: str, key: str) -> ApiError:
        return ApiError(
            400, f"{where}.{key}: {message}", code="invalid_value", param=f"{where}.{key}"
        )

    if fields.get("file_id"):
        raise ApiError(
            400,
            f"{where}.file_id: uploaded files are not supported here; send the content as a "
            "data URL or an https URL",
            code="unsupported_value",
            param=f"{where}.file_id",
        )
    if part.type == "input_image":
        url = fields.get("image_url")
        if not isinstance(url, str) or not url:
            raise refuse("an input_image needs image_url (a data URL or an https URL)", "image_url")
        if fields.get("detail") is not None and fields["detail"] not in IMAGE_DETAILS:
            raise refuse(f"detail is one of {', '.join(IMAGE_DETAILS)}", "detail")
        _check_url(url, IMAGE_TYPES, refuse, "image_url")
        return
    data, url = fields.get("file_data"), fields.get("file_url")
    if bool(data) == bool(url):
        raise refuse("an input_file needs one of file_data (a data URL) or file_url", "file_data")
    if data:
        if not isinstance(data, str):
            raise refuse("file_data is a data URL (data:<type>;base64,...)", "file_data")
        _check_url(data, None, refuse, "file_data")
    else:
        _check_url(url, None, refuse, "file_url")
        if not isinstance(url, str) or not url.startswith("https://"):
            raise refuse("file_url is an https URL", "file_url")


def _check_url(url: Any, media_types: tuple[str, ...] | None, refuse: Any, key: str) -> None:
    if not isinstance(url, str):
        raise refuse("must be a string", key)
    if url.startswith("https://"):
        return
    match = _DATA_URL.match(url)
    if match is None:
        raise refuse("must be a data URL (data:<type>;base64,...) or an https URL", key)
    if media_types is not None and match.group(1).lower() not in media_types:
        raise refuse(
            f"image type {match.group(1)!r} is not supported ({', '.join(media_types)})", key
        )
    try:
        base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise refuse("the data URL's content is not valid base64", key) from None


def has_media(items: list[Item]) -> bool:
    return any(isinstance(item, MessageParam) and item.media() for item in items)


TOOL_CHOICE_MODES = ("auto", "none", "required")


def parse_tool_choice(value: Any, tools: list[FunctionTool]) -> str | dict[str, str] | None:
    """`tool_choice`: `"auto" | "none" | "required"`, or `{"type": "function", "name": N}` naming
    one of the request's function tools. The specification's `allowed_tools` form is refused
    (a deck's own tools run inside the engine, which cannot hold them to a subset), and so is
    anything else, with a structured 400 naming the parameter."""
    if value is None or value in TOOL_CHOICE_MODES:
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name")
        if set(value) - {"type", "name"} or not isinstance(name, str) or not name:
            raise ApiError(
                400,
                'tool_choice: a function choice is {"type": "function", "name": "<tool>"}',
                code="invalid_value",
                param="tool_choice",
            )
        if name not in {t.name for t in tools}:
            raise ApiError(
                400,
                f"tool_choice: {name!r} is not one of the request's function tools",
                code="invalid_value",
                param="tool_choice.name",
            )
        return {"type": "function", "name": name}
    if isinstance(value, dict) and value.get("type") == "allowed_tools":
        raise ApiError(
            400,
            "tool_choice: allowed_tools is not supported here; send only the tools the model may "
            'call, or name one with {"type": "function", "name": ...}',
            code="unsupported_value",
            param="tool_choice.type",
        )
    raise ApiError(
        400,
        'tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}',
        code="invalid_value",
        param="tool_choice",
    )


def _parts(item: Any) -> list[ContentPart]:
    if isinstance(item, MessageParam) and isinstance(item.content, list):
        return item.content
    if isinstance(item, FunctionCallOutputParam) and isinstance(item.output, list):
        return item.output
    return []


def last_user_text(items: list[Item]) -> str | None:
    """The text of the request's last user message, unless a tool's output follows it."""
    for item in reversed(items):
        if isinstance(item, MessageParam) and item.role == "user":
            return item.text()
        if isinstance(item, FunctionCallOutputParam):
            return None
    return None
