"""The Open Responses compliance suite's seven cases, against any `/v1/responses` server.

The specification's project publishes a compliance tester (https://www.openresponses.org/compliance;
`src/lib/compliance-tests.ts` in https://github.com/openresponses/openresponses): seven
requests, each answer parsed with the specification's ResponseResource schema and checked
by a few rules. This module sends the same seven requests and applies the same rules, with
the schemas of `openresponses-types` (generated from the same OpenAPI document) through
`conformance.py`, which is stricter than the tester (no unknown keys, strict types, and
every streamed event in order):

- basic-response, system-prompt, image-input, multi-turn: output present, `completed`;
- streaming-response: events arrived, each one valid, the final response `completed`;
- tool-calling: output present, with a `function_call`;
- tool-calling-streaming: events valid, a `function_call` added, its argument delta and
  done events, and its item done.

The first four text cases (basic, streaming, system prompt, multi-turn) are the ones a deck
answers whatever its model; tool calling and images depend on the model.

    .venv/bin/python -m tests.endpoint.compliance --base-url http://127.0.0.1:8000/v1 \\
        --api-key $KEY --model deck/support [--filter basic-response,multi-turn]
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.endpoint import conformance


def _red_png(size: int = 32) -> str:
    """A small PNG (red, `size` pixels square) as a data URL, as the tester sends one."""
    rows = b"".join(b"\0" + b"\xff\x00\x00" * size for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


RED_PNG = _red_png()
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. Paris, TX"}
        },
        "required": ["location"],
    },
}
TEXT_CASES = ("basic-response", "streaming-response", "system-prompt", "multi-turn")


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


@dataclass
class Case:
    id: str
    input: list[dict[str, Any]]
    checks: list[str]
    stream: bool = False
    tools: bool = False


CASES = [
    Case("basic-response", [_user("Say hello in exactly 3 words.")], ["output", "completed"]),
    Case(
        "streaming-response",
        [_user("Count from 1 to 5.")],
        ["events", "completed"],
        stream=True,
    ),
    Case(
        "system-prompt",
        [
            {"type": "message", "role": "system", "content": "You are a pirate. Talk like one."},
            _user("Say hello."),
        ],
        ["output", "completed"],
    ),
    Case(
        "tool-calling",
        [_user("What's the weather like in San Francisco?")],
        ["output", "function_call"],
        tools=True,
    ),
    Case(
        "tool-calling-streaming",
        [_user("What's the weather like in San Francisco?")],
        ["events", "function_call_events"],
        stream=True,
        tools=True,
    ),
    Case(
        "image-input",
        [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What do you see in this image?"},
                    {"type": "input_image", "image_url": RED_PNG},
                ],
            }
        ],
        ["output", "completed"],
    ),
    Case(
        "multi-turn",
        [
            _user("My name is Alice."),
            {"type": "message", "role": "assistant", "content": "Hello Alice!"},
            _user("What is my name?"),
        ],
        ["output", "completed"],
    ),
]


@dataclass
class Result:
    id: str
    errors: list[str] = field(default_factory=list)
    events: int = 0

    @property
    def passed(self) -> bool:
        return not self.errors


def _check(name: str, response: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    output = response.get("output") or []
    added = [e for e in events if e.get("type") == "response.output_item.added"]
    done = [e for e in events if e.get("type") == "response.output_item.done"]
    kinds = {e.get("type") for e in events}
    rules: dict[str, Callable[[], list[str]]] = {
        "output": lambda: [] if output else ["the response has no output items"],
        "completed": lambda: (
            []
            if response.get("status") == "completed"
            else [f"status is {response.get('status')!r}, not 'completed'"]
        ),
        "function_call": lambda: (
            []
            if any(item.get("type") == "function_call" for item in output)
            else ["no function_call output item"]
        ),
        "events": lambda: [] if events else ["no streamed events"],
        "function_call_events": lambda: [
            message
            for ok, message in (
                (
                    any(e["item"].get("type") == "function_call" for e in added),
                    "no output_item.added with a function_call",
                ),
                (
                    "response.function_call_arguments.delta" in kinds,
                    "no function_call_arguments.delta",
                ),
                (
                    "response.function_call_arguments.done" in kinds,
                    "no function_call_arguments.done",
                ),
                (
                    any(e["item"].get("type") == "function_call" for e in done),
                    "no output_item.done with a function_call",
                ),
            )
            if not ok
        ],
    }
    return rules[name]()


def run_case(http: httpx.Client, base_url: str, api_key: str, model: str, case: Case) -> Result:
    result = Result(case.id)
    body: dict[str, Any] = {"model": model, "input": case.input, "stream": case.stream}
    if case.tools:
        body["tools"] = [WEATHER_TOOL]
    headers = {"Authorization": f"Bearer {api_key}"}
    events: list[dict[str, Any]] = []
    try:
        if case.stream:
            frames: list[tuple[str | None, str]] = []
            with http.stream("POST", base_url + "/responses", json=body, headers=headers) as r:
                if r.status_code != 200:
                    r.read()
                    result.errors.append(f"HTTP {r.status_code}: {r.text[:300]}")
                    return result
                name = None
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        name = line[len("event: ") :]
                    elif line.startswith("data: "):
                        frames.append((name, line[len("data: ") :]))
                        name = None
            events = conformance.validate_stream(frames)
            result.events = len(events)
            response = events[-1]["response"]
        else:
            r = http.post(base_url + "/responses", json=body, headers=headers)
            if r.status_code != 200:
                result.errors.append(f"HTTP {r.status_code}: {r.text[:300]}")
                return result
            response = r.json()
        conformance.validate_response(response)
    except conformance.NonConformance as exc:
        result.errors.append(str(exc).splitlines()[0])
        return result
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        result.errors.append(f"{type(exc).__name__}: {exc}")
        return result
    for check in case.checks:
        result.errors += _check(check, response, events)
    return result


def run_suite(
    base_url: str, api_key: str, model: str, only: tuple[str, ...] | None = None
) -> list[Result]:
    with httpx.Client(timeout=60) as http:
        return [
            run_case(http, base_url.rstrip("/"), api_key, model, case)
            for case in CASES
            if only is None or case.id in only
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--filter", help="case ids, comma-separated")
    args = parser.parse_args(argv)
    only = tuple(part.strip() for part in args.filter.split(",")) if args.filter else None
    results = run_suite(args.base_url, args.api_key, args.model, only)
    for result in results:
        mark = "ok  " if result.passed else "FAIL"
        print(f"{mark} {result.id}" + (f" [{result.events} events]" if result.events else ""))
        for error in result.errors:
            print(f"       {error}")
    passed = sum(r.passed for r in results)
    print(json.dumps({"model": args.model, "passed": passed, "total": len(results)}))
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
