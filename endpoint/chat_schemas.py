"""Chat Completions wire schemas for the legacy `POST /v1/chat/completions` (docs/endpoint.md:
kept apart from the Open Responses schemas so it can be removed without touching them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content or [] if isinstance(p, dict))


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=300)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
