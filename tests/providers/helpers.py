"""Shared helpers for the provider tests (all run against the real fake server)."""

from __future__ import annotations

from typing import Any

from gambit.core._openresponses import CreateResponseRequest, message_item
from gambit.providers import RetryPolicy

# Tiny delays so retry tests stay fast; Retry-After is honoured up to half a second.
FAST_RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01, max_retry_after=0.5)
NO_RETRY = RetryPolicy(max_retries=0)


def request(model: str = "m", text: str = "hi", **fields: Any) -> CreateResponseRequest:
    """A request with a system and a user message."""
    items = [message_item("system", "Be brief."), message_item("user", text)]
    return CreateResponseRequest(model=model, input=items, **fields)


class Events(list):
    """An `on_stream_event` callback that records every event dict."""

    def __call__(self, event: dict[str, Any]) -> None:
        self.append(event)

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self]

    def deltas(self) -> list[str]:
        return [e["delta"] for e in self if e["type"] == "response.output_text.delta"]


class Sleeps(list):
    """A `sleep` that records the delays instead of waiting (pass it as `sleep=`).

    With `log` (a list), each pause is also appended to it as `("sleep", seconds)`, so a test
    can check the order of pauses and other recorded happenings.
    """

    def __init__(self, log: list | None = None) -> None:
        super().__init__()
        self.log = log

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)
        if self.log is not None:
            self.log.append(("sleep", seconds))
