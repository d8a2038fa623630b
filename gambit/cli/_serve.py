"""`gambit serve` and `gambit worker`: the simulator's server and its worker processes.

The implementation lives in `simulator.serve` (Django side); it is loaded by name inside the
command functions, so the engine never imports Django, Channels or Daphne.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import click

from gambit.cli import HELP_OPTIONS
from gambit.cli._options import count_option, path_option


def _simulator() -> ModuleType:
    try:
        return importlib.import_module("simulator.serve")
    except ImportError as exc:  # pragma: no cover - a broken install
        raise click.ClickException(f"the simulator is not installed: {exc}") from exc


@click.command("serve", context_settings=HELP_OPTIONS)
@click.argument("deck_or_folder", required=False)
@click.option("--host", default="127.0.0.1", show_default=True, help="interface to listen on")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--workers",
    type=click.IntRange(0, 256),
    default=None,
    help="concurrent runs executed inside this process (default 8 embedded, 0 distributed)",
)
@click.option(
    "--chat-completions",
    is_flag=True,
    help="Also serve the legacy /v1/chat/completions (off by default; /v1/responses is always on).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Another host name the server may be reached by (repeatable; checked on every "
    "request and websocket).",
)
@path_option(
    "--allow-path",
    "allow_paths",
    "Also let decks read files in this folder, outside the served workspace (repeatable; "
    "also GAMBIT_ALLOW_PATHS, or [project] allow_paths in the workspace's gambit.toml). "
    "/proc, /sys, /dev and .gambit folders are never read.",
    multiple=True,
)
def serve_command(
    deck_or_folder: str | None,
    host: str,
    port: int,
    workers: int | None,
    chat_completions: bool,
    allowed_hosts: tuple[str, ...],
    allow_paths: tuple[Path, ...],
) -> None:
    """Serve the simulator for a deck or folder (default: this folder when it holds decks).

    Without DECK_OR_FOLDER it serves the current folder when that holds decks (a PROMPT.md or
    deck.py of its own, or in its subfolders), else the bundled examples; `gambit keys`
    chooses the same way. Applies migrations, starts Daphne and, in the embedded profile, the in-process workers.
    With DATABASE_URL and REDIS_URL set it uses PostgreSQL and Redis, and runs are executed
    by `gambit worker` processes. The workspace's decks are also served as an Open Responses
    endpoint at /v1/responses (API key required: `gambit keys create NAME`).

    Every file a deck references must lie inside the served workspace (symlinks followed),
    or a folder --allow-path allows. Listing decks imports no deck code in the server, but
    the Build tab's checks and every run import the Python files decks name.

    It listens on 127.0.0.1. With another --host, every page and websocket needs an access
    token (printed in a link at start-up, or GAMBIT_ACCESS_TOKEN), host names are checked
    (add them with --allowed-host), and the banner says what is exposed.
    """
    import os

    if chat_completions:
        os.environ["GAMBIT_CHAT_COMPLETIONS"] = "1"
    if allow_paths:  # the simulator reads them from the environment, as its workers do
        given = [str(p.absolute()) for p in allow_paths]
        earlier = os.environ.get("GAMBIT_ALLOW_PATHS")
        os.environ["GAMBIT_ALLOW_PATHS"] = os.pathsep.join(
            [*given, *([earlier] if earlier else [])]
        )
    _simulator().serve(deck_or_folder, host, port, workers, allowed_hosts)


@click.command("worker", context_settings=HELP_OPTIONS)
@count_option("--slots", 8, 256, "concurrent runs")
@click.option("--burst", is_flag=True, help="exit once the queue is empty")
@click.option("--max-runs", type=int, default=None, help="exit after this many runs")
def worker_command(slots: int, burst: bool, max_runs: int | None) -> None:
    """Execute queued simulator runs (the distributed profile's worker processes).

    Runs django-tasks-db's worker in --slots threads against DATABASE_URL; start as many
    processes, on as many machines, as you like. SIGTERM stops it within 10 s: runs in flight
    end interrupted, with what streamed kept and Retry offered. In the embedded profile
    `gambit serve` runs the workers itself, and this command exits 1.
    """
    _simulator().work(slots, burst, max_runs)


@click.command("keys", context_settings=HELP_OPTIONS)
@click.argument("action", type=click.Choice(["create", "list", "revoke"]))
@click.argument("name", required=False)
@click.option(
    "--workspace",
    "folder",
    default=None,
    help="The served folder whose keys these are (default: the one `gambit serve` serves "
    "from here: this folder when it holds decks, else the bundled examples).",
)
def keys_command(action: str, name: str | None, folder: str | None) -> None:
    """Manage the API keys of /v1/* (create NAME, list, revoke NAME).

    Keys live in the database of the workspace they are made for, and stderr names it: run
    `gambit keys create` where you run `gambit serve`, or give the same folder with
    --workspace. A key is printed once, when it is created; only its digest is stored.
    GAMBIT_API_KEYS (comma-separated) also grants access, for containers and CI.
    """
    _simulator().keys(action, name, folder)
