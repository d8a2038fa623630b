"""`parse_response` (an Open Responses response body as models): the common response is built
without pydantic's validators, equal to what validation builds, and odd values still fail
validation as before."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from gambit.core.provider import CreateResponseResponse, ResponseUsage, item_to_dict
from gambit.providers._responses_wire import parse_response, parse_usage

BODY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1764150000,
    "model": "bench-model",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hello.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
    ],
    "usage": {
        "input_tokens": 12,
        "output_tokens": 3,
        "total_tokens": 15,
        "input_tokens_details": {"cached_tokens": 2},
        "cost": 0.25,
    },
    "previous_response_id": "resp_0",
}


def test_the_response_is_what_validation_builds() -> None:
    parsed = parse_response(BODY)
    validated = CreateResponseResponse.model_validate(item_to_dict(parsed))
    assert item_to_dict(parsed) == item_to_dict(validated)
    assert parsed == validated
    assert item_to_dict(parsed) == {
        "id": "resp_1",
        "object": "response",
        "model": "bench-model",
        "created": 1764150000,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello.", "annotations": []}],
                "id": "msg_1",
                "status": "completed",
            },
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        ],
        "usage": {
            "promptTokens": 12,
            "completionTokens": 3,
            "totalTokens": 15,
            "cachedTokens": 2,
            "costUsd": 0.25,
        },
        "previous_response_id": "resp_0",
    }


def test_usage_is_what_validation_builds() -> None:
    usage = parse_usage(BODY["usage"])
    assert usage == ResponseUsage.model_validate(item_to_dict(usage))
    assert usage is not None and usage.model_extra == {"costUsd": 0.25}


@pytest.mark.parametrize("field", ["model", "created_at"])
def test_a_value_of_the_wrong_type_still_fails_validation(field: str) -> None:
    with pytest.raises(ValidationError):
        parse_response({**BODY, field: {"not": "valid"}})


def test_parsing_the_common_response_builds_no_validator() -> None:
    # In a fresh interpreter (this one has built them all): a one-turn run reads one such
    # response, and the validators' first build is a noticeable part of its start-up.
    code = f"""
from gambit.core._openresponses import _ITEM_ADAPTER
from gambit.core.provider import CreateResponseResponse, ResponseUsage
from gambit.providers._responses_wire import parse_response
parse_response({BODY!r})
for cls in (CreateResponseResponse, ResponseUsage):
    assert type(cls.__pydantic_validator__).__name__ == "MockValSer", cls
assert not _ITEM_ADAPTER.pydantic_complete
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
