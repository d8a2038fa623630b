"""`/ws/build/`: the Build page's file-change notifications, as htmx out-of-band swaps.

The page says what it shows (`{"view": "build_file", "key": <file>, "deck": <deck>}`, see
static/decks_app/live.js); when files change on disk the socket sends the deck's problems
and, if the open file is among them, its new text, rendered server side from the Build
templates (`decks_app.building.views.disk_changes`)."""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from decks_app.building.filewatch import GROUP


def _shown(text: str | None) -> tuple[str, str] | None:
    """The page's hello: (file, deck), or None when it is not one (ignored, never fatal)."""
    try:
        data: Any = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("view") != "build_file":
        return None
    path, deck = data.get("key"), data.get("deck", "")
    if not isinstance(path, str) or not isinstance(deck, str) or len(path) + len(deck) > 4096:
        return None
    return path, deck


class BuildConsumer(AsyncWebsocketConsumer):
    """`/ws/build/`: tells an open Build page what changed on disk."""

    shown: tuple[str, str] | None = None

    async def connect(self) -> None:
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is not None and len(text_data) <= 8192:
            self.shown = _shown(text_data) or self.shown

    async def files_changed(self, message: dict[str, Any]) -> None:
        if self.shown is None:
            return
        from decks_app.building.views import disk_changes

        paths = [p for p in message.get("paths", []) if isinstance(p, str)]
        html = await database_sync_to_async(disk_changes)(*self.shown, paths)
        await self.send(text_data=html)
