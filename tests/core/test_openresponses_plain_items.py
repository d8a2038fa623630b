"""`item_from_dict` builds the common item shapes without the validator; the result must be
exactly what validation gives (class, fields, extras, fields set, dump), and everything else
must still go through the validator (and fail there when it is invalid)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from gambit.core._openresponses import _ITEM_ADAPTER, _plain_item, item_from_dict

# Values that are sometimes the right type and often not.
ODD = st.one_of(
    st.none(),
    st.integers(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
TEXT = st.one_of(st.text(max_size=8), ODD)
EXTRA_KEYS = st.sampled_from(["status", "annotations", "logprobs", "x-ext", "metadata"])


def _with_extras(base: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    return {**extras, **base}


def _maybe(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """{key: value} or {} (the key left out)."""
    return st.one_of(st.just({}), value.map(lambda v: {key: v}))


EXTRAS = st.dictionaries(EXTRA_KEYS, st.one_of(TEXT, st.lists(TEXT, max_size=2)), max_size=2)

PART = st.builds(
    lambda kind, text, extras: _with_extras({**kind, **text}, extras),
    _maybe("type", st.one_of(st.sampled_from(["output_text", "input_text", "refusal"]), ODD)),
    _maybe("text", TEXT),
    EXTRAS,
)

MESSAGE = st.builds(
    lambda kind, role, content, ident, extras: _with_extras(
        {**kind, **role, **content, **ident}, extras
    ),
    _maybe("type", st.just("message")),
    _maybe("role", st.one_of(st.sampled_from(["assistant", "user", "system", "tool"]), ODD)),
    _maybe("content", st.one_of(st.lists(st.one_of(PART, ODD), max_size=3), TEXT)),
    _maybe("id", TEXT),
    EXTRAS,
)

CALL = st.builds(
    lambda kind, call_id, name, arguments, output, ident, extras: _with_extras(
        {**kind, **call_id, **name, **arguments, **output, **ident}, extras
    ),
    _maybe("type", st.sampled_from(["function_call", "function_call_output", "reasoning"])),
    _maybe("call_id", TEXT),
    _maybe("name", TEXT),
    _maybe("arguments", TEXT),
    _maybe("output", TEXT),
    _maybe("id", TEXT),
    EXTRAS,
)


def _shape(model: BaseModel) -> Any:
    """Everything that tells two models apart, nested models included."""

    def value(v: Any) -> Any:
        if isinstance(v, BaseModel):
            return _shape(v)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return (
        type(model),
        {k: value(v) for k, v in model.__dict__.items()},
        model.__pydantic_extra__,
        model.model_fields_set,
        model.__pydantic_private__,
        model.model_dump(mode="json", by_alias=True, exclude_unset=True),
    )


@settings(max_examples=400, deadline=None)
@given(st.one_of(MESSAGE, CALL))
def test_item_from_dict_gives_what_validation_gives(data: dict[str, Any]) -> None:
    try:
        expected = _ITEM_ADAPTER.validate_python(data)
    except ValidationError:
        assert _plain_item(data) is None
        with pytest.raises(ValidationError):
            item_from_dict(data)
        return
    assert _shape(item_from_dict(data)) == _shape(expected)


def test_the_common_shapes_take_the_plain_path() -> None:
    # The equality test above passes just as well when every dict goes to the validator;
    # this one says the shapes a provider returns really are built without it.
    common = [
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    for data in common:
        assert _plain_item(data) is not None, data
    for unusual in (
        {"role": "user", "content": "hi"},  # no type, string content: the validator's job
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "text": "no"}]},
    ):
        assert _plain_item(unusual) is None, unusual
        assert item_from_dict(unusual) is not None


def test_reading_a_common_item_builds_no_validator() -> None:
    # In a fresh interpreter: the item validator (and pydantic's plugin search, which reads
    # every installed package's entry points) is built only when an unusual item arrives.
    code = (
        "from gambit.core._openresponses import _ITEM_ADAPTER, item_from_dict\n"
        "item_from_dict({'type': 'message', 'role': 'assistant',"
        " 'content': [{'type': 'output_text', 'text': 'hi'}]})\n"
        "assert not _ITEM_ADAPTER.pydantic_complete, 'validator built'\n"
        "item_from_dict({'type': 'reasoning'})\n"
        "assert _ITEM_ADAPTER.pydantic_complete, 'validator never built'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_type_that_is_not_a_string_is_a_validation_error() -> None:
    # Found by the property test above: the discriminators looked an unhashable `type` up
    # in a set, so a provider's `{"type": []}` raised TypeError past every handler.
    from gambit.core._openresponses import event_from_dict

    for bad in (
        {"type": []},
        {"type": "message", "role": "user", "content": [{"type": {}, "text": "x"}]},
    ):
        with pytest.raises(ValidationError):
            item_from_dict(bad)
    with pytest.raises(ValidationError):
        event_from_dict({"type": ["response.completed"]})
