"""Changes on disk (an editor outside the browser, `git pull`) reach open Build pages.

`gambit serve` starts `start_watcher`: a daemon thread where watchfiles reports changed paths
(debounced), and each batch is sent to the `build` channel group, which every open Build
page's websocket joins. A daemon thread (not anyio's worker threads) so a stopping server is
never held up by it. The Test and Grade tabs need nothing: they read decks from disk at each
run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from channels.layers import get_channel_layer

log = logging.getLogger(__name__)
GROUP = "build"
IGNORED = {".gambit", ".git", "__pycache__", ".venv", "node_modules"}


def _relevant(root: Path, path: str) -> str | None:
    try:
        rel = Path(path).resolve().relative_to(root)
    except ValueError:
        return None
    if any(part in IGNORED or part.startswith(".") for part in rel.parts):
        return None
    return str(rel)


def start_watcher(root: str, loop: asyncio.AbstractEventLoop) -> threading.Event:
    """Watch `root` in a daemon thread; set the returned event to stop it."""
    from watchfiles import watch

    stop = threading.Event()
    base = Path(root).resolve()
    layer = get_channel_layer()

    def run() -> None:
        try:
            for changes in watch(base, stop_event=stop, debounce=150, rust_timeout=300):
                paths = sorted({p for _, raw in changes if (p := _relevant(base, raw))})
                if paths and layer is not None and not loop.is_closed():
                    message = {"type": "files.changed", "paths": paths}
                    asyncio.run_coroutine_threadsafe(layer.group_send(GROUP, message), loop)
        except Exception:  # the watcher is a convenience: the pages still work without it
            log.warning("the workspace watcher stopped", exc_info=True)

    threading.Thread(target=run, name="gambit-workspace-watcher", daemon=True).start()
    return stop
