"""Open Responses wire schemas for `POST /v1/responses`: the subset docs/endpoint.md,
"Requests", lists.

Only this module defines the request shapes the endpoint accepts; it shares no types with the
legacy Chat Completions module (`chat_schemas.py`). Unknown top-level fields are kept (the
spec grows) but never acted on; unsupported content parts (images, files, audio, video) are
refused with a structured `invalid_request_error` naming the parameter.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Role = Literal["system", "developer", "user", "assistant"]
TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}


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


class MessageParam(_Wire):
    type: Literal["message"] = "message"
    role: Role
    content: str | list[ContentPart]
    id: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content)


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
        if isinstance(self.output, str):
            return self.output
        return "".join(part.text or "" for part in self.output)


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
        for part_index, part in enumerate(_parts(item)):
            if part.type not in TEXT_PARTS:
                raise ApiError(
                    400,
                    f"{param}.content[{part_index}]: content part {part.type!r} is not supported "
                    "(only text parts are)",
                    code="unsupported_content",
                    param=f"{param}.content[{part_index}].type",
                )
        items.append(item)  # type: ignore[arg-type]
    if not items:
        raise ApiError(400, "input must not be empty", code="invalid_value", param="input")
    return body, items


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
