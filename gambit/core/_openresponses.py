"""Open Responses types: the subset Gambit implements, as pydantic v2 models.

The specification is https://www.openresponses.org/. Scope: text content parts
(`input_text`, `output_text`), three item types (`message`, `function_call`,
`function_call_output`), function tools, a minimal request and response, and the streaming
events Gambit relies on.

Fidelity rules, because nothing a model produced may be silently dropped:

- Every model allows extra fields and keeps them (`model_extra`), so provider fields outside
  the subset (`status`, `annotations`, `logprobs`, `sequence_number`, ...) survive a round
  trip.
- Item, content-part and event types outside the subset are not rejected: they parse into
  `UnknownItem`, `UnknownContent` and `UnknownResponseEvent`, which keep every field. This is
  how reasoning items and namespaced `ns:type` extension items travel through state and traces.
- `arguments` and `output` are raw strings, carried byte for byte.

Serialisation: `to_dict()` on every model (and `item_to_dict`) gives JSON-ready dicts that
omit declared optional fields whose value is None. Extra fields are kept as they are, even
when null, and nothing nested inside a raw JSON value (`parameters`, `metadata`, ...) is
touched.

Lenient input, canonical output: a message item may omit `type` or give `content` as a plain
string; a request may give `input` as a string; tools and tool choice may use the flat
OpenAI Responses form (`{"type": "function", "name": ...}`). All are normalised to the
shapes below.
"""

import copy
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "CreateResponseRequest",
    "CreateResponseResponse",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "InputTextContent",
    "MessageItem",
    "OutputItemAddedEvent",
    "OutputItemDoneEvent",
    "OutputTextContent",
    "OutputTextDeltaEvent",
    "OutputTextDoneEvent",
    "ResponseCompletedEvent",
    "ResponseContent",
    "ResponseCreatedEvent",
    "ResponseError",
    "ResponseEvent",
    "ResponseFailedEvent",
    "ResponseFunctionDefinition",
    "ResponseItem",
    "ResponseStatus",
    "ResponseTextConfig",
    "ResponseTextFormat",
    "ResponseToolChoice",
    "ResponseToolDefinition",
    "ResponseUsage",
    "ToolChoiceFunction",
    "ToolChoiceFunctionName",
    "UnknownContent",
    "UnknownItem",
    "UnknownResponseEvent",
    "event_from_dict",
    "event_to_dict",
    "function_call_item",
    "function_call_output_item",
    "item_from_dict",
    "item_text",
    "item_to_dict",
    "items_from_json",
    "items_to_json",
    "json_schema_text_format",
    "message_item",
    "output_text",
]


class _JsonModel(BaseModel):
    """Base of every wire model: extra fields kept, None-valued optional fields omitted."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    # Declared fields that are serialised even when None (for example chat `content: null`).
    _keep_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            cls = type(self)
            rules = _OMIT_RULES.get(cls)
            if rules is None:
                rules = _OMIT_RULES[cls] = _omit_rules(cls)
            values = self.__dict__
            for name, keys in rules:
                if values.get(name) is None:
                    for key in keys:
                        data.pop(key, None)
        return data

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict in the wire shape (aliases, None-valued optional fields omitted)."""
        data = _fast_dump(self)
        return data if data is not None else self.model_dump(mode="json", by_alias=True)


# ---- to_dict without pydantic's serializer, for plain JSON values
#
# A wire model holds JSON values almost always: strings, numbers, lists, dicts and other wire
# models. For those, `to_dict()` walks the fields itself (declared fields in order with their
# JSON keys, None-valued ones left out unless kept, then the extras): the wrap serializer
# above calls back into Python for every nested model, which made a dump cost 5-10 µs. Any
# other value (a non-finite float, a tuple, an enum, a non-string key, a model of another
# kind) gives up, and pydantic dumps the whole model.

_GIVE_UP: Any = object()
# Per model class: (field name, JSON key, kept when None) per field, or False when the class
# has anything that changes its dump (computed fields, serializers of its own, exclusions).
_DUMP_PLANS: dict[type, Any] = {}


def _dump_plan(cls: type[_JsonModel]) -> Any:
    decorators = cls.__pydantic_decorators__
    if (
        cls.__pydantic_root_model__
        or cls.__pydantic_computed_fields__
        or decorators.field_serializers
        or len(decorators.model_serializers) != 1
    ):
        return False
    plan = []
    for name, info in cls.model_fields.items():
        if info.exclude:
            return False
        plan.append((name, info.serialization_alias or info.alias or name, name in cls._keep_none))
    return tuple(plan)


def _fast_dump(model: _JsonModel) -> dict[str, Any] | None:
    cls = type(model)
    plan = _DUMP_PLANS.get(cls)
    if plan is None:
        plan = _DUMP_PLANS[cls] = _dump_plan(cls)
    if plan is False:
        return None
    values = model.__dict__
    data: dict[str, Any] = {}
    for name, key, keep_none in plan:
        value = values.get(name, _GIVE_UP)
        if value is None:
            if keep_none:
                data[key] = None
            continue
        value = _fast_value(value)
        if value is _GIVE_UP:
            return None
        data[key] = value
    extra = model.__pydantic_extra__
    if extra:
        for key, value in extra.items():
            value = _fast_value(value)
            if value is _GIVE_UP:
                return None
            data[key] = value
    return data


def _fast_value(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if value - value == 0 else _GIVE_UP  # JSON mode turns inf and nan to null
    if kind is list:
        out = []
        for item in value:
            item = _fast_value(item)
            if item is _GIVE_UP:
                return _GIVE_UP
            out.append(item)
        return out
    if kind is dict:
        copy_: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return _GIVE_UP
            item = _fast_value(item)
            if item is _GIVE_UP:
                return _GIVE_UP
            copy_[key] = item
        return copy_
    if kind in _DUMP_PLANS or isinstance(value, _JsonModel):
        data = _fast_dump(value)
        return _GIVE_UP if data is None else data
    return _GIVE_UP


# Per model class: (field name, the keys it may be serialised under) for each field that is
# dropped when None. Computed once per class: walking `model_fields` on every dump was the
# largest cost of serialising a long conversation.
_OMIT_RULES: dict[type, tuple[tuple[str, tuple[str, ...]], ...]] = {}


_setattr = object.__setattr__
_IMMUTABLE = (type(None), str, int, float, bool, tuple, frozenset)
# Per model class: (field names, required field names, every field in declaration order with
# its plain default (a placeholder for the others), (name, factory) of the other defaults,
# (name, factory) of the private attributes, whether extras are kept), or False when
# `construct` must defer to `model_construct`.
_CONSTRUCT_PLANS: dict[type, Any] = {}


def construct[M: BaseModel](cls: type[M], /, **values: Any) -> M:
    """`cls.model_construct(**values)` (no validation: `values` must already be valid, given
    by field name), without its generic per-call work: the defaults of each model class are
    collected once. Used on the hot path of a run, where `model_construct` cost more than
    validating.

    The instance is the one `model_construct` makes: every field in `__dict__`, the given
    names as the fields set, no extras, private attributes at their defaults. Models with a
    `model_post_init` of their own, and unknown names, go through `model_construct`.
    """
    plan = _plan(cls)
    if plan is False or not plan[1] <= values.keys() <= plan[0]:
        return cls.model_construct(**values)
    return _instance(cls, plan, values, {} if plan[5] else None)


def _plan(cls: type[BaseModel]) -> Any:
    plan = _CONSTRUCT_PLANS.get(cls)
    if plan is None:
        plan = _CONSTRUCT_PLANS[cls] = _construct_plan(cls)
    return plan


def _instance[M: BaseModel](
    cls: type[M], plan: Any, fields: dict[str, Any], extra: dict[str, Any] | None
) -> M:
    """An instance of `cls` from its construct plan: `fields` (valid, by field name) over the
    defaults in declaration order, as `model_construct` makes it; `fields` and `extra` keys
    as the fields set."""
    _names, _required, defaults, factories, private, _extra = plan
    data = dict(defaults)
    for name, factory in factories:
        if name not in fields:
            data[name] = factory()
    data.update(fields)
    model = cls.__new__(cls)
    _setattr(model, "__dict__", data)
    _setattr(model, "__pydantic_fields_set__", {*fields, *extra} if extra else set(fields))
    _setattr(model, "__pydantic_extra__", extra)
    _setattr(model, "__pydantic_private__", {k: f() for k, f in private} if private else None)
    return model


def _construct_plan(cls: type[BaseModel]) -> Any:
    from pydantic._internal._model_construction import init_private_attributes

    if cls.__pydantic_root_model__ or (
        cls.__pydantic_post_init__ is not None
        and cls.model_post_init is not init_private_attributes
    ):
        return False
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    required = []
    for name, info in cls.model_fields.items():
        defaults[name] = None  # a placeholder that keeps the field's place
        if info.is_required():
            required.append(name)
            continue
        if info.default_factory is not None:
            # A factory that reads the other fields' validated data needs validation
            # (the property's name changed across pydantic 2 releases).
            takes_data = getattr(info, "default_factory_takes_validated_data", None)
            if takes_data is None:
                takes_data = getattr(info, "default_factory_takes_data", False)
            if takes_data:
                return False
            factories.append((name, info.default_factory))
        elif isinstance(info.default, _IMMUTABLE):
            defaults[name] = info.default
        else:  # a mutable default is copied for each instance, as pydantic does
            factories.append((name, lambda default=info.default: copy.deepcopy(default)))
    private = tuple((name, attr.get_default) for name, attr in cls.__private_attributes__.items())
    extra = cls.model_config.get("extra") == "allow"
    names = frozenset(cls.model_fields)
    return names, frozenset(required), defaults, tuple(factories), private, extra


def _omit_rules(cls: type[_JsonModel]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    rules = []
    for name, info in cls.model_fields.items():
        if name in cls._keep_none:
            continue
        keys = {name}
        if info.alias:
            keys.add(info.alias)
        if info.serialization_alias:
            keys.add(info.serialization_alias)
        rules.append((name, tuple(keys)))
    return tuple(rules)


class _CamelModel(_JsonModel):
    """A wire model whose JSON keys are camelCase (Gambit's own records: usage, state, traces)."""

    model_config = ConfigDict(
        extra="allow",
        defer_build=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


# --------------------------------------------------------------------------- content parts


class InputTextContent(_JsonModel):
    type: Literal["input_text"] = "input_text"
    text: str


class OutputTextContent(_JsonModel):
    type: Literal["output_text"] = "output_text"
    text: str


class UnknownContent(_JsonModel):
    """A content part outside the subset (refusal, summary_text, ...), kept verbatim."""

    type: str
    text: str | None = None


_KNOWN_CONTENT = frozenset({"input_text", "output_text"})


def _content_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if type(kind) is str and kind in _KNOWN_CONTENT else "other"


ResponseContent = Annotated[
    Annotated[InputTextContent, Tag("input_text")]
    | Annotated[OutputTextContent, Tag("output_text")]
    | Annotated[UnknownContent, Tag("other")],
    Discriminator(_content_tag),
]
"""A content part: `InputTextContent | OutputTextContent | UnknownContent`, by `type`."""


# --------------------------------------------------------------------------- items


class MessageItem(_JsonModel):
    type: Literal["message"] = "message"
    role: Literal["system", "user", "assistant"]
    content: list[ResponseContent]
    id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _string_content(cls, data: Any) -> Any:
        # Open Responses "easy" input message: `content` may be a plain string.
        if isinstance(data, Mapping) and isinstance(data.get("content"), str):
            part = "output_text" if data.get("role") == "assistant" else "input_text"
            data = {**data, "content": [{"type": part, "text": data["content"]}]}
        return data


class FunctionCallItem(_JsonModel):
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str
    id: str | None = None


class FunctionCallOutputItem(_JsonModel):
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str
    id: str | None = None


class UnknownItem(_JsonModel):
    """An item outside the subset (reasoning, `ns:type` extension items, ...), kept verbatim."""

    type: str
    id: str | None = None


_KNOWN_ITEMS = frozenset({"message", "function_call", "function_call_output"})


def _item_tag(value: Any) -> str:
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind is None and "role" in value:
            return "message"  # Open Responses allows a message without `type`
    else:
        kind = getattr(value, "type", None)
    return kind if type(kind) is str and kind in _KNOWN_ITEMS else "other"


ResponseItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[UnknownItem, Tag("other")],
    Discriminator(_item_tag),
]
"""An item: `MessageItem | FunctionCallItem | FunctionCallOutputItem | UnknownItem`, by `type`."""

# Built on first use: building every validator at import made `import gambit` slow.
_DEFER = ConfigDict(defer_build=True)
_ITEM_ADAPTER: TypeAdapter[Any] = TypeAdapter(ResponseItem, config=_DEFER)
_ITEMS_ADAPTER: TypeAdapter[list[Any]] = TypeAdapter(list[ResponseItem], config=_DEFER)


# --------------------------------------------------------------------------- tools


def _nest_function(data: Any, keys: tuple[str, ...], **defaults: Any) -> Any:
    """OpenAI Responses' flat form of a tool or tool choice (`{type, name, ...}` at the top
    level) as ours, `{type, function: {name, ...}}`: `keys` move into `function`, beside the
    `defaults` they lack. Any other value is left as it is."""
    if isinstance(data, Mapping) and "function" not in data and "name" in data:
        data = dict(data)
        data["function"] = {**defaults, **{k: data.pop(k) for k in keys if k in data}}
    return data


class ResponseFunctionDefinition(_JsonModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any]


class ResponseToolDefinition(_JsonModel):
    """`{type: "function", function: {name, description?, parameters}}`."""

    type: Literal["function"] = "function"
    function: ResponseFunctionDefinition

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        return _nest_function(
            data,
            ("name", "description", "parameters", "strict"),
            parameters={"type": "object", "properties": {}},
        )


class ToolChoiceFunctionName(_JsonModel):
    name: str


class ToolChoiceFunction(_JsonModel):
    """`{type: "function", function: {name}}`: force one named tool."""

    type: Literal["function"] = "function"
    function: ToolChoiceFunctionName

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        return _nest_function(data, ("name",))


ResponseToolChoice = Literal["auto", "required", "none"] | ToolChoiceFunction
"""`"auto" | "required" | {type:"function", function:{name}}`; `"none"` is also accepted."""


# --------------------------------------------------------------------------- request


class ResponseTextFormat(_JsonModel):
    """`text.format`, for structured output: `{type:"json_schema", name, strict, schema}`."""

    type: Literal["json_schema", "json_object", "text"] | str = "json_schema"
    name: str | None = None
    description: str | None = None
    strict: bool | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")

    model_config = ConfigDict(
        extra="allow",
        defer_build=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class ResponseTextConfig(_JsonModel):
    format: ResponseTextFormat | None = None


def json_schema_text_format(
    name: str, schema: Mapping[str, Any], *, strict: bool = True
) -> ResponseTextConfig:
    """`{"format": {"type": "json_schema", "name": name, "strict": strict, "schema": schema}}`."""
    return ResponseTextConfig(
        format=ResponseTextFormat(type="json_schema", name=name, strict=strict, schema=dict(schema))
    )


class CreateResponseRequest(_JsonModel):
    model: str
    input: list[ResponseItem]
    instructions: str | None = None
    tools: list[ResponseToolDefinition] | None = None
    tool_choice: ResponseToolChoice | None = None
    stream: bool | None = None
    max_output_tokens: int | None = None
    metadata: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    text: ResponseTextConfig | None = None
    previous_response_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _string_input(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("input"), str):
            data = {**data, "input": [message_item("user", data["input"])]}
        return data


# --------------------------------------------------------------------------- response


class ResponseUsage(_CamelModel):
    """Token usage; JSON keys are camelCase: `promptTokens`, `completionTokens`, ..."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None


class ResponseError(_JsonModel):
    code: str | None = None
    message: str | None = None


ResponseStatus = Literal["completed", "in_progress", "failed", "incomplete"]


class CreateResponseResponse(_JsonModel):
    id: str
    object: Literal["response"] = "response"
    model: str | None = None
    created: int | float | None = None
    status: ResponseStatus | None = None
    output: list[ResponseItem] = Field(default_factory=list)
    usage: ResponseUsage | None = None
    error: ResponseError | None = None

    def incomplete_details_or_none(self) -> dict[str, Any] | None:
        """`{"reason": ...}` of a response that stopped short (status `incomplete`; the
        reason "unknown" when the server gave none), else None."""
        if self.status != "incomplete":
            return None
        details = (self.model_extra or {}).get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return {"reason": reason if isinstance(reason, str) and reason else "unknown"}


# --------------------------------------------------------------------------- stream events


class _EventModel(_JsonModel):
    sequence_number: int | None = None


class ResponseCreatedEvent(_EventModel):
    type: Literal["response.created"] = "response.created"
    response: CreateResponseResponse


class OutputTextDeltaEvent(_EventModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    output_index: int
    delta: str
    item_id: str | None = None
    content_index: int | None = None


class OutputTextDoneEvent(_EventModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    output_index: int
    text: str
    item_id: str | None = None
    content_index: int | None = None


class OutputItemAddedEvent(_EventModel):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    output_index: int
    item: ResponseItem


class OutputItemDoneEvent(_EventModel):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    output_index: int
    item: ResponseItem


class ResponseCompletedEvent(_EventModel):
    type: Literal["response.completed"] = "response.completed"
    response: CreateResponseResponse


class ResponseFailedEvent(_EventModel):
    """`{type: "response.failed", error}`; an OpenAI-style `response.error` fills `error`."""

    type: Literal["response.failed"] = "response.failed"
    error: ResponseError | None = None
    response: CreateResponseResponse | None = None

    @model_validator(mode="after")
    def _error_from_response(self) -> "ResponseFailedEvent":
        if self.error is None:
            self.error = (self.response.error if self.response else None) or ResponseError()
        return self


class UnknownResponseEvent(_EventModel):
    """Any other event (reasoning deltas, `tool.call`, `codex.event`, ...), kept verbatim."""

    type: str


_EVENT_MODELS: dict[str, type[_EventModel]] = {
    "response.created": ResponseCreatedEvent,
    "response.output_text.delta": OutputTextDeltaEvent,
    "response.output_text.done": OutputTextDoneEvent,
    "response.output_item.added": OutputItemAddedEvent,
    "response.output_item.done": OutputItemDoneEvent,
    "response.completed": ResponseCompletedEvent,
    "response.failed": ResponseFailedEvent,
}


def _event_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if type(kind) is str and kind in _EVENT_MODELS else "other"


ResponseEvent = Annotated[
    Annotated[ResponseCreatedEvent, Tag("response.created")]
    | Annotated[OutputTextDeltaEvent, Tag("response.output_text.delta")]
    | Annotated[OutputTextDoneEvent, Tag("response.output_text.done")]
    | Annotated[OutputItemAddedEvent, Tag("response.output_item.added")]
    | Annotated[OutputItemDoneEvent, Tag("response.output_item.done")]
    | Annotated[ResponseCompletedEvent, Tag("response.completed")]
    | Annotated[ResponseFailedEvent, Tag("response.failed")]
    | Annotated[UnknownResponseEvent, Tag("other")],
    Discriminator(_event_tag),
]
"""A stream event, by `type`; types outside the minimal set parse as `UnknownResponseEvent`."""

_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(ResponseEvent, config=_DEFER)


# --------------------------------------------------------------------------- helpers


def item_to_dict(item: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """An item (or any wire model) as a JSON-ready dict, None-valued optional fields omitted."""
    if isinstance(item, _JsonModel):  # the usual case first: Mapping is an ABC, slow to test
        return item.to_dict()
    model: BaseModel = item_from_dict(item) if isinstance(item, Mapping) else item
    if isinstance(model, _JsonModel):
        return model.to_dict()
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def item_from_dict(data: Mapping[str, Any] | BaseModel) -> Any:
    """Validate one item dict into its `ResponseItem` model."""
    if type(data) is dict:
        item = _plain_item(data)
        if item is not None:
            return item
    return _ITEM_ADAPTER.validate_python(data)


def _plain_item(data: dict[str, Any]) -> Any:
    """The model validation gives for an item dict in one of the three common shapes (a
    message of text parts, a function call, a function call's output) whose every declared
    field already has its exact type; None for anything else, which the validator takes.

    Why: a one-turn `gambit run` reads one such item, and building the item validator for
    it (with pydantic's search of every installed package for plugins) cost about a sixth of
    the command's own time. tests/core/test_openresponses_plain_items.py holds this equal
    to the validator's result, extras and fields set included.
    """
    kind = data.get("type")
    ident = data.get("id")
    if ident is not None and type(ident) is not str:
        return None
    if kind == "message":
        role, content = data.get("role"), data.get("content")
        if type(role) is not str or role not in _ROLES or type(content) is not list:
            return None
        parts: list[InputTextContent | OutputTextContent] = []
        for part in content:
            if type(part) is not dict or type(part.get("text")) is not str:
                return None
            part_kind = part.get("type")
            if part_kind == "output_text":
                parts.append(_as_validated(OutputTextContent, part))
            elif part_kind == "input_text":
                parts.append(_as_validated(InputTextContent, part))
            else:
                return None
        return _as_validated(MessageItem, {**data, "content": parts})
    if kind == "function_call":
        fields: tuple[str, ...] = ("call_id", "name", "arguments")
        model: type[_JsonModel] = FunctionCallItem
    elif kind == "function_call_output":
        fields, model = ("call_id", "output"), FunctionCallOutputItem
    else:
        return None
    for name in fields:
        if type(data.get(name)) is not str:
            return None
    return _as_validated(model, data)


def _as_validated[M: _JsonModel](cls: type[M], data: dict[str, Any]) -> M:
    """`cls` built from `data` as validation builds it (every given key in the fields set,
    unknown keys as extras) when each declared field in `data` is already valid."""
    plan = _plan(cls)
    if plan is False:  # a model with its own post-init: only validation builds it
        return cls.model_validate(data)
    names = plan[0]
    fields, extra = {}, {}
    for key, value in data.items():
        if key in names:
            fields[key] = value
        else:
            extra[key] = value
    return _instance(cls, plan, fields, extra)


def items_from_json(data: Iterable[Mapping[str, Any] | BaseModel]) -> list[Any]:
    """Validate a list of item dicts (or models) into `list[ResponseItem]`."""
    return _ITEMS_ADAPTER.validate_python(list(data))


def items_to_json(items: Iterable[BaseModel | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The inverse of `items_from_json`."""
    return [item_to_dict(item) for item in items]


def event_from_dict(data: Mapping[str, Any] | BaseModel) -> Any:
    """Validate one stream event dict into its `ResponseEvent` model."""
    return _EVENT_ADAPTER.validate_python(data)


def event_to_dict(event: BaseModel) -> dict[str, Any]:
    return item_to_dict(event)


def message_item(
    role: Literal["system", "user", "assistant"], text: str, *, id: str | None = None
) -> MessageItem:
    """A one-part message: `output_text` for the assistant, `input_text` for system and user."""
    part: InputTextContent | OutputTextContent
    if type(text) is str and role in _ROLES and (id is None or type(id) is str):
        # Valid by construction: built without validation (the runtime makes several per
        # model pass), the same instance `MessageItem(...)` gives.
        kind: type[InputTextContent | OutputTextContent]
        kind = OutputTextContent if role == "assistant" else InputTextContent
        part = construct(kind, text=text)
        return construct(MessageItem, role=role, content=[part], id=id)
    part = OutputTextContent(text=text) if role == "assistant" else InputTextContent(text=text)
    return MessageItem(role=role, content=[part], id=id)


_ROLES = frozenset({"system", "user", "assistant"})


def function_call_item(
    call_id: str, name: str, arguments: str, *, id: str | None = None
) -> FunctionCallItem:
    return FunctionCallItem(call_id=call_id, name=name, arguments=arguments, id=id)


def function_call_output_item(
    call_id: str, output: str, *, id: str | None = None
) -> FunctionCallOutputItem:
    return FunctionCallOutputItem(call_id=call_id, output=output, id=id)


def item_text(item: Any) -> str:
    """The concatenated text of a message's parts (any part with a string `text`); else ""."""
    if not isinstance(item, MessageItem):
        return ""
    return "".join(part.text for part in item.content if isinstance(part.text, str))


def output_text(response: CreateResponseResponse | Iterable[Any]) -> str:
    """The concatenated `output_text` parts of the assistant messages in a response's output."""
    items = response.output if isinstance(response, CreateResponseResponse) else response
    return "".join(
        part.text
        for item in items
        if isinstance(item, MessageItem) and item.role == "assistant"
        for part in item.content
        if isinstance(part, OutputTextContent)
    )
