"""`--no-compact` (docs/decks.md, "Context window and compaction"): the same long
conversation is compacted by `gambit run`, and fails at the model's window without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gambit.core._runtime._context import COMPACT_PROMPT
from tests.support.fake_model_server import FakeModelServer, RecordedRequest, Reply

GAMBIT = str(Path(sys.executable).parent / "gambit")


def _answer(request: RecordedRequest) -> Reply:
    last = request.body["input"][-1]
    text = "".join(p.get("text", "") for p in last.get("content") or [])
    return Reply(text="A short summary." if text == COMPACT_PROMPT else "Fine.")


def _run(tmp_path: Path, server: FakeModelServer, *extra: str) -> subprocess.CompletedProcess:
    deck = tmp_path / "d" / "PROMPT.md"
    deck.parent.mkdir(exist_ok=True)
    deck.write_text(
        '+++\n[modelParams]\nmodel = "openai-api/gpt-4o"\ncontextWindow = 600\n+++\nHi.\n'
    )
    history = []
    for turn in range(20):
        history.append({"role": "user", "content": f"Turn {turn}: " + "some words here " * 6})
        history.append({"role": "assistant", "content": "noted, " * 8})
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"runId": "r", "messages": history}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(server.env())
    return subprocess.run(
        [GAMBIT, "run", str(deck), "--message", "and now?", "--state", str(state), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_run_compacts_a_long_conversation_and_no_compact_lets_it_fail(tmp_path, fake_server):
    fake_server.token_budget = 600
    fake_server.queue_many([_answer] * 10)
    trace = tmp_path / "trace.jsonl"
    done = _run(tmp_path, fake_server, "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["type"] for e in events].count("context.compacted") == 1

    failed = _run(tmp_path, fake_server, "--no-compact")
    assert failed.returncode == 1
    assert "context window" in failed.stderr and "Traceback" not in failed.stderr
