"""A fake model server: a real HTTP/1.1 server on 127.0.0.1 that speaks the model APIs.

It serves, on a random port:

- `POST .../responses`: Open Responses (its streaming event sequence, SSE with `event:` equal to
  the JSON `type`, every event with `sequence_number`, terminal `data: [DONE]`), or a JSON
  `response` object when the request does not ask for a stream;
- `POST .../chat/completions`: OpenAI Chat Completions (`data:` chunks with tool-call
  deltas, `[DONE]`), or a JSON `chat.completion`;
- `POST .../responses/input_tokens`: OpenAI's input-token count (`count_request_tokens`);
- `GET .../api/tags`, `POST .../api/pull` (Ollama) and `GET .../models` (OpenAI list).

A context window: with `token_budget` set, a model request whose context counts more tokens
(`count_request_tokens`, the fake's own tokenizer: words and punctuation marks; a request
with `previous_response_id` adds the context of the response it continues, as a real server
holds it) is refused with OpenAI's `context_length_exceeded` error, and the usage it reports
counts the context so (also with `count_usage`).

Paths are matched by their ending, so any base path works (`/v1`, `/api/v1`, `/ollama/v1`).

Replies are scripted per test as a queue of `Reply` objects (one per model request, in the
order requests arrive; an empty queue answers with `default_reply`). A `Reply` says *what*
the model answers (text or deltas, function calls, reasoning, extension items, usage) and
*how* the wire behaves (HTTP error with JSON body and headers such as `Retry-After`, a cut
connection after N bytes, a stream without terminal event, per-write delays, `: ping`
keep-alive comments, byte-level chunking at awkward boundaries, a pause until `resume()`).
The same `Reply` renders as Open Responses or Chat Completions depending on the endpoint hit.

Every request is recorded (`requests`: method, path, lower-cased headers, parsed JSON body).

Use it from a test (the `fake_server` fixture in tests/conftest.py starts one per test)::

    fake_server.queue(Reply(deltas=["Hel", "lo"]), Reply(status=429, headers={"Retry-After": "0"}))
    provider = OpenResponsesProvider(base_url=fake_server.base_url)
    ...
    assert fake_server.requests[0].body["model"] == "m"

From a subprocess, point the provider environment at it (`fake_server.env()` gives
`OPENRESPONSES_BASE_URL`, `OPENAI_BASE_URL`, ... plus dummy keys). Another process can also
script it over HTTP (`RemoteFakeModelServer`, or `POST /_fake/replies` with `Reply.to_dict()`
JSON), and `python -m tests.support.fake_model_server` runs one standalone and prints
`FAKE_MODEL_SERVER_URL=http://127.0.0.1:PORT`.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.server
import json
import re
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FakeModelServer", "FunctionCall", "RecordedRequest", "RemoteFakeModelServer", "Reply"]


# --------------------------------------------------------------------------- scripting


@dataclass
class FunctionCall:
    """A function call the fake model makes. `arguments` may be a dict (JSON-encoded)."""

    name: str
    arguments: str | dict[str, Any] = "{}"
    call_id: str | None = None
    # How the arguments stream; default: split in two halves.
    argument_deltas: list[str] | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Reply:
    """One scripted answer. All fields are optional; `Reply()` answers "ok".

    Content:
      text / deltas        the assistant text; `deltas` gives the streamed pieces (joined = text)
      function_calls       `FunctionCall`s after the text
      reasoning / reasoning_deltas   a reasoning item (summary text) before the text
      reasoning_encrypted  the reasoning item's `encrypted_content` (alone: a reasoning item
                           with no summary)
      items                raw output items (e.g. `{"type": "acme:search", ...}`), added last
      usage                `{input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost}`
      response_id, model   override the generated id / echoed model
    HTTP:
      status, error, headers   e.g. `Reply(status=429, error={...}, headers={"Retry-After": "1"})`
      body                 a raw body (str/bytes/JSON value) instead of the rendered one
      stream               force (True/False) or follow the request's `stream` flag (None)
    Stream shape:
      terminal             "completed" | "failed" | "incomplete" | "error" | "none" (no terminal)
      failure              `{code, message}` for failed/error terminals
      done                 send the final `data: [DONE]`
      delay, delay_before  seconds between writes / before the status line
      keepalive            a `: ping` comment line before every event
      chunk_bytes          write the body in pieces of N bytes
      awkward              split inside every multi-byte UTF-8 char and inside every blank-line
                           separator (and after `data`), one write per piece
      line_ending          "\\n" or "\\r\\n" in SSE frames
      cut_after_bytes      close the connection after N body bytes (chunked body left unfinished)
      pause_after_events   stop after N events until `FakeModelServer.resume()` (10 s timeout)
    """

    text: str | None = None
    deltas: list[str] | None = None
    function_calls: list[FunctionCall] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_deltas: list[str] | None = None
    reasoning_encrypted: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    stream: bool | None = None
    terminal: str = "completed"
    failure: dict[str, Any] | None = None
    done: bool = True
    delay: float = 0.0
    delay_before: float = 0.0
    keepalive: bool = False
    chunk_bytes: int | None = None
    awkward: bool = False
    line_ending: str = "\n"
    cut_after_bytes: int | None = None
    pause_after_events: int | None = None

    # ----------------------------------------------------------------- helpers

    @classmethod
    def http_error(
        cls,
        status: int,
        message: str = "error",
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        retry_after: str | float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """An HTTP error with an Open Responses/OpenAI structured JSON body."""
        err: dict[str, Any] = {"message": message, "type": type or _error_type(status)}
        err["code"] = code
        err["param"] = param
        hdrs = dict(headers or {})
        if retry_after is not None:
            hdrs["Retry-After"] = str(retry_after)
        return cls(status=status, error=err, headers=hdrs)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        data = dict(data)
        data["function_calls"] = [
            call if isinstance(call, FunctionCall) else FunctionCall(**call)
            for call in data.get("function_calls") or []
        ]
        return cls(**data)

    def text_pieces(self) -> list[str]:
        if self.deltas is not None:
            return list(self.deltas)
        if self.text is not None:
            return [self.text] if self.text else []
        if (
            self.function_calls
            or self.items
            or self.reasoning is not None
            or self.reasoning_encrypted is not None
        ):
            return []
        return ["ok"]

    def reasoning_pieces(self) -> list[str]:
        if self.reasoning_deltas is not None:
            return list(self.reasoning_deltas)
        return [self.reasoning] if self.reasoning else []


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status == 404:
        return "not_found"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


ReplySource = Reply | Callable[["RecordedRequest"], Reply]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""
    peer: tuple[str, int] | None = None  # the client's address: one per connection

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }


# --------------------------------------------------------------------------- rendering


class _Ids:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}_{self._n:06d}"


def _split_args(args: str, deltas: list[str] | None) -> list[str]:
    if deltas is not None:
        return deltas
    if len(args) < 2:
        return [args] if args else []
    mid = len(args) // 2
    return [args[:mid], args[mid:]]


_WORD = re.compile(r"\w+|[^\w\s]")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key not in ("type", "id", "call_id", "status", "role"):
                yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def count_request_tokens(body: dict[str, Any]) -> int:
    """The fake model's count of a request's input tokens: every word and punctuation mark of
    its input (or messages), instructions and tools, plus 3 per item and 3 per request. Its
    own rule, unlike any real tokenizer's, so a client can only match it by asking."""
    items = body.get("input", body.get("messages")) or []
    if isinstance(items, str):
        items = [items]
    total = 3 + 3 * len(items)
    for part in (items, body.get("instructions"), body.get("tools")):
        total += sum(len(_WORD.findall(text)) for text in _strings(part))
    return total


def _usage(reply: Reply, pieces: list[str], counted: int | None = None) -> dict[str, int | float]:
    usage = dict(reply.usage or {})
    usage.setdefault("input_tokens", counted if counted is not None else 10)
    usage.setdefault("output_tokens", max(1, len(pieces)))
    return usage


def responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    inp, out = int(usage["input_tokens"]), int(usage["output_tokens"])
    data: dict[str, Any] = {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
        "total_tokens": int(usage.get("total_tokens", inp + out)),
    }
    if "cost" in usage:
        data["cost"] = usage["cost"]
    return data


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    inp, out = int(usage["input_tokens"]), int(usage["output_tokens"])
    data: dict[str, Any] = {
        "prompt_tokens": inp,
        "completion_tokens": out,
        "total_tokens": int(usage.get("total_tokens", inp + out)),
        "prompt_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
        "completion_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
    }
    if "cost" in usage:
        data["cost"] = usage["cost"]
    return data


def render_responses(
    reply: Reply, request: dict[str, Any], ids: _Ids, counted: int | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The final response object and the full stream event list for a reply."""
    rid = reply.response_id or ids.next("resp")
    model = reply.model or str(request.get("model", "fake-model"))
    created = int(time.time())
    pieces = reply.text_pieces()
    base = {
        "id": rid,
        "object": "response",
        "created_at": created,
        "model": model,
        "previous_response_id": request.get("previous_response_id"),
    }
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response={**base, "status": "in_progress", "output": []})
    emit("response.in_progress", response={**base, "status": "in_progress", "output": []})

    reasoning = reply.reasoning_pieces()
    if reasoning or reply.reasoning_encrypted is not None:
        idx, iid = len(output), ids.next("rs")
        text = "".join(reasoning)
        item = {"type": "reasoning", "id": iid, "summary": [], "status": "in_progress"}
        if reply.reasoning_encrypted is not None:
            item["encrypted_content"] = reply.reasoning_encrypted
        emit("response.output_item.added", output_index=idx, item=item)
        part = {"type": "summary_text", "text": ""}
        emit(
            "response.reasoning_summary_part.added",
            item_id=iid,
            output_index=idx,
            summary_index=0,
            part=part,
        )
        for piece in reasoning:
            emit(
                "response.reasoning_summary_text.delta",
                item_id=iid,
                output_index=idx,
                summary_index=0,
                delta=piece,
            )
        emit(
            "response.reasoning_summary_text.done",
            item_id=iid,
            output_index=idx,
            summary_index=0,
            text=text,
        )
        done_part = {"type": "summary_text", "text": text}
        emit(
            "response.reasoning_summary_part.done",
            item_id=iid,
            output_index=idx,
            summary_index=0,
            part=done_part,
        )
        final = {**item, "summary": [done_part], "status": "completed"}
        emit("response.output_item.done", output_index=idx, item=final)
        output.append(final)

    if pieces:
        idx, iid = len(output), ids.next("msg")
        text = "".join(pieces)
        item = {
            "type": "message",
            "id": iid,
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        emit("response.output_item.added", output_index=idx, item=item)
        part = {"type": "output_text", "text": "", "annotations": []}
        emit(
            "response.content_part.added",
            item_id=iid,
            output_index=idx,
            content_index=0,
            part=part,
        )
        for piece in pieces:
            emit(
                "response.output_text.delta",
                item_id=iid,
                output_index=idx,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        emit(
            "response.output_text.done",
            item_id=iid,
            output_index=idx,
            content_index=0,
            text=text,
            logprobs=[],
        )
        done_part = {"type": "output_text", "text": text, "annotations": []}
        emit(
            "response.content_part.done",
            item_id=iid,
            output_index=idx,
            content_index=0,
            part=done_part,
        )
        # A model cut at its token limit leaves its message incomplete (the last item).
        cut = reply.terminal == "incomplete" and not (reply.function_calls or reply.items)
        final = {**item, "status": "incomplete" if cut else "completed", "content": [done_part]}
        emit("response.output_item.done", output_index=idx, item=final)
        output.append(final)

    for call in reply.function_calls:
        idx, iid = len(output), ids.next("fc")
        call_id = call.call_id or ids.next("call")
        args = call.arguments_json()
        item = {
            "type": "function_call",
            "id": iid,
            "call_id": call_id,
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        emit("response.output_item.added", output_index=idx, item=item)
        for piece in _split_args(args, call.argument_deltas):
            emit(
                "response.function_call_arguments.delta",
                item_id=iid,
                output_index=idx,
                delta=piece,
            )
        emit(
            "response.function_call_arguments.done",
            item_id=iid,
            output_index=idx,
            arguments=args,
        )
        final = {**item, "arguments": args, "status": "completed"}
        emit("response.output_item.done", output_index=idx, item=final)
        output.append(final)

    for raw in reply.items:
        idx = len(output)
        emit("response.output_item.added", output_index=idx, item=raw)
        emit("response.output_item.done", output_index=idx, item=raw)
        output.append(raw)

    usage = responses_usage(_usage(reply, pieces, counted))
    failure = reply.failure or {"code": "server_error", "message": "The model failed."}
    terminal = reply.terminal
    if terminal == "failed":
        response = {**base, "status": "failed", "output": output, "usage": usage, "error": failure}
        emit("response.failed", response=response)
    elif terminal == "incomplete":
        response = {
            **base,
            "status": "incomplete",
            "output": output,
            "usage": usage,
            "incomplete_details": {"reason": "max_output_tokens"},
        }
        emit("response.incomplete", response=response)
    else:
        response = {**base, "status": "completed", "output": output, "usage": usage, "error": None}
        if terminal == "completed":
            emit("response.completed", response=response)
        elif terminal == "error":
            emit(
                "error",
                code=failure.get("code"),
                message=failure.get("message"),
                param=failure.get("param"),
                error=failure,
            )
    return response, events


def render_chat(
    reply: Reply, request: dict[str, Any], ids: _Ids, counted: int | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The final chat.completion object and the stream chunk list for a reply."""
    cid = reply.response_id or ids.next("chatcmpl")
    model = reply.model or str(request.get("model", "fake-model"))
    created = int(time.time())
    pieces = reply.text_pieces()
    reasoning = reply.reasoning_pieces()
    calls = [(call, call.call_id or ids.next("call")) for call in reply.function_calls]
    if reply.terminal == "incomplete":
        finish = "length"
    else:
        finish = "tool_calls" if calls else "stop"
    usage = chat_usage(_usage(reply, pieces, counted))
    base = {"id": cid, "created": created, "model": model}

    message: dict[str, Any] = {"role": "assistant", "content": "".join(pieces) if pieces else None}
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call, call_id in calls
        ]
    completion = {
        **base,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }

    chunks: list[dict[str, Any]] = []

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        chunks.append(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
        )

    chunk({"role": "assistant", "content": ""})
    for piece in reasoning:
        chunk({"reasoning": piece})
    for piece in pieces:
        chunk({"content": piece})
    for index, (call, call_id) in enumerate(calls):
        args = call.arguments_json()
        head = {"index": index, "id": call_id, "type": "function"}
        chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        for piece in _split_args(args, call.argument_deltas):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if reply.terminal == "error" or reply.terminal == "failed":
        failure = reply.failure or {"code": "server_error", "message": "The model failed."}
        chunks.append({"error": failure})
    elif reply.terminal != "none":
        chunk({}, finish)
        chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return completion, chunks


# --------------------------------------------------------------------------- byte shaping


def _sse_frames(events: list[Any], *, named: bool, reply: Reply) -> list[tuple[bytes, bool]]:
    """(frame bytes, is_event) in order, keep-alive comments included."""
    nl = reply.line_ending
    frames: list[tuple[bytes, bool]] = []
    for event in events:
        if reply.keepalive:
            frames.append(((": ping" + nl + nl).encode(), False))
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        head = f"event: {event['type']}{nl}" if named and "type" in event else ""
        frames.append(((head + f"data: {data}" + nl + nl).encode("utf-8"), True))
    if reply.done and reply.terminal != "none":
        frames.append((("data: [DONE]" + nl + nl).encode(), False))
    return frames


def awkward_split(data: bytes) -> list[bytes]:
    """Split inside every multi-byte UTF-8 char, inside every blank-line separator and
    right after every `data` field name."""
    cuts: set[int] = set()
    i = 0
    n = len(data)
    while i < n:
        byte = data[i]
        if byte >= 0xC0:  # a multi-byte sequence starts: cut after its first byte
            cuts.add(i + 1)
        i += 1
    for sep in (b"\r\n\r\n", b"\n\n"):
        start = 0
        while (pos := data.find(sep, start)) >= 0:
            cuts.update(range(pos + 1, pos + len(sep)))
            start = pos + 1
    start = 0
    while (pos := data.find(b"data:", start)) >= 0:
        cuts.add(pos + 4)
        start = pos + 1
    points = sorted(c for c in cuts if 0 < c < n)
    pieces: list[bytes] = []
    prev = 0
    for cut in points:
        pieces.append(data[prev:cut])
        prev = cut
    pieces.append(data[prev:])
    return [p for p in pieces if p]


# --------------------------------------------------------------------------- the server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: each small SSE write leaves at once
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # silence
        pass

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    # ------------------------------------------------------------- plumbing

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._send_bytes(status, body, "application/json", headers)

    def _send_bytes(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
        cut_after: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if cut_after is not None:
            self.wfile.write(body[:cut_after])
            self._cut()
            return
        self.wfile.write(body)

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ------------------------------------------------------------- routes

    def do_GET(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path == "/_fake/requests":
            self._send_json(200, [r.to_dict() for r in owner.requests])
            return
        owner._record(self, b"")
        if path.endswith("/api/tags"):
            models = [
                {"name": name, "model": name, "size": 1, "digest": "0" * 12}
                for name in owner.models
            ]
            self._send_json(200, {"models": models})
        elif path.endswith("/models"):
            data = [{"id": name, "object": "model", "owned_by": "fake"} for name in owner.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        path = self.path.split("?", 1)[0]
        if path.startswith("/_fake/"):
            self._control(path, raw)
            return
        recorded = owner._record(self, raw)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        if path.endswith("/responses/input_tokens"):
            tokens = count_request_tokens(body)
            self._send_json(200, {"object": "response.input_tokens", "input_tokens": tokens})
            return
        if (path.endswith(("/responses", "/chat/completions"))) and owner._over_budget(body):
            self._send_json(
                400,
                {
                    "error": {
                        "message": "Your input exceeds the context window of this model "
                        f"({owner.context_size(body)} tokens, the window is "
                        f"{owner.token_budget}). Please adjust your input and try again.",
                        "type": "invalid_request_error",
                        "param": "input",
                        "code": "context_length_exceeded",
                    }
                },
            )
            return
        if path.endswith("/responses"):
            if not owner.responses_enabled:
                self._send_json(owner.responses_disabled_status, {"detail": "Not Found"})
                return
            prev = body.get("previous_response_id")
            if prev and (
                owner.reject_previous_response_id
                or (owner.validate_previous_response_id and prev not in owner.issued_ids)
            ):
                self._send_json(
                    400,
                    {
                        "error": {
                            "message": f"Previous response with id '{prev}' not found.",
                            "type": "invalid_request_error",
                            "param": "previous_response_id",
                            "code": "previous_response_not_found",
                        }
                    },
                )
                return
            self._reply(owner._next_reply(recorded), body, api="responses")
        elif path.endswith("/chat/completions"):
            self._reply(owner._next_reply(recorded), body, api="chat")
        elif path.endswith("/api/pull"):
            name = str(body.get("name") or body.get("model") or "")
            lines = [{"status": "pulling manifest"}, {"status": "success"}]
            with owner._lock:
                if name and name not in owner.models:
                    owner.models.append(name)
            payload = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            self._send_bytes(200, payload, "application/x-ndjson")
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _control(self, path: str, raw: bytes) -> None:
        owner = self.server.owner
        data = json.loads(raw or b"null")
        if path == "/_fake/replies":
            replies = data if isinstance(data, list) else [data]
            owner.queue(*(Reply.from_dict(r) for r in replies))
        elif path == "/_fake/default":
            owner.default_reply = Reply.from_dict(data) if data else None
        elif path == "/_fake/config":
            for key in (
                "responses_enabled",
                "responses_disabled_status",
                "reject_previous_response_id",
                "validate_previous_response_id",
                "models",
                "token_budget",
                "count_usage",
            ):
                if key in data:
                    setattr(owner, key, data[key])
        elif path == "/_fake/reset":
            owner.reset()
        elif path == "/_fake/resume":
            owner.resume()
        else:
            self._send_json(404, {"detail": "unknown control path"})
            return
        self._send_json(200, {"ok": True})

    # ------------------------------------------------------------- replies

    def _reply(self, reply: Reply, request: dict[str, Any], *, api: str) -> None:
        owner = self.server.owner
        if reply.delay_before:
            time.sleep(reply.delay_before)
        if reply.status >= 400 or (reply.body is not None and reply.status != 200):
            payload: Any
            if reply.body is not None:
                payload = reply.body if isinstance(reply.body, bytes) else _encode(reply.body)
            else:
                payload = json.dumps({"error": reply.error or {"message": "error"}}).encode()
            self._send_bytes(
                reply.status, payload, "application/json", reply.headers, reply.cut_after_bytes
            )
            return
        counted = (
            owner.context_size(request)
            if owner.count_usage or owner.token_budget is not None
            else None
        )
        if api == "responses":
            final, events = render_responses(reply, request, owner._ids, counted)
            owner.issued_ids.add(final["id"])
            owner.chained_tokens[final["id"]] = owner.context_size(request) + sum(
                len(_WORD.findall(text)) for text in _strings(final.get("output"))
            )
        else:
            final, events = render_chat(reply, request, owner._ids, counted)
        stream = reply.stream if reply.stream is not None else bool(request.get("stream"))
        if reply.body is not None:
            ctype = "text/event-stream" if stream else "application/json"
            payload = reply.body if isinstance(reply.body, bytes) else _encode(reply.body)
            self._stream_pieces([payload], ctype, reply, events_per_piece=[False])
            return
        if not stream:
            if reply.terminal == "failed" and api == "responses":
                self._send_json(
                    500,
                    {"error": reply.failure or {"message": "failed", "type": "server_error"}},
                    reply.headers,
                )
                return
            self._send_bytes(
                reply.status,
                json.dumps(final).encode(),
                "application/json",
                reply.headers,
                reply.cut_after_bytes,
            )
            return
        frames = _sse_frames(events, named=(api == "responses"), reply=reply)
        if reply.chunk_bytes or reply.awkward:
            blob = b"".join(f for f, _ in frames)
            if reply.awkward:
                pieces = awkward_split(blob)
            else:
                size = max(1, int(reply.chunk_bytes or 1))
                pieces = [blob[i : i + size] for i in range(0, len(blob), size)]
            self._stream_pieces(pieces, "text/event-stream", reply, [False] * len(pieces))
        else:
            self._stream_pieces(
                [f for f, _ in frames], "text/event-stream", reply, [e for _, e in frames]
            )

    def _stream_pieces(
        self, pieces: list[bytes], ctype: str, reply: Reply, events_per_piece: list[bool]
    ) -> None:
        owner = self.server.owner
        self.send_response(reply.status)
        self.send_header("Content-Type", ctype if ctype != "text/event-stream" else f"{ctype}")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        sent = 0
        events_sent = 0
        try:
            for piece, is_event in zip(pieces, events_per_piece, strict=True):
                if reply.cut_after_bytes is not None and sent + len(piece) >= reply.cut_after_bytes:
                    part = piece[: reply.cut_after_bytes - sent]
                    if part:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self._cut()
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
                if is_event:
                    events_sent += 1
                    if reply.pause_after_events is not None and (
                        events_sent == reply.pause_after_events
                    ):
                        owner._resume.acquire(timeout=10)
                if reply.delay:
                    time.sleep(reply.delay)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def _encode(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver listens with a backlog of 5: a client opening 16 connections at once
    # would see some refused or retried after a second, which no model server does.
    request_queue_size = 128
    owner: FakeModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (or is cut off on purpose) is not a server error.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class FakeModelServer:
    """A scripted model server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._lock = threading.Lock()
        self._replies: list[ReplySource] = []
        self._ids = _Ids()
        self._resume = threading.Semaphore(0)
        self._connections: set[socket.socket] = set()
        self.requests: list[RecordedRequest] = []
        self.default_reply: Reply | None = Reply(text="ok")
        self.responses_enabled = True
        self.responses_disabled_status = 404
        self.reject_previous_response_id = False
        self.validate_previous_response_id = False
        self.issued_ids: set[str] = set()
        self.models: list[str] = ["llama3:latest", "qwen3:0.6b"]
        # The context window (`count_request_tokens`), None for none; `count_usage` reports
        # the counted input tokens in usage even without one.
        self.token_budget: int | None = None
        self.count_usage = False
        self.chained_tokens: dict[str, int] = {}  # response id -> its context's tokens
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, the OpenAI-style API base."""
        return self.url + "/v1"

    def start(self) -> FakeModelServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"fake-model-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._resume.release(100)
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # ------------------------------------------------------------- scripting

    def queue(self, *replies: ReplySource | str) -> FakeModelServer:
        """Queue replies (a `str` is `Reply(text=...)`; a callable gets the request)."""
        with self._lock:
            for reply in replies:
                self._replies.append(Reply(text=reply) if isinstance(reply, str) else reply)
        return self

    def queue_many(self, replies: Iterable[ReplySource | str]) -> FakeModelServer:
        return self.queue(*replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def resume(self) -> None:
        """Release one reply paused by `pause_after_events` (now or when it gets there)."""
        self._resume.release()

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.issued_ids.clear()
            self.chained_tokens.clear()
        self._resume = threading.Semaphore(0)
        self.default_reply = Reply(text="ok")
        self.responses_enabled = True
        self.responses_disabled_status = 404
        self.reject_previous_response_id = False
        self.validate_previous_response_id = False
        self.token_budget = None
        self.count_usage = False

    def context_size(self, body: dict[str, Any]) -> int:
        """The tokens a request puts in the model's context: its own, plus those of the
        response it continues (`previous_response_id`), whose context the server holds."""
        return count_request_tokens(body) + self.chained_tokens.get(
            str(body.get("previous_response_id")), 0
        )

    def _over_budget(self, body: dict[str, Any]) -> bool:
        return self.token_budget is not None and self.context_size(body) > self.token_budget

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            source = self._replies.pop(0) if self._replies else None
        if source is None:
            if self.default_reply is None:
                return Reply.http_error(500, "fake model server: no scripted reply left")
            return self.default_reply
        return source(request) if callable(source) else source

    def _record(self, handler: _Handler, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {key.lower(): value for key, value in handler.headers.items()}
        peer = tuple(handler.client_address[:2]) if handler.client_address else None
        rec = RecordedRequest(handler.command, handler.path, headers, body, raw, peer)
        with self._lock:
            self.requests.append(rec)
        return rec

    # ------------------------------------------------------------- assertions

    def requests_to(self, suffix: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with `suffix` (e.g. "/responses")."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0].endswith(suffix)]

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            return self.requests[-1]

    def env(self, api_key: str = "test-key") -> dict[str, str]:
        """Environment variables that point every provider at this server."""
        return {
            "OPENRESPONSES_BASE_URL": self.base_url,
            "OPENRESPONSES_API_KEY": api_key,
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": api_key,
            "OPENROUTER_BASE_URL": self.base_url,
            "OPENROUTER_API_KEY": api_key,
            "OLLAMA_BASE_URL": self.base_url,
        }


class RemoteFakeModelServer:
    """Script a fake server running in another process, over its `/_fake/*` endpoints."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _post(self, path: str, payload: Any) -> Any:
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def queue(self, *replies: Reply | str) -> None:
        self._post(
            "/_fake/replies",
            [(Reply(text=r) if isinstance(r, str) else r).to_dict() for r in replies],
        )

    def configure(self, **settings: Any) -> None:
        self._post("/_fake/config", settings)

    def reset(self) -> None:
        self._post("/_fake/reset", {})

    def resume(self) -> None:
        self._post("/_fake/resume", {})

    def requests(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/_fake/requests", timeout=10) as resp:
            return json.loads(resp.read())


class TimedModelServer(FakeModelServer):
    """A fake model for benchmarks: every request is answered by `answer(request)` after
    `latency` seconds, and the server counts the calls and the request span (the first
    request in to the last answer out) since `reset_counts()`."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency
        self._count_lock = threading.Lock()
        self.reset_counts()

    def reset_counts(self) -> None:
        self.calls = 0
        self.first: float | None = None
        self.last: float | None = None

    def span(self) -> float | None:
        return self.last - self.first if self.first is not None and self.last else None

    def answer(self, request: RecordedRequest) -> Reply:
        return Reply(text="ok", delay_before=self.latency)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        now = time.perf_counter()
        with self._count_lock:
            self.calls += 1
            self.first = now if self.first is None else self.first
            self.last = max(self.last or 0.0, now + self.latency)
        return self.answer(request)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the fake model server standalone.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--text", default="ok", help="the default reply text")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between stream writes")
    args = parser.parse_args(argv)
    server = FakeModelServer(port=args.port)
    server.default_reply = Reply(deltas=re.findall(r"\S+\s*", args.text), delay=args.delay)
    server.start()
    print(f"FAKE_MODEL_SERVER_URL={server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
