"""The Build assistant: a turn runs the bundled deck with the granted permissions, its edits
show as diffs and undo; it cannot write without the grant or outside the deck's folder."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from decks_app.models import Run
from decks_app.runs import executor, queue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    (tmp_path / "outside.md").write_text("keep me\n")
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def _turn(client, message: str, grant: str = "write") -> dict:
    sent = client.post(
        "/build/assistant/send",
        {"deck": "support/PROMPT.md", "message": message, "grant": grant},
    )
    assert sent.status_code == 202, sent.content
    run_id = sent.json()["run"]
    assert queue.claim_next_run("test") == run_id
    asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60))
    return client.get("/build/assistant.json?deck=support/PROMPT.md").json()


def test_the_assistant_applies_a_patch_shown_as_a_diff_and_undone(client, ws):
    data = _turn(
        client, 'Please replace "Keep answers short" with "Keep answers brief" in PROMPT.md'
    )
    run = data["runs"][-1]
    assert run["status"] == "completed"
    (change,) = run["changes"]
    assert change["path"] == "PROMPT.md"
    assert "-- Keep answers short, kind and concrete." in change["diff"]
    assert "+- Keep answers brief, kind and concrete." in change["diff"]
    assert "Keep answers brief" in (ws / "support/PROMPT.md").read_text()
    assert [m["kind"] for m in data["conversation"]][:1] == ["user"]
    undone = client.post("/build/assistant/undo", {"run": run["id"]})
    assert undone.json() == {"restored": ["PROMPT.md"]}
    assert "Keep answers short" in (ws / "support/PROMPT.md").read_text()
    assert client.post("/build/assistant/undo", {"run": run["id"]}).status_code == 409
    # In the page (htmx), a refusal is swapped in and said outside the live part, so a live
    # update cannot wipe it (it was a 409 htmx did not swap, then nothing on the page).
    refused = client.post("/build/assistant/undo", {"run": run["id"]}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 200
    html = refused.content.decode()
    assert (
        '<p id="assistant-notice" role="status" aria-live="polite" class="meta">this change was already undone</p>'
        in html
    )
    assert html.index('id="assistant-live"') < html.index('id="assistant-notice"')


def test_without_the_write_grant_nothing_changes(client, ws):
    before = (ws / "support/PROMPT.md").read_text()
    data = _turn(client, 'replace "Keep answers short" with "X" in PROMPT.md', grant="read")
    assert data["runs"][-1]["changes"] == []
    assert (ws / "support/PROMPT.md").read_text() == before


def test_it_cannot_write_outside_the_decks_folder(client, ws):
    _turn(client, 'replace "keep me" with "gone" in ../../outside.md')
    assert (ws.parent / "outside.md").read_text() == "keep me\n"
    run = Run.objects.filter(kind="assistant").latest("created_at")
    assert run.status == "completed"  # a denied call is a tool result; the run goes on
    results = [e.payload for e in run.events.filter(type="tool.result")]
    assert any('"status":403' in str(r.get("result")) for r in results), results


def test_bad_requests(client, ws):
    empty = client.post("/build/assistant/send", {"deck": "support/PROMPT.md", "message": " "})
    assert empty.status_code == 400
    grant = client.post(
        "/build/assistant/send", {"deck": "support/PROMPT.md", "message": "x", "grant": "exec"}
    )
    assert grant.status_code == 400
    assert client.get("/build/assistant.json?deck=nope/PROMPT.md").status_code == 404
    assert client.post("/build/assistant/undo", {"run": "run-0"}).status_code == 404
    assert client.get("/build/assistant/send").status_code == 405


def test_a_coding_agent_bridge_can_be_the_assistants_model(client, ws, tmp_path, monkeypatch):
    from tests.providers.test_agent_bridges import CLAUDE_EVENTS, fake_executable

    fake = fake_executable(tmp_path / "bin", "claude", CLAUDE_EVENTS)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    sent = client.post(
        "/build/assistant/send",
        {
            "deck": "support/PROMPT.md",
            "message": "What does a.md say?",
            "grant": "read",
            "model": "claude-code-cli/default",
        },
    )
    run_id = sent.json()["run"]
    assert queue.claim_next_run("test") == run_id
    asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60))
    data = client.get("/build/assistant.json?deck=support/PROMPT.md").json()
    assert data["runs"][-1]["status"] == "completed"
    assert "It is a heading." in data["conversation"][-1]["text"]


# ---------------------------------------------------------------- the offline model (issue 26)


def test_offline_the_assistant_says_what_it_can_do_and_calls_no_tool(client, ws):
    """Asked in a sentence, the demo model used to call read/search tools with arguments
    made from the sentence ("directory not found: /tmp/..."), change nothing and not say
    which model answered."""
    before = {p: p.read_text() for p in (ws / "support").rglob("*.md")}
    data = _turn(client, "Make the greeting friendlier and mention the refund policy.")
    run = data["runs"][-1]
    assert run["status"] == "completed" and run["changes"] == []
    assert run["model"] == "offline/demo" and run["offline"] is True
    reply = data["conversation"][-1]
    assert reply["kind"] == "assistant"
    assert "offline demo model" in reply["text"]
    assert 'replace "old text" with "new text" in PROMPT.md' in reply["text"]
    assert "not found" not in reply["text"] and "/tmp" not in reply["text"]
    session_runs = Run.objects.get(pk=run["id"]).session.events.filter(type="tool.call")
    assert not session_runs.exists()  # no tool was called
    assert {p: p.read_text() for p in (ws / "support").rglob("*.md")} == before
    html = client.get("/build/file?path=support/PROMPT.md&deck=support/PROMPT.md").content
    assert b'id="assistant-answered-by"' in html and b"<code>offline/demo</code>" in html


def test_offline_an_edit_in_a_sentence_is_applied_and_said(client, ws):
    data = _turn(
        client,
        "Could you replace \u201cKeep answers short\u201d with \u201cKeep answers crisp\u201d "
        "in PROMPT.md, please?",
    )
    run = data["runs"][-1]
    (change,) = run["changes"]
    assert "+- Keep answers crisp, kind and concrete." in change["diff"]
    assert data["conversation"][-1]["text"].startswith(
        "Done: I replaced \u201cKeep answers short\u201d with \u201cKeep answers crisp\u201d"
    )
    events = Run.objects.get(pk=run["id"]).session.events.filter(type="tool.call")
    assert events.exists()  # the edit was a tool call (and the check above can see one)


def test_offline_a_refused_edit_is_said(client, ws):
    data = _turn(
        client, 'replace "Keep answers short" with "Keep answers crisp" in PROMPT.md', "read"
    )
    assert data["runs"][-1]["changes"] == []
    assert data["conversation"][-1]["text"].startswith("I could not replace")


def test_offline_an_edit_whose_text_is_not_there_is_not_called_done(client, ws):
    # Before: "Done: I replaced “nothing-like-this” with “x” in PROMPT.md (... the diff is
    # below, with Undo)", with no diff and the file unchanged.
    before = (ws / "support/PROMPT.md").read_text()
    data = _turn(client, 'replace "nothing-like-this" with "x" in PROMPT.md')
    assert data["runs"][-1]["changes"] == []
    text = data["conversation"][-1]["text"]
    assert text.startswith("I could not replace \u201cnothing-like-this\u201d in PROMPT.md: ")
    assert text.endswith("No edit targets were found in PROMPT.md") and "Done" not in text
    assert (ws / "support/PROMPT.md").read_text() == before


def test_the_snapshot_does_not_follow_links_out_of_the_folder_or_into_hidden_ones(tmp_path):
    # What an undo restores was read through links: one to /proc/self/environ or to the
    # simulator's .gambit would be copied into the run's record and shown in its diff.
    from decks_app.building.assistant import snapshot

    deck = tmp_path / "deck"
    (deck / ".gambit").mkdir(parents=True)
    (deck / ".gambit" / "secret_key").write_text("sk-django")
    (deck / "PROMPT.md").write_text("Hi")
    (tmp_path / "outside.md").write_text("outside")
    (deck / "env.md").symlink_to("/proc/self/environ")
    (deck / "key.md").symlink_to(deck / ".gambit" / "secret_key")
    (deck / "out.md").symlink_to(tmp_path / "outside.md")
    (deck / "same.md").symlink_to(deck / "PROMPT.md")
    assert snapshot(deck) == {"PROMPT.md": "Hi", "same.md": "Hi"}
