"""`gambit export otel FILE`: a recorded trace to an OpenTelemetry collector."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import GambitError

from ._common import fail


@click.group("export", context_settings=HELP_OPTIONS)
def export_group() -> None:
    """Send a recorded trace elsewhere: `export otel FILE` to an OpenTelemetry collector.

    Runs export their spans as they happen when OTEL_EXPORTER_OTLP_ENDPOINT is set
    (docs/observability.md); these commands send a trace recorded earlier.
    """


@export_group.command("otel", context_settings=HELP_OPTIONS)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--endpoint",
    help="The collector's OTLP/HTTP base URL (default: OTEL_EXPORTER_OTLP_ENDPOINT), "
    "such as http://localhost:4318.",
)
@click.option(
    "--conversation-id",
    metavar="ID",
    help="The gen_ai.conversation.id of every span (default: each run's id). Give a "
    "simulator session's id to group its downloaded trace as its live spans are.",
)
def otel_command(file: Path, endpoint: str | None, conversation_id: str | None) -> None:
    """Send FILE's runs to an OpenTelemetry collector as GenAI spans.

    FILE is a trace in JSON Lines (gambit run --trace, a session's trace download) or a
    saved state with its traces (a session export). The spans keep their recorded times.
    Headers, protocol and content capture come from the standard OTEL_* variables
    (docs/observability.md).
    """
    from gambit.otel import configured

    env = dict(os.environ)
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        os.environ.update(env)  # the exporter reads its headers and timeout from here
    if not configured(env):
        fail("no collector: set OTEL_EXPORTER_OTLP_ENDPOINT or pass --endpoint URL")
    if not file.exists():
        fail(f"{file}: file not found")
    try:
        from gambit.otel.replay import export_file
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        fail(f"the OpenTelemetry SDK is missing ({exc}); install: pip install 'gambit-py[otel]'")
    try:
        # The collector's failure is this command's error (below), not a warning.
        result = export_file(file, env, lambda line: None, conversation_id=conversation_id)
    except GambitError as exc:
        fail(str(exc).splitlines()[0])
    if result.spans == 0:
        fail(f"{file}: no run in this trace (no run.start event)")
    if result.failed:
        reason = f" ({result.reason})" if result.reason else ""
        fail(
            f"the collector at {result.endpoint} took {result.exported} of {result.spans} "
            f"spans{reason}"
        )
    click.echo(f"sent {result.spans} spans ({result.events} trace events) to {result.endpoint}")
