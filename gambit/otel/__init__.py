"""OpenTelemetry export of Gambit traces (docs/observability.md).

A bridge outside the engine: `gambit.core` emits trace events (docs/decks.md, "Traces") and
this package turns them into spans that follow the OpenTelemetry GenAI semantic conventions
(`SEMCONV_VERSION`), sent with the official SDK's batching span processor and OTLP exporter.

This module reads only the environment and imports nothing of OpenTelemetry: the CLI and the
simulator call `configured(env)` on every run, and only when the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set do they import
`gambit.otel.live` (the SDK) to build an exporter. Install the SDK with the `otel` extra:
`pip install 'gambit-py[otel]'`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SEMCONV_VERSION", "capture_content", "configured"]

# The version of the OpenTelemetry semantic conventions (GenAI spans and attributes) the
# spans follow; the `opentelemetry-semantic-conventions` release the extra pins carries it.
SEMCONV_VERSION = "1.44.0"

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def configured(env: Mapping[str, str]) -> bool:
    """Whether spans are to be exported: an OTLP endpoint is set and the SDK is not disabled
    (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def capture_content(env: Mapping[str, str]) -> bool:
    """The standard opt-in for message content on GenAI spans
    (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`); off by default."""
    value = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in ("true", "1", "yes", "span_only", "span_and_event")
