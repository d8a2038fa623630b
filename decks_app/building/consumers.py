"""`/ws/build/`: the Build page's file-change notifications."""

from __future__ import annotations

import json
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

from decks_app.building.filewatch import GROUP


class BuildConsumer(AsyncWebsocketConsumer):
    """`/ws/build/`: tells an open Build page which workspace files changed on disk."""

    async def connect(self) -> None:
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return None  # the page only listens

    async def files_changed(self, message: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps({"changed": message.get("paths", [])}))
