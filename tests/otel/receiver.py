"""A real OTLP/HTTP receiver on 127.0.0.1 for the tests: `POST /v1/traces` bodies decoded
with opentelemetry-proto into spans (name, ids, parent, kind, times, attributes, events)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int
    resource: dict[str, Any]
    scope: str
    schema_url: str


@dataclass
class Receiver:
    """Collects what it is sent; `delay` makes every answer slow, `status` an error."""

    delay: float = 0.0
    status: int = 200
    spans: list[Span] = field(default_factory=list)
    requests: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver.lock:
                    receiver.requests.append({"path": self.path, **dict(self.headers)})
                if self.path != "/v1/traces" or receiver.status != 200:
                    self.send_response(receiver.status if self.path == "/v1/traces" else 404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.collect(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def collect(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            events=[
                                (e.name, {a.key: _value(a.value) for a in e.attributes})
                                for e in span.events
                            ],
                            status_code=span.status.code,
                            resource=resource,
                            scope=scope_spans.scope.name,
                            schema_url=scope_spans.schema_url,
                        )
                    )
        with self.lock:
            self.spans.extend(found)

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        with self.lock:
            return list(self.spans)

    # ---------------------------------------------------------------- reading the tree

    def by_id(self) -> dict[str, Span]:
        return {s.span_id: s for s in self.spans}

    def children(self, span: Span) -> list[Span]:
        return sorted(
            (s for s in self.spans if s.parent_id == span.span_id), key=lambda s: s.start_ns
        )

    def tree(self, span: Span, depth: int = 0) -> list[str]:
        """`span` and its descendants, one indented name a line, in start order."""
        lines = ["  " * depth + span.name]
        for child in self.children(span):
            lines.extend(self.tree(child, depth + 1))
        return lines

    def tree_spans(self, span: Span) -> list[Span]:
        """`span` and all its descendants."""
        found = [span]
        for child in self.children(span):
            found.extend(self.tree_spans(child))
        return found
