from __future__ import annotations

import textwrap
from pathlib import Path

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
