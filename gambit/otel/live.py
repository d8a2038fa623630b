"""Exporting the spans of this process's runs, as they happen (docs/observability.md).

`exporter(warn)` builds, once per process, the OpenTelemetry SDK's `TracerProvider` with a
`BatchSpanProcessor` and the OTLP exporter the standard variables describe
(`OTEL_EXPORTER_OTLP_ENDPOINT` / `_TRACES_ENDPOINT`, `_HEADERS`, `_PROTOCOL`, `_TIMEOUT`,
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). Spans are queued by the run and sent by the
processor's own thread, so a collector that is down or slow never slows or fails a run: the
first failed export prints one warning line (through `warn`), later ones are silent, and
spans that cannot be sent are dropped. `close()` waits for the queue at most
`CLOSE_SECONDS`, then gives up on what is left.

`Export.sink(conversation_id)` is a trace callback (`on_trace`) that turns one run's (or one
command's) events into spans (`SpanBuilder`).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

from gambit import __version__
from gambit.otel import SEMCONV_VERSION, capture_content
from gambit.otel.spans import SpanBuilder

__all__ = ["CLOSE_SECONDS", "Export", "exporter", "traces_endpoint"]

# How long a command's end waits for spans still queued (a healthy collector takes
# milliseconds; a collector that is down is not waited for longer than this).
CLOSE_SECONDS = 3.0

SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# The SDK's and the exporters' loggers: their retries and failures are summed up by our one
# warning line instead.
_QUIET_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)


def traces_endpoint(env: Mapping[str, str]) -> str:
    """The URL spans go to: `..._TRACES_ENDPOINT` as is, else the base endpoint +
    `/v1/traces` (OTLP/HTTP; a gRPC endpoint is used as is)."""
    exact = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if exact:
        return exact
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if _protocol(env) == "grpc":
        return base
    return base.rstrip("/") + "/v1/traces"


def _protocol(env: Mapping[str, str]) -> str:
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    ).strip().lower() or "http/protobuf"


class _LastMessage(logging.Handler):
    """Keeps the first message of the quieted loggers since an export began: the reason
    our warning gives."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None
        self.seen = threading.Event()  # an export has reported trouble (a retry, a failure)

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.seen.set()
        if self.last is not None:
            return  # the first message of an export names its cause
        try:
            self.last = record.getMessage().splitlines()[0]
        except Exception:
            self.last = None


class _Guarded(SpanExporter):
    """The OTLP exporter, with one warning line for the first failed export."""

    def __init__(self, inner: SpanExporter, endpoint: str, warn: Callable[[str], None]):
        self.inner = inner
        self.endpoint = endpoint
        self.warn = warn
        self.failures = 0
        self.exported = 0
        self.in_flight = 0
        self.warned = False
        self.reason: str | None = None
        self._shut = False
        self._idle = threading.Condition()
        self._reasons = _LastMessage()
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(self._reasons)
            logger.propagate = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._idle:
            self.in_flight += 1
        self._reasons.last = None
        self._reasons.seen.clear()
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter bug must not reach the processor's thread
            self._reasons.last = f"{type(exc).__name__}: {exc}"
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failures += 1
            self.reason = self._reasons.last
            reason = f" ({self.reason})" if self.reason else ""
            self.warn_once(
                f"warning: OpenTelemetry export to {self.endpoint} failed{reason}; "
                "runs go on and their spans are dropped while the collector does not answer"
            )
        with self._idle:
            self.in_flight -= 1
            self._idle.notify_all()
        return result

    def detach(self) -> None:
        """Give the quieted loggers back (this exporter is done)."""
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            logger.removeHandler(self._reasons)
            if not any(isinstance(h, _LastMessage) for h in logger.handlers):
                logger.propagate = True

    @property
    def trouble(self) -> threading.Event:
        return self._reasons.seen

    def warn_once(self, line: str) -> None:
        with self._idle:
            if self.warned:
                return
            self.warned = True
        self.warn(line)

    def wait_idle(self, seconds: float) -> bool:
        """Wait until no export is in flight (True), at most `seconds`."""
        with self._idle:
            return self._idle.wait_for(lambda: self.in_flight == 0, timeout=seconds)

    def shutdown(self) -> None:
        if not self._shut:
            self._shut = True
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _otlp_exporter(env: Mapping[str, str], warn: Callable[[str], None]) -> SpanExporter | None:
    protocol = _protocol(env)
    endpoint = traces_endpoint(env)
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            warn(
                "warning: OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter "
                "(pip install opentelemetry-exporter-otlp-proto-grpc); no spans are exported"
            )
            return None
        return GrpcExporter(endpoint=endpoint or None)
    if protocol != "http/protobuf":
        warn(
            f"warning: OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported; "
            "spans are sent as http/protobuf"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # Headers, timeout, compression and certificates: the exporter reads the standard
    # variables itself.
    return OTLPSpanExporter(endpoint=endpoint)


class Export:
    """The process's span pipeline: a tracer, its batching processor and exporter."""

    def __init__(self, env: Mapping[str, str], warn: Callable[[str], None]):
        self.env = env
        self.warn = warn
        self.capture = capture_content(env)
        inner = _otlp_exporter(env, warn)
        self.guarded = (
            _Guarded(inner, traces_endpoint(env) or "the gRPC default", warn)
            if inner is not None
            else None
        )
        attributes: dict[str, Any] = {"service.version": __version__}
        if not env.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "gambit"
        self.provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
        if self.guarded is not None:
            self.processor: BatchSpanProcessor | None = BatchSpanProcessor(self.guarded)
            self.provider.add_span_processor(self.processor)
        else:
            self.processor = None
        self.tracer: Tracer = self.provider.get_tracer("gambit", __version__, schema_url=SCHEMA_URL)
        self._closed = False

    def sink(self, conversation_id: str | None = None) -> Callable[[Mapping[str, Any]], None]:
        """A trace callback for one run or command: its events become spans, live."""
        builder = SpanBuilder(
            self.tracer,
            capture_content=self.capture,
            conversation_id=conversation_id,
            clock=time.time_ns,
        )
        lock = threading.Lock()

        def on_trace(event: Mapping[str, Any]) -> None:
            with lock:
                builder.on_event(event)

        on_trace.builder = builder  # type: ignore[attr-defined]  # for close_sink and tests
        return on_trace

    def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Send what is queued, waiting at most `seconds` (not at all for a collector that
        already failed), then stop the pipeline. (The SDK's `force_flush` would block for
        the exporter's whole timeout and retries: the processor's `shutdown` joins its
        thread for a bounded time instead.)"""
        if self._closed:
            return
        self._closed = True
        guarded, processor = self.guarded, self.processor
        if guarded is None or processor is None:
            self.provider.shutdown()
            return
        wait = 0.0 if guarded.failures else seconds
        # The processor's shutdown exports what is queued (in its own thread) and then shuts
        # the exporter down; it is waited for at most `wait`, then the exporter is shut down
        # here, which ends its retries, and a request still in flight gets a moment to report.
        stopping = threading.Thread(
            target=processor.shutdown, name="gambit-otel-close", daemon=True
        )
        stopping.start()
        # Waited for until done, or until the exporter reports trouble (a collector that
        # refuses connections says so at once: its retries are not waited for).
        deadline = time.monotonic() + wait
        while stopping.is_alive() and time.monotonic() < deadline:
            if guarded.trouble.wait(min(0.02, max(0.0, deadline - time.monotonic()))):
                break
        if stopping.is_alive():
            guarded.shutdown()
            stopping.join(0.5)
        if not guarded.wait_idle(0.5) or stopping.is_alive():
            guarded.warn_once(
                f"warning: OpenTelemetry export to {guarded.endpoint} did not finish within "
                f"{seconds:g} s; the spans not yet sent are dropped"
            )
        self.provider.shutdown()
        guarded.detach()


def close_sink(sink: Callable[[Mapping[str, Any]], None]) -> None:
    """End the spans a sink still holds open (a run cut short)."""
    builder = getattr(sink, "builder", None)
    if isinstance(builder, SpanBuilder):
        builder.close()


_EXPORT: dict[str, Export] = {}
_LOCK = threading.Lock()


def exporter(warn: Callable[[str], None], env: Mapping[str, str] | None = None) -> Export:
    """The process's `Export` (built on first use, closed at exit within CLOSE_SECONDS)."""
    with _LOCK:
        found = _EXPORT.get("process")
        if found is None or found._closed:
            found = _EXPORT["process"] = Export(env if env is not None else os.environ, warn)
            atexit.register(found.close)
        return found
