"""Spans from a recorded trace: `gambit export otel FILE` (docs/observability.md).

FILE is a trace in JSON Lines (`gambit run --trace`, the simulator's trace download) or a
SavedState JSON file with its `traces` (a session export). Its events become spans at the
times they were recorded, as a live export would have made them, and are sent to the
collector the standard variables name; unlike a run, the command waits for the collector
and says whether it took them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gambit.core import GambitError, read_trace
from gambit.otel.live import Export
from gambit.otel.spans import SpanBuilder

__all__ = ["ReplayResult", "export_file", "recorded_events"]


@dataclass
class ReplayResult:
    """What `export_file` sent: events read, spans made and taken, and why not, if not."""

    events: int
    spans: int
    exported: int
    failed: bool
    endpoint: str
    reason: str | None = None


def recorded_events(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The trace events of `path` and, for a session export, its conversation's run id.

    Raises GambitError (a TraceError names the line) for a file that is neither."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GambitError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise GambitError(f"{path}: not UTF-8 text") from None
    head = text.lstrip()[:1]
    if head == "{":
        try:
            data = json.loads(text)
        except ValueError:
            data = None  # JSON Lines: one object per line
        if isinstance(data, dict) and "type" not in data:
            traces = data.get("traces")
            if not isinstance(traces, list) or not traces:
                raise GambitError(
                    f"{path}: a saved state without `traces`; export the session's trace "
                    "(JSON Lines) instead"
                )
            events = [e for e in traces if isinstance(e, dict) and isinstance(e.get("type"), str)]
            run_id = data.get("runId")
            return events, run_id if isinstance(run_id, str) else None
    read_trace(path)  # checks every line, naming the first bad one (TraceError)
    return [json.loads(line) for line in text.split("\n") if line.strip()], None


def export_file(
    path: Path,
    env: Mapping[str, str],
    warn: Callable[[str], None],
    *,
    wait_seconds: float = 15.0,
    conversation_id: str | None = None,
) -> ReplayResult:
    """Send the spans of the trace in `path`; wait for the collector (at most
    `wait_seconds`). `conversation_id` is every span's conversation (default: a saved
    state's run id, else each run's own)."""
    events, conversation = recorded_events(path)
    conversation = conversation_id or conversation
    export = Export(env, warn)
    builder = SpanBuilder(
        export.tracer, capture_content=export.capture, conversation_id=conversation
    )
    for event in events:
        builder.on_event(event)
    last = max((e["ts"] for e in events if isinstance(e.get("ts"), int)), default=None)
    builder.close(last * 1_000_000 if last is not None else None)
    export.close(wait_seconds)
    guarded = export.guarded
    from gambit.otel.live import traces_endpoint

    return ReplayResult(
        events=len(events),
        spans=builder.started,
        exported=guarded.exported if guarded is not None else 0,
        failed=guarded is None or guarded.failures > 0 or guarded.exported < builder.started,
        endpoint=traces_endpoint(env),
        reason=guarded.reason if guarded is not None else None,
    )
