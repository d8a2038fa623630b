"""The simulator's runs as OpenTelemetry spans (docs/observability.md).

When the standard `OTEL_EXPORTER_OTLP_ENDPOINT` is set in the server's (or worker's)
environment, `sink(conversation_id)` gives a trace callback that turns a run's events into
spans through the engine's bridge (`gambit.otel`), with the session id as
`gen_ai.conversation.id`; otherwise None, and the SDK is never imported. Spans are sent in
the background by the process's one exporter; a collector that is down is logged once
(this module's logger, level WARNING) and never fails or slows a run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from gambit.otel import configured

log = logging.getLogger(__name__)

Sink = Callable[[Mapping[str, Any]], None]

_missing_told: list[bool] = []


def sink(conversation_id: str | None) -> Sink | None:
    """A span sink for one run (or one scenario run of a Verify batch), or None."""
    if not configured(os.environ):
        return None
    try:
        from gambit.otel.live import exporter
    except ImportError as exc:
        if not _missing_told:
            _missing_told.append(True)
            log.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is missing "
                "(%s); install it with: pip install 'gambit-py[otel]'",
                exc,
            )
        return None
    return exporter(log.warning).sink(conversation_id)


def close(spans: Sink | None) -> None:
    """End the spans a run left open (a canceled or interrupted run)."""
    if spans is None:
        return
    from gambit.otel.live import close_sink

    close_sink(spans)
