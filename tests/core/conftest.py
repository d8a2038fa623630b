from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest


class DeckFolder:
    """Writes deck files under a temporary folder; `write` dedents and returns the path."""

    def __init__(self, root: Path):
        self.root = root

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def deck(self, rel: str, front: str = "", body: str = "Be helpful.") -> Path:
        front = textwrap.dedent(front).strip("\n")
        return self.write(rel, f"+++\n{front}\n+++\n\n{textwrap.dedent(body).strip()}\n")


@pytest.fixture
def decks(tmp_path: Path) -> DeckFolder:
    return DeckFolder(tmp_path)


ACTION_SCHEMAS = """
contextSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"
responseSchema = "gambit://schemas/scenarios/plain_chat_output.zod.ts"
"""
GRADER_SCHEMAS = """
contextSchema = "gambit://schemas/graders/contexts/conversation.zod.ts"
responseSchema = "gambit://schemas/graders/grader_output.zod.ts"
"""


MODEL = 'modelParams.model = "test-model"\n'


class Recorder:
    """Collects a run's trace events, streamed text and published states."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.text: list[str] = []
        self.states: list[Any] = []

    def types(self, prefix: str = "") -> list[str]:
        return [e["type"] for e in self.events if e["type"].startswith(prefix)]

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]

    def kwargs(self) -> dict[str, Any]:
        return {
            "on_trace": self.events.append,
            "on_stream_text": self.text.append,
            "on_state": self.states.append,
        }


async def wait_until(condition, timeout: float = 5.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds (tests never hang)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
