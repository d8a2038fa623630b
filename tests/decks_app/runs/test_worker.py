"""The worker: tasks for queued runs, claim, execute through run_deck, events first, state saved,
cancel, interrupt; django-tasks-db's worker threads delivering runs to the run loop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from decks_app.models import Run, TraceEvent
from decks_app.runs import ending, executor, queue, slots, worker
from decks_app.runs.events import coalesce
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace
from tests.support.fake_model_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _setup(deck="support/PROMPT.md", model="offline/echo", message="hello <b>"):
    ws = current_workspace()
    session = create_session(ws, deck, model=model)
    run = send_message(session, message)
    return session, run


async def test_it_runs_a_deck_and_saves_state_events_and_usage():
    session, run = await sync_to_async(_setup)()
    assert await sync_to_async(queue.claim_next_run)("w1") == run.id
    assert await asyncio.wait_for(executor.execute_run(run.id), 20) == "completed"
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "completed" and run.total_tokens > 0 and run.finished_at
    assert run.result == {"output": "You said: hello <b>"}
    session = await type(session).objects.aget(pk=session.id)
    assert session.messages[-1] == {"role": "assistant", "content": "You said: hello <b>"}
    assert len(session.message_refs) == len(session.messages)
    assert session.state_version >= 1  # each checkpoint and the final save bump it
    types = [
        t
        async for t in TraceEvent.objects.filter(run=run)
        .order_by("seq")
        .values_list("type", flat=True)
    ]
    assert types[0] == "run.start" and types[-1] == "run.end" and "model.result" in types
    seqs = [
        s
        async for s in TraceEvent.objects.filter(run=run)
        .order_by("id")
        .values_list("seq", flat=True)
    ]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_it_runs_compute_decks_with_the_message_as_input():
    session, run = await sync_to_async(_setup)("hello/deck.py", "", "Ada")
    await sync_to_async(queue.claim_next_run)("w1")
    assert await asyncio.wait_for(executor.execute_run(run.id), 20) == "completed"
    session = await type(session).objects.aget(pk=session.id)
    assert session.messages == [
        {"role": "user", "content": "Ada"},
        {"role": "assistant", "content": "Hello, Ada!"},
    ]


async def test_it_streams_from_a_real_http_model_and_coalesces(fake_server, monkeypatch):
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(
        Reply(
            deltas=[f"w{i} " for i in range(40)],
            delay=0.002,
            usage={"input_tokens": 10, "output_tokens": 40, "cost": 0.0012},
        )
    )
    session, run = await sync_to_async(_setup)(model="openresponses/fake")
    await sync_to_async(queue.claim_next_run)("w1")
    assert await asyncio.wait_for(executor.execute_run(run.id), 20) == "completed"
    saved = await Run.objects.aget(pk=run.id)
    assert (saved.total_tokens, saved.cost) == (50, 0.0012)
    deltas = [
        p
        async for p in TraceEvent.objects.filter(run_id=run.id, type="response.output_text.delta")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    assert "".join(d["delta"] for d in deltas) == "".join(f"w{i} " for i in range(40))
    assert sum(d.get("coalesced", 1) for d in deltas) == 40


def test_it_coalesces_consecutive_deltas_of_one_item():
    d = lambda t, i="a": {"type": "response.output_text.delta", "item_id": i, "delta": t}  # noqa: E731
    out = coalesce([d("a"), d("b"), {"type": "log"}, d("c"), d("d", "z")])
    assert [(e["type"], e.get("delta"), e.get("coalesced")) for e in out] == [
        ("response.output_text.delta", "ab", 2),
        ("log", None, None),
        ("response.output_text.delta", "c", None),
        ("response.output_text.delta", "d", None),
    ]


async def test_it_cancels_a_running_run_on_request(fake_server, monkeypatch):
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(deltas=[f"w{i} " for i in range(200)], delay=0.02))
    session, run = await sync_to_async(_setup)(model="openresponses/fake")
    await sync_to_async(queue.claim_next_run)("w1")
    task = asyncio.create_task(executor.execute_run(run.id))
    for _ in range(100):
        if await TraceEvent.objects.filter(
            run_id=run.id, type="response.output_text.delta"
        ).aexists():
            break
        await asyncio.sleep(0.05)
    await Run.objects.filter(pk=run.id).aupdate(cancel_requested=True)
    assert await asyncio.wait_for(task, 10) == "canceled"
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "canceled"
    end = await TraceEvent.objects.filter(run_id=run.id, type="run.end").afirst()
    assert end.payload["status"] == "canceled"


def test_a_queued_run_becomes_a_task_when_its_transaction_commits():
    from django.db import transaction
    from django.tasks import default_task_backend

    default_task_backend.clear()
    with transaction.atomic():
        _, run = _setup()
        assert default_task_backend.results == []  # not before the run is committed
    [task] = default_task_backend.results
    assert task.task.module_path == "decks_app.runs.tasks.execute_run" and task.args == [run.id]


async def test_a_delivered_task_claims_its_run_and_runs_it_on_the_run_loop():
    _, run = await sync_to_async(_setup)()
    worker.attach(asyncio.get_running_loop())
    assert await asyncio.to_thread(worker.execute, run.id) == "completed"
    # Delivered again (a second worker, a restart): the run is not queued, nothing happens.
    assert await asyncio.to_thread(worker.execute, run.id) == "skipped"
    assert await asyncio.to_thread(worker.execute, "../etc/passwd") == "skipped"
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "completed" and run.result == {"output": "You said: hello <b>"}


async def test_a_slot_prepares_and_ends_its_run_in_its_own_thread(fake_server, monkeypatch):
    # The run loop's database thread only writes trace batches; the run's job and its end
    # are the slot's (docs/decisions.md, "A run's start and end in its slot's thread").
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(deltas=["slow ", "reply"], delay=0.3))
    _, run = await sync_to_async(_setup)(model="openresponses/fake")
    worker.attach(asyncio.get_running_loop())
    threads: dict[str, str] = {}
    for module, name in ((executor, "load_job"), (ending, "finish_run")):
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            threads[_name] = threading.current_thread().name
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)

    def slot() -> str:
        threads["slot"] = threading.current_thread().name
        return worker.execute(run.id)

    delivered = asyncio.create_task(asyncio.to_thread(slot))
    seen_in_flight = 0
    while not delivered.done():
        seen_in_flight = max(seen_in_flight, worker.in_flight())
        await asyncio.sleep(0.02)
    assert await delivered == "completed"
    assert threads["load_job"] == threads["finish_run"] == threads["slot"]
    # Counted from its claim to its recorded end (`gambit worker --burst` waits for it).
    assert seen_in_flight == 1 and worker.in_flight() == 0
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "completed" and run.result == {"output": "slow reply"}


async def test_a_run_a_slot_cannot_execute_fails_with_the_reason():
    _, run = await sync_to_async(_setup)()
    # written behind the model's back (an old row): the slot's preparation refuses it
    await Run.objects.filter(pk=run.id).aupdate(params={"message": 42})
    worker.attach(asyncio.get_running_loop())
    assert await asyncio.to_thread(worker.execute, run.id) == "failed"
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "failed" and "message: Input should be a valid string" in run.error
    assert run.finished_at is not None and worker.in_flight() == 0


async def test_django_tasks_db_worker_threads_drain_the_queue_on_the_run_loop():
    from decks_app.runs import tasks

    runs = [(await sync_to_async(_setup)(message=f"m{i}"))[1] for i in range(3)]
    for run in runs:  # the distributed profile's backend, here on SQLite
        await sync_to_async(tasks.execute_run.using(backend="database").enqueue)(run.id)
    worker.attach(asyncio.get_running_loop())
    pool = slots.DatabaseWorkers(2, backend="database").start()
    try:
        for _ in range(200):
            done = await Run.objects.filter(status="completed").acount()
            if done == 3:
                break
            await asyncio.sleep(0.05)
    finally:
        pool.stop()
        await asyncio.to_thread(pool.join, 5)
    statuses = {r.id: (r.status, r.result) async for r in Run.objects.all()}
    assert statuses == {
        r.id: ("completed", {"output": f"You said: m{i}"}) for i, r in enumerate(runs)
    }
    from django_tasks_db.models import DBTaskResult

    finished = [t.status async for t in DBTaskResult.objects.all()]
    assert finished == ["SUCCESSFUL"] * 3
    assert not any(t.is_alive() for t in pool.threads)


def _spy_task_rows(monkeypatch, before_end=None, lose_first_end=False):
    """What marks the task rows: the worker's own `set_successful` calls (their return
    values), and each run's end with the row's status right after it (in the slot's
    thread). `before_end(run_id)` runs first; `lose_first_end`: the first end fails after
    its writes, before its commit (rolled back, as if the database went away)."""
    from django.db import OperationalError, transaction
    from django_tasks_db.models import DBTaskResult

    by_worker: list[str] = []
    ends: list[str] = []
    real_mark, real_finish = DBTaskResult.set_successful, ending.finish_run

    def mark(self, return_value):
        by_worker.append(return_value)
        return real_mark(self, return_value)

    def finish(run_id, *args, **kwargs):
        if before_end is not None:
            before_end(run_id)
        if lose_first_end and not ends:
            ends.append("rolled back")
            with transaction.atomic():
                real_finish(run_id, *args, **kwargs)
                raise OperationalError("the connection was lost before the commit")
        real_finish(run_id, *args, **kwargs)
        row = DBTaskResult.objects.filter(args_kwargs__args=[run_id]).first()
        ends.append(row.status if row else "gone")

    monkeypatch.setattr(DBTaskResult, "set_successful", mark)
    monkeypatch.setattr(ending, "finish_run", finish)
    return by_worker, ends


async def _drain_with_one_slot(runs, until):
    from django_tasks_db.models import DBTaskResult

    from decks_app.runs import tasks

    for run in runs:
        await sync_to_async(tasks.execute_run.using(backend="database").enqueue)(run.id)
    worker.attach(asyncio.get_running_loop())
    pool = slots.DatabaseWorkers(1, backend="database").start()
    try:
        for _ in range(200):
            if await until():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # a second write by the worker would come right after
    finally:
        pool.stop()
        await asyncio.to_thread(pool.join, 5)
    return {t.args_kwargs["args"][0]: t async for t in DBTaskResult.objects.all()}


async def test_a_slots_task_row_is_marked_successful_in_its_runs_end(monkeypatch):
    """The task's row is written with the run's end (one commit fewer per run); a run that
    ends any other way (here refused) leaves the row to django-tasks-db's worker."""
    from django_tasks_db.models import DBTaskResult

    by_worker, ends = _spy_task_rows(monkeypatch)
    completes = (await sync_to_async(_setup)(message="m0"))[1]
    refused = (await sync_to_async(_setup)(message="m1"))[1]
    await Run.objects.filter(pk=refused.id).aupdate(params={"message": 42})

    async def both_marked():
        return await DBTaskResult.objects.filter(status="SUCCESSFUL").acount() == 2

    rows = await _drain_with_one_slot([completes, refused], both_marked)
    assert {run_id: (t.status, t.return_value) for run_id, t in rows.items()} == {
        completes.id: ("SUCCESSFUL", "completed"),
        refused.id: ("SUCCESSFUL", "failed"),
    }
    assert all(t.finished_at is not None for t in rows.values())
    # The completed run's row was marked by its end (already SUCCESSFUL when the end
    # returned, and the worker did not write it); the refused run's by the worker.
    assert "SUCCESSFUL" in ends and by_worker == ["failed"]
    assert (await Run.objects.aget(pk=completes.id)).status == "completed"


async def test_a_task_row_rolled_back_with_its_runs_end_is_written_by_the_retry(monkeypatch):
    """The run's end fails once after marking the row (the database went away before the
    commit): the mark is rolled back with it, the retry writes both, and the worker does
    not write the row a second time."""
    from django_tasks_db.models import DBTaskResult

    by_worker, ends = _spy_task_rows(monkeypatch, lose_first_end=True)
    run = (await sync_to_async(_setup)())[1]

    async def marked():
        return await DBTaskResult.objects.filter(status="SUCCESSFUL").aexists()

    rows = await _drain_with_one_slot([run], marked)
    assert (rows[run.id].status, rows[run.id].return_value) == ("SUCCESSFUL", "completed")
    assert ends == ["rolled back", "SUCCESSFUL"] and by_worker == []
    assert (await Run.objects.aget(pk=run.id)).status == "completed"


async def test_a_run_whose_task_row_is_gone_still_records_its_end(monkeypatch):
    """A task row deleted while its run runs (by hand, in the admin): the end matches no
    row, is recorded all the same, and the row is left to the worker (which then fails on
    it, outside the run's end, as it did before the row was written with the end)."""
    from django_tasks_db.models import DBTaskResult

    def delete_row(run_id):
        DBTaskResult.objects.filter(args_kwargs__args=[run_id]).delete()

    by_worker, ends = _spy_task_rows(monkeypatch, before_end=delete_row)
    run = (await sync_to_async(_setup)())[1]

    async def ended():
        return (await Run.objects.aget(pk=run.id)).status != "queued" and bool(ends)

    await _drain_with_one_slot([run], ended)
    assert ends == ["gone"] and by_worker == ["completed"]
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "completed" and run.result == {"output": "You said: hello <b>"}


async def test_a_new_workers_slots_wait_at_most_one_poll_before_their_first_claim(monkeypatch):
    """The random first wait that spreads the slots' polls is bounded by the poll interval
    (django-tasks-db's own start-up delay waited up to a second, whatever the interval)."""
    import random

    from django.utils import timezone

    from decks_app.runs import tasks

    monkeypatch.setattr(random, "random", lambda: 0.99)  # the longest first wait
    run = (await sync_to_async(_setup)())[1]
    await sync_to_async(tasks.execute_run.using(backend="database").enqueue)(run.id)
    worker.attach(asyncio.get_running_loop())
    began = timezone.now()
    pool = slots.DatabaseWorkers(2, backend="database").start()
    try:
        for _ in range(200):
            run = await Run.objects.aget(pk=run.id)
            if run.started_at is not None:
                break
            await asyncio.sleep(0.02)
    finally:
        pool.stop()
        await asyncio.to_thread(pool.join, 5)
    assert run.started_at is not None
    waited = (run.started_at - began).total_seconds()
    # One poll (0.2 s) and the claim; django-tasks-db's delay alone would be 0.99 s.
    assert waited < 0.9, waited


async def test_stopping_the_run_loop_marks_runs_in_flight_interrupted(fake_server, monkeypatch):
    for k, v in fake_server.env().items():
        monkeypatch.setenv(k, v)
    fake_server.queue(Reply(deltas=[f"w{i} " for i in range(200)], delay=0.02))
    _, run = await sync_to_async(_setup)(model="openresponses/fake")
    worker.attach(asyncio.get_running_loop())
    delivered = asyncio.create_task(asyncio.to_thread(worker.execute, run.id))
    for _ in range(200):
        if await TraceEvent.objects.filter(
            run_id=run.id, type="response.output_text.delta"
        ).aexists():
            break
        await asyncio.sleep(0.05)
    await worker.stop_runs(8.0)
    assert await asyncio.wait_for(delivered, 10) == "interrupted"
    run = await Run.objects.aget(pk=run.id)
    assert run.status == "interrupted" and "interrupted" in run.error
    # A stopping process takes no more runs: they stay queued for the next one.
    _, queued = await sync_to_async(_setup)(message="later")
    assert await asyncio.to_thread(worker.execute, queued.id) == "skipped"
    assert (await Run.objects.aget(pk=queued.id)).status == "queued"
    worker.attach(asyncio.get_running_loop())


def test_restart_marks_in_flight_runs_interrupted():
    session, run = _setup()
    Run.objects.filter(pk=run.id).update(status="running")
    assert queue.mark_interrupted(stale_only=True) == []  # fresh heartbeat (None is not stale)
    assert queue.mark_interrupted(stale_only=False) == [run.id]
    run.refresh_from_db()
    assert run.status == "interrupted"


def test_a_claimed_run_is_not_claimed_twice():
    _, run = _setup()
    assert queue.claim_next_run("a") == run.id
    assert queue.claim_next_run("b") is None


async def test_an_assistant_first_deck_speaks_first(tmp_path, settings):
    deck = tmp_path / "greeter"
    deck.mkdir()
    (deck / "PROMPT.md").write_text(
        '+++\nlabel = "Greeter"\nstartMode = "assistant"\n+++\n\nGreet the user.\n'
    )
    settings.GAMBIT_WORKSPACE = str(tmp_path)

    def setup():
        session = create_session(current_workspace(), "greeter/PROMPT.md", model="offline/echo")
        return session, session.runs.get()

    session, run = await sync_to_async(setup)()
    assert run.params == {"message": None}
    await sync_to_async(queue.claim_next_run)("w1")
    assert await asyncio.wait_for(executor.execute_run(run.id), 20) == "completed"
    session = await type(session).objects.aget(pk=session.id)
    roles = [m["role"] for m in session.messages if m.get("content")]
    assert roles[-1] == "assistant" and "user" not in roles


async def test_gambit_strict_makes_a_deprecated_deck_fail_its_run(
    tmp_path, settings, monkeypatch, caplog
):
    deck = tmp_path / "legacy"
    deck.mkdir()
    (deck / "PROMPT.md").write_text(
        '+++\ninputSchema = "gambit://schemas/scenarios/plain_chat_input_optional.zod.ts"\n'
        'startMode = "user"\n+++\n\nHelp.\n'
    )
    settings.GAMBIT_WORKSPACE = str(tmp_path)

    def setup():
        session = create_session(current_workspace(), "legacy/PROMPT.md", model="offline/echo")
        return send_message(session, "hi")

    async def finish(run) -> tuple[str, list]:
        await sync_to_async(queue.claim_next_run)("w1")
        status = await asyncio.wait_for(executor.execute_run(run.id), 20)
        events = [
            e async for e in TraceEvent.objects.filter(run_id=run.id).values_list("type", "payload")
        ]
        return status, events

    caplog.set_level("WARNING", logger="decks_app.decks")
    status, events = await finish(await sync_to_async(setup)())  # a warning in the trace
    assert status == "completed"
    assert any(t == "log" and 'deprecated "inputSchema"' in p["message"] for t, p in events)
    assert (await finish(await sync_to_async(setup)()))[0] == "completed"
    # and on the server's stderr (the decks_app logger's console handler), once per process
    logged = [r.getMessage() for r in caplog.records if r.name == "decks_app.decks"]
    assert len(logged) == 1, logged
    assert logged[0].startswith("warning: ") and "legacy/PROMPT.md: inputSchema:" in logged[0]
    queued = await sync_to_async(setup)()
    monkeypatch.setenv("GAMBIT_STRICT", "1")  # the 1.0 rule: the same deck is refused
    status, _ = await finish(queued)
    assert status == "failed"
    failed = await Run.objects.aget(pk=queued.id)
    assert 'legacy/PROMPT.md: inputSchema: deprecated "inputSchema"' in failed.error


async def test_a_new_slot_takes_a_queued_run_before_it_ever_waits(monkeypatch):
    """A worker started with runs queued puts every slot to work at once: a slot's first act
    is a claim, not a wait (an idle slot waits only after a poll that found nothing)."""
    import time

    acts: list[str] = []
    real_sleep, real_claim = time.sleep, queue.claim_run

    def sleep(seconds):
        if threading.current_thread().name.startswith("db-worker-"):
            acts.append("wait")
        real_sleep(seconds)

    def claim(run_id, worker_id):
        acts.append("claim")
        return real_claim(run_id, worker_id)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(queue, "claim_run", claim)
    run = (await sync_to_async(_setup)())[1]

    async def completed():
        return (await Run.objects.aget(pk=run.id)).status == "completed"

    await _drain_with_one_slot([run], completed)
    assert await completed()
    assert acts[0] == "claim", acts[:5]
