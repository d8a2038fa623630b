"""gambit.toml's `[context]` reaches `/v1/responses` (docs/decks.md, "Context window and
compaction"): a long conversation sent to a deck served by `gambit serve` is compacted
before the model sees it, as `gambit run` and the simulator do, and a workspace with
`compact = false` sends it whole."""

from __future__ import annotations

import httpx
import pytest

from gambit.core._runtime._context import COMPACT_PROMPT
from tests.endpoint.serving import KEY, serve, write
from tests.support.fake_model_server import FakeModelServer, RecordedRequest, Reply

HEADERS = {"Authorization": f"Bearer {KEY}"}


def _last_text(request: RecordedRequest) -> str:
    last = request.body["input"][-1]
    content = last.get("content") or []
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def _answer(request: RecordedRequest) -> Reply:
    return Reply(text="A short summary." if _last_text(request) == COMPACT_PROMPT else "Fine.")


def _conversation() -> list[dict]:
    items: list[dict] = []
    for turn in range(20):
        items.append({"role": "user", "content": f"Turn {turn}: " + "some words here " * 6})
        items.append({"role": "assistant", "content": "noted, " * 8})
    items.append({"role": "user", "content": "and now?"})
    return items


@pytest.mark.parametrize("compact", [True, False])
def test_the_workspaces_context_table_compacts_a_long_conversation(tmp_path, compact):
    upstream = FakeModelServer().start()
    try:
        write(
            tmp_path,
            "decks/gambit.toml",
            f"[context]\nwindow = 600\ncompact = {str(compact).lower()}\n",
        )
        write(
            tmp_path,
            "decks/long/PROMPT.md",
            '+++\nlabel = "Long"\nmodelParams.model = "openresponses/fake"\n+++\nHi.\n',
        )
        upstream.queue_many([_answer] * 6)
        proc, url, log = serve(tmp_path, env_extra=upstream.env())
        try:
            raw = httpx.post(
                url + "/v1/responses",
                json={"model": "deck/long", "input": _conversation()},
                headers=HEADERS,
                timeout=60,
            )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            log.close()
        assert raw.status_code == 200, raw.text
        sent = upstream.requests_to("/responses")
        summaries = [r for r in sent if _last_text(r) == COMPACT_PROMPT]
        if compact:
            assert len(summaries) == 1, [_last_text(r) for r in sent]
            # the answering request carries the summary, not the twenty turns
            answering = sent[-1].body["input"]
            assert len(answering) < 10
            assert "A short summary." in str(answering)
        else:
            assert summaries == []
            assert len(sent[-1].body["input"]) >= 41
    finally:
        upstream.stop()
