"""No turn is lost: checkpoints during a run, recovery of an interrupted turn, Retry, one run
per session enforced by the database, and saves that never overwrite a newer conversation."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import executor, queue, state
from decks_app.runs.events import append_events
from decks_app.sessions.actions import (
    InvalidInput,
    SessionBusy,
    create_run,
    create_session,
    retry_run,
    send_message,
)
from decks_app.sessions.trace_tree import build_tree
from decks_app.workspaces.served import current_workspace
from tests.support.fake_model_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _session(model: str = "openresponses/fake") -> Session:
    return create_session(current_workspace(), "support/PROMPT.md", model=model)


def _crashed_run(session: Session, *, streamed: str, checkpointed: bool = False) -> Run:
    """A run as a kill -9 leaves it: `running`, its trace up to some text deltas, and (if
    `checkpointed`) the conversation saved after its user message."""
    run = send_message(session, "where is my order?")
    run.status = "running"
    run.turn_base = state.turn_base(session, 0)
    run.save()
    events = [
        {"type": "run.start", "runId": run.id, "deckPath": "support/PROMPT.md"},
        {"type": "message.user", "actionCallId": "a1", "message": {"role": "user"}},
        {"type": "deck.start", "actionCallId": "a1", "deckPath": "support/PROMPT.md"},
        {"type": "model.call", "actionCallId": "a1", "model": "fake", "messageCount": 2},
    ]
    if checkpointed:
        session.messages = [{"role": "user", "content": "where is my order?"}]
        session.items = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "where is my order?"}]}
        ]  # fmt: skip
        session.message_refs = [{"id": "msg-1", "role": "user", "source": "manual"}]
        session.save()
        run.turn_base = {**run.turn_base, "savedMessages": 1, "savedItems": 1, "checkpointSeq": 4}
        run.save()
    for piece in streamed.split(" "):
        events.append(
            {"type": "response.output_text.delta", "delta": piece + " ", "_gambit": {"action_call_id": "a1"}}
        )  # fmt: skip
    # A child deck's text is not the root's reply.
    events.append(
        {"type": "response.output_text.delta", "delta": "CHILD", "_gambit": {"action_call_id": "a2", "parent_action_call_id": "a1"}}
    )  # fmt: skip
    append_events(run.id, session.id, 1, events)
    return run


def test_an_interrupted_turn_keeps_the_users_message_and_the_partial_reply():
    session = _session()
    run = _crashed_run(session, streamed="Your order left the warehouse")
    assert queue.mark_interrupted(stale_only=False) == [run.id]
    session.refresh_from_db()
    assert session.messages[-2:] == [
        {"role": "user", "content": "where is my order?"},
        {"role": "assistant", "content": "Your order left the warehouse"},
    ]
    assert [i["role"] for i in session.items[-2:]] == ["user", "assistant"]
    assert session.message_refs[-1]["status"] == "interrupted"
    assert len(session.message_refs) == len(session.messages)
    end = TraceEvent.objects.filter(run=run).order_by("-seq").first()
    assert end.type == "run.end" and end.payload["status"] == "interrupted"
    # The trace tree shows the run ended: nothing left "running" or "calling".
    tree = build_tree(
        list(TraceEvent.objects.filter(run=run).order_by("seq").values_list("payload", flat=True))
    )
    statuses = []

    def walk(node):
        statuses.append(node.status)
        for child in node.children:
            walk(child)

    for node in tree:
        walk(node)
    assert statuses[0] == "interrupted" and "running" not in statuses and "calling" not in statuses


def test_a_checkpointed_message_is_not_added_twice():
    session = _session()
    _crashed_run(session, streamed="Half a reply", checkpointed=True)
    queue.mark_interrupted(stale_only=False)
    session.refresh_from_db()
    assert [m["content"] for m in session.messages] == ["where is my order?", "Half a reply"]


def test_the_page_and_its_json_offer_retry(client):
    session = _session()
    run = _crashed_run(session, streamed="Partial words")
    queue.mark_interrupted(stale_only=False)
    data = client.get(f"/test/{session.id}.json").json()
    assert data["status"] == "interrupted"
    assert data["retry"] == {"runId": run.id, "url": f"/test/{session.id}/retry"}
    assert data["conversation"][-1]["status"] == "interrupted"
    page = client.get(f"/test/{session.id}").content.decode()
    assert 'id="retry"' in page and ">interrupted</span>" in page


def test_retry_cuts_the_turn_out_and_sends_the_same_message_again(client, csrf_client):
    session = _session()
    run = _crashed_run(session, streamed="Partial words")
    queue.mark_interrupted(stale_only=False)
    assert csrf_client.post(f"/test/{session.id}/retry", {"runId": run.id}).status_code == 403
    assert client.get(f"/test/{session.id}/retry").status_code == 405
    r = client.post(f"/test/{session.id}/retry?format=json", {"runId": run.id})
    assert r.status_code == 202
    session.refresh_from_db()
    assert session.messages == [] and session.items == [] and session.message_refs == []
    retried = Run.objects.get(pk=r.json()["runId"])
    assert retried.status == "queued" and retried.params == {"message": "where is my order?"}
    assert r.json()["retry"] is None  # the new run is not retryable while queued
    # Only the last turn, once ended badly, can be retried.
    r = client.post(f"/test/{session.id}/retry?format=json", {"runId": run.id})
    assert r.status_code == 409
    assert client.post("/test/session-0000/retry", {"runId": run.id}).status_code == 404


def test_retry_refuses_a_completed_turn_and_unknown_ids(client):
    session = _session()
    run = send_message(session, "hello")
    Run.objects.filter(pk=run.id).update(status="completed", turn_base={"messages": 0})
    for run_id in (run.id, "run-nope", ""):
        r = client.post(f"/test/{session.id}/retry", {"runId": run_id})
        assert r.status_code == 409
    with pytest.raises(InvalidInput, match="only the last turn can be retried"):
        retry_run(session, run.id)


def test_one_active_run_per_session_is_enforced_by_the_database():
    session = _session()
    Run.objects.create(session=session, kind="manual", params={"message": "one"})
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            session=session, kind="manual", params={"message": "two"}, status="running"
        )
    with pytest.raises(SessionBusy):
        create_run(session=session, kind="manual", params={"message": "three"})
    # Finished runs do not count.
    Run.objects.filter(session=session).update(status="completed")
    create_run(session=session, kind="manual", params={"message": "four"})


async def test_a_first_pass_in_flight_is_kept_by_its_trace(fake_server, monkeypatch):
    """A turn's start is not checkpointed (the run's params hold its message; saving the
    conversation for it cost a transaction per run): while the first pass streams, the saved
    conversation is the one the run found, and the user's message and the streamed text are
    in the trace. A crash now loses nothing: recovery puts both into the conversation."""
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(deltas=[f"w{i} " for i in range(300)], delay=0.02))
    session = await sync_to_async(_session)()
    run = await sync_to_async(send_message)(session, "keep me")
    assert await sync_to_async(queue.claim_next_run)("w1") == run.id
    task = asyncio.create_task(executor.execute_run(run.id))
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            types = [
                t async for t in TraceEvent.objects.filter(run=run).values_list("type", flat=True)
            ]
            if "message.user" in types and "response.output_text.delta" in types:
                break
        else:
            raise AssertionError("the run's start and first text were not written")
        saved = await Session.objects.aget(pk=session.id)
        assert not any(m.get("content") == "keep me" for m in saved.messages or [])
        # Another process finds the run dead (as after a kill -9) and recovers its turn.
        assert await sync_to_async(queue.mark_interrupted)(stale_only=False) == [run.id]
    finally:
        await asyncio.wait_for(task, 10)
    saved = await Session.objects.aget(pk=session.id)
    assert [m["role"] for m in saved.messages] == ["user", "assistant"]
    assert saved.messages[0]["content"] == "keep me"
    # The reply as far as it had streamed (a prefix of the whole, at least its first word).
    partial = saved.messages[1]["content"]
    assert partial.startswith("w0") and "".join(f"w{i} " for i in range(300)).startswith(partial)
    assert saved.message_refs[-1]["status"] == "interrupted"


async def test_a_run_interrupted_by_another_process_does_not_overwrite(fake_server, monkeypatch):
    """If another process marked the run interrupted (and recovered its turn) while it was
    still going, the run's own late save leaves that record alone."""
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(deltas=[f"w{i} " for i in range(60)], delay=0.01))
    session = await sync_to_async(_session)()
    run = await sync_to_async(send_message)(session, "race")
    assert await sync_to_async(queue.claim_next_run)("w1") == run.id
    task = asyncio.create_task(executor.execute_run(run.id))
    await asyncio.sleep(0.2)
    assert await sync_to_async(queue.mark_interrupted)(stale_only=False) == [run.id]
    interrupted = await Session.objects.aget(pk=session.id)
    await asyncio.wait_for(task, 10)
    run = await Run.objects.aget(pk=run.id)
    after = await Session.objects.aget(pk=session.id)
    assert run.status == "interrupted"
    assert after.messages == interrupted.messages and after.items == interrupted.items
