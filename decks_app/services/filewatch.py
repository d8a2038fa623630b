"""Changes on disk (an editor outside the browser, `git pull`) reach open Build pages.

`gambit serve` runs `watch_workspace` in its event loop: watchfiles reports changed paths
(debounced), and each batch is sent to the `build` channel group, which every open Build
page's websocket joins. The Test and Grade tabs need nothing: they read decks from disk at
each run.
"""

from __future__ import annotations

import asyncio
import logging
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


async def watch_workspace(root: str, stop: asyncio.Event) -> None:
    from watchfiles import awatch

    base = Path(root).resolve()
    layer = get_channel_layer()
    try:
        async for changes in awatch(base, stop_event=stop, debounce=150, recursive=True):
            paths = sorted({p for _, raw in changes if (p := _relevant(base, raw))})
            if paths and layer is not None:
                await layer.group_send(GROUP, {"type": "files.changed", "paths": paths})
    except Exception:  # the watcher is a convenience: the pages still work without it
        log.warning("the workspace watcher stopped", exc_info=True)
