"""Executing a run: claim it from the queue, run the deck through `gambit.core.run_deck`,
append its trace events (coalesced) and notify the session's sockets, then save the
session's SavedState, usage and cost.

Everything that touches the database goes through `db(...)` (Django's sync ORM on the
thread-sensitive executor), so the coroutines here are safe in Daphne's loop (embedded
profile) and in a `gambit worker` process (distributed profile) alike.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import (
    DatabaseError,
    IntegrityError,
    close_old_connections,
    transaction,
)
from django.db.models import Max
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent
from decks_app.services import assistant, deck_trees, grading, outage, providers, recorded, verify
from decks_app.services import events as event_log
from decks_app.services.sessions import with_message_refs
from decks_app.services.workspaces import jailed_path, project_root
from gambit.core import (
    DeckLoadError,
    ModelCallEvent,
    ModelResultEvent,
    ResponseTraceEvent,
    item_to_dict,
    json_dict,
    message_item,
    run_deck,
    run_scenario,
    state_from_dict,
    state_to_dict,
    trace_event_view,
)
from gambit.core._compute import input_from_text
from gambit.core._runtime import _MISSING
from gambit.providers.offline import ReplayProvider

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.25
# A running run whose heartbeat is older than this is taken for dead (its worker stopped).
STALE_AFTER_SECONDS = float(os.environ.get("GAMBIT_STALE_AFTER_SECONDS", "60"))
# A live run proves it is alive well within that time.
HEARTBEAT_SECONDS = min(5.0, STALE_AFTER_SECONDS / 4)
REPLAY_CHUNK_DELAY = 0.01
INTERRUPTED = "interrupted: the server or worker stopped while this run was in flight"
# Runs whose conversation is saved after every pass (the others save theirs at the end).
CHECKPOINTED = ("manual", "scenario", "assistant", "replay")


def db(fn, *args, **kwargs):
    return sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)


# How long a finishing run waits for a database that went away (a restart) before giving up.
DATABASE_PATIENCE = 60.0


def _close_connections() -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:
            pass


async def _reset_connection() -> None:
    """Drop the database thread's broken connection, so the next query opens a new one."""
    try:
        await db(_close_connections)
    except Exception:
        pass


async def db_patiently(fn, *args, patience: float = DATABASE_PATIENCE, **kwargs):
    """`db(fn, ...)`, retried with backoff through a database outage of up to `patience` s."""
    deadline = time.monotonic() + patience
    delay = 0.25
    while True:
        try:
            result = await db(fn, *args, **kwargs)
        except DatabaseError as exc:
            outage.failed("the database", exc)
            if time.monotonic() + delay > deadline:
                raise
            await _reset_connection()
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)
            continue
        outage.recovered("the database")
        return result


# ---------------------------------------------------------------- queue


def claim_run(run_id: str, worker_id: str) -> bool:
    """Queued -> running for this worker; False when the run is no longer queued (cancelled,
    or claimed already: a run executes once however often its task is delivered)."""
    now = timezone.now()
    updated = Run.objects.filter(pk=run_id, status="queued").update(
        status="running", worker_id=worker_id[:100], started_at=now, heartbeat_at=now
    )
    return bool(updated)


def claim_next_run(worker_id: str) -> str | None:
    """Claim the oldest queued run, whatever its task (tests and tools drive runs with it)."""
    for run_id in (
        Run.objects.filter(status="queued").order_by("created_at").values_list("pk", flat=True)[:20]
    ):
        if claim_run(run_id, worker_id):
            return run_id
    return None


def mark_run_interrupted(run_id: str) -> bool:
    """One running run whose process can no longer finish it becomes interrupted."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status="running").first()
        if run is None:
            return False
        session = Session.objects.select_for_update().get(pk=run.session_id)
        run.status, run.error, run.finished_at = "interrupted", INTERRUPTED, timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        recover_interrupted_turn(run, session)
        session.save()
    return True


def mark_interrupted(*, stale_only: bool) -> list[str]:
    """Runs left `running` by a stopped process become `interrupted` (with a reason), and
    their turn is recovered into the conversation (`recover_interrupted_turn`).

    `stale_only`: only those whose worker has not sent a heartbeat for a while (safe while
    other workers are alive, in the distributed profile); otherwise every running run (the
    embedded profile's startup, where no other process runs them).
    """
    qs = Run.objects.filter(status="running")
    if stale_only:
        # An /v1/responses run lives in the web process that answers it and sends no
        # heartbeat: only a server start-up (no live process) may end it.
        qs = qs.exclude(kind="api").filter(
            heartbeat_at__lt=timezone.now() - dt.timedelta(seconds=STALE_AFTER_SECONDS)
        )
    done = []
    for run_id in list(qs.values_list("id", flat=True)):
        if mark_run_interrupted(run_id):
            done.append(run_id)
    return done


def recover_interrupted_turn(run: Run, session: Session) -> None:
    """Put what an interrupted run had into its conversation (the caller saves the session).

    The user's message is kept when no checkpoint of this run holds it yet, and the reply
    that was streaming when the run stopped (its text deltas are in the trace) is kept as an
    assistant message whose ref says `"status": "interrupted"`, so the page can mark it and
    offer Retry. A `run.end` event with status `interrupted` closes the run's trace.
    """
    base = run.turn_base or {}
    events = list(TraceEvent.objects.filter(run=run).order_by("seq").values_list("seq", "payload"))
    last_seq = events[-1][0] if events else 0
    saved_nothing = (
        len(session.messages or []) == base.get("savedMessages", -1) == base.get("messages")
    )
    added: list[tuple[Literal["user", "assistant"], str]] = []
    if saved_nothing and run.message and run.kind in ("manual", "assistant"):
        added.append(("user", run.message))
    # The pass that was streaming never reached the saved state (a state only takes a reply
    # once its model call returns), whatever was checkpointed after it. A scenario's persona
    # also streams as a root deck, so only chat-like runs get their partial reply back.
    partial = (
        _partial_reply([p for _, p in events])
        if run.kind in ("manual", "assistant", "replay")
        else ""
    )
    if partial:
        added.append(("assistant", partial))
    if added:
        chat_only = session.format == "chat" and not session.items
        messages = list(session.messages or [])
        items = list(session.items or [])
        for role, text in added:
            messages.append({"role": role, "content": text})
            if not chat_only:
                items.append(item_to_dict(message_item(role, text)))
        session.messages = messages
        session.items = None if chat_only else items
        session.format = session.format or ("chat" if chat_only else "responses")
        refs = with_message_refs(messages, session.message_refs)
        if partial:
            refs[-1] = {**refs[-1], "status": "interrupted", "runId": run.id}
        session.message_refs = refs
        session.state_version += 1
    if not any(p.get("type") == "run.end" for _, p in events[-3:]):
        end = {
            "type": "run.end",
            "runId": session.state_run_id or run.id,
            "status": "interrupted",
            "error": run.error or INTERRUPTED,
            "ts": int(time.time() * 1000),
        }
        event_log.append_events(run.id, session.id, last_seq + 1, [end])


def _partial_reply(payloads: list[dict[str, Any]]) -> str:
    """The root deck's text streamed after its last model call, if that call never ended."""
    text: list[str] = []
    for p in payloads:
        match trace_event_view(p):
            case ModelCallEvent() | ModelResultEvent() as call if not call.parent_action_call_id:
                text = []  # a new call starts, or a finished one is in the saved state
            case ResponseTraceEvent(type=event_log.TEXT_DELTA) as delta:
                piece = (delta.model_extra or {}).get("delta")
                root = not json_dict(delta.gambit).get("parent_action_call_id")
                if root and isinstance(piece, str):
                    text.append(piece)
    return "".join(text).strip()


# ---------------------------------------------------------------- writer


class EventWriter:
    """Buffers trace events and writes them in batches: append first, notify second.

    While a write is in flight new events accumulate, so under load text deltas are
    coalesced into fewer, larger events (and fewer notifications). The run's latest
    conversation state rides along: each batch is written in one transaction with the
    newest state published before it (a checkpoint), so after a crash the database holds
    the conversation up to the last finished pass plus every event after it.
    """

    def __init__(self, run_id: str, session_id: str, next_seq: int):
        self.run_id = run_id
        self.session_id = session_id
        self.next_seq = next_seq
        self.pending: list[dict[str, Any]] = []
        self.state: Any = None  # a published state not yet saved
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.wake = asyncio.Event()
        self.closed = False
        self.task = asyncio.create_task(self._pump())
        self.written = 0
        self.failures = 0

    def add(self, event: dict[str, Any]) -> None:
        if threading.get_ident() == self.thread:
            self._add(event)
        else:
            self.loop.call_soon_threadsafe(self._add, event)

    def _add(self, event: dict[str, Any]) -> None:
        self.pending.append(event)
        self.wake.set()

    def checkpoint(self, state: Any) -> None:
        if threading.get_ident() == self.thread:
            self._checkpoint(state)
        else:
            self.loop.call_soon_threadsafe(self._checkpoint, state)

    def _checkpoint(self, state: Any) -> None:
        self.state = state
        self.wake.set()

    async def _pump(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await self.flush()
            if self.closed and not self.pending:
                return

    async def flush(self) -> None:
        if not self.pending and self.state is None:
            return
        taken, self.pending = self.pending, []
        state, self.state = self.state, None
        batch = event_log.coalesce(taken)
        try:
            first = await db(
                _append_and_checkpoint, self.run_id, self.session_id, self.next_seq, batch, state
            )
        except DatabaseError as exc:
            # The database is restarting: keep everything and try again (nothing is dropped;
            # deltas that arrive meanwhile are coalesced into the same batch).
            outage.failed("the database", exc)
            self.pending = taken + self.pending
            if self.state is None:
                self.state = state
            await _reset_connection()
            self.failures += 1
            await asyncio.sleep(min(5.0, 0.25 * 2 ** min(self.failures, 5)))
            self.wake.set()
            return
        outage.recovered("the database")
        self.failures = 0
        self.next_seq = first + len(batch)
        self.written += len(batch)
        await event_log.notify(self.session_id)

    async def close(self, wait: float = DATABASE_PATIENCE) -> None:
        """Write what is left; while the database is down, wait for it up to `wait` s."""
        self.closed = True
        self.wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout=wait)
        except TimeoutError:
            self.task.cancel()
            log.error(
                "run %s: %d trace event(s) could not be written: the database stayed away",
                self.run_id,
                len(self.pending),
            )


def _append_and_checkpoint(
    run_id: str, session_id: str, first: int, batch: list[dict[str, Any]], state: Any
) -> int:
    """Append a batch (and save a checkpoint) in one transaction; return the first seq used.

    Another process may have appended to this run's trace meanwhile (a `run.end` when it
    marked the run interrupted): the batch then moves after what is there.
    """
    try:
        with transaction.atomic():
            _append_batch(run_id, session_id, first, batch, state)
        return first
    except IntegrityError:
        first = (TraceEvent.objects.filter(run_id=run_id).aggregate(m=Max("seq"))["m"] or 0) + 1
        with transaction.atomic():
            _append_batch(run_id, session_id, first, batch, state)
        return first


def _append_batch(
    run_id: str, session_id: str, first: int, batch: list[dict[str, Any]], state: Any
) -> None:
    event_log.append_events(run_id, session_id, first, batch)
    if state is None:
        return
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != "running":
        return  # no longer this run's conversation to write (stopped or interrupted)
    session = Session.objects.select_for_update().get(pk=session_id)
    if save_turn_state(run, session, state, last_seq=first + len(batch) - 1):
        session.save()
        run.save(update_fields=["turn_base"])


def turn_base(session: Session, last_seq: int) -> dict[str, Any]:
    """Where a run's turn starts in the session's conversation (see `Run.turn_base`)."""
    messages = len(session.messages or [])
    items = len(session.items or [])
    return {
        "stateVersion": session.state_version,
        "messages": messages,
        "items": items,
        "refs": len(session.message_refs or []),
        "savedMessages": messages,
        "savedItems": items,
        "checkpointSeq": last_seq,
    }


def save_turn_state(run: Run, session: Session, state: Any, *, last_seq: int | None) -> bool:
    """Write a run's state into its session (the caller saves both rows, holding their locks).

    A save never overwrites a newer conversation: it is written only over the one this run
    saved last (same message and item counts); a change of meta alone, such as a grade,
    does not block it. Returns False, changing nothing, when the conversation moved on.
    """
    base = dict(run.turn_base or turn_base(session, 0))
    if len(session.messages or []) != base.get("savedMessages") or len(
        session.items or []
    ) != base.get("savedItems"):
        log.warning("run %s: the session's conversation changed meanwhile; not saved", run.id)
        return False
    data = state_to_dict(state)
    session.format = data.get("format") or session.format
    session.state_run_id = data.get("runId") or session.state_run_id
    session.messages = data.get("messages")
    session.items = data.get("items")
    if data.get("meta"):
        session.meta = {**(session.meta or {}), **data["meta"]}
    session.message_refs = with_message_refs(session.messages or [], session.message_refs)
    session.state_version += 1
    base["savedMessages"] = len(session.messages or [])
    base["savedItems"] = len(session.items or [])
    if last_seq is not None:
        base["checkpointSeq"] = last_seq
    run.turn_base = base
    return True


# ---------------------------------------------------------------- loading


@dataclass
class _Job:
    run: Run
    session: Session
    deck_file: Path
    deck_kind: str
    deck_models: list[str]
    state: dict[str, Any] | None
    next_seq: int
    turns: list[str | None] = field(default_factory=list)  # replay: the source's messages
    graded_state: dict[str, Any] | None = None  # grader: the graded session's state
    source_events: list[dict[str, Any]] = field(default_factory=list)


def session_state_dict(session: Session) -> dict[str, Any] | None:
    if not session.messages and not session.items:
        return None
    state: dict[str, Any] = dict(session.extra or {})
    state.update(
        {
            "format": session.format or None,
            "runId": session.state_run_id or session.id,
            "messages": session.messages,
            "items": session.items,
            "messageRefs": session.message_refs,
            "meta": session.meta,
            "notes": session.notes,
            "conversationScore": session.conversation_score,
        }
    )
    return {k: v for k, v in state.items() if v is not None}


def _load(run_id: str) -> _Job:
    run = Run.objects.select_related("session__workspace", "session__source").get(pk=run_id)
    session = run.session
    deck_file = jailed_path(session.workspace, session.deck_path)
    next_seq = (TraceEvent.objects.filter(run=run).aggregate(m=Max("seq"))["m"] or 0) + 1
    if run.turn_base is None:
        run.turn_base = turn_base(session, next_seq - 1)
        run.save(update_fields=["turn_base"])
    job = _Job(
        run=run,
        session=session,
        deck_file=deck_file,
        deck_kind="llm",
        deck_models=[],
        state=session_state_dict(session),
        next_seq=next_seq,
    )
    if run.kind == "grader" and session.source is not None:
        job.graded_state = session_state_dict(session.source)
    if run.kind == "assistant":
        from decks_app.services.assistant import ASSISTANT_DECK

        job.deck_file = ASSISTANT_DECK  # the bundled assistant works on session.deck_path
    if run.kind == "replay" and session.source_id:
        job.source_events = list(
            TraceEvent.objects.filter(session_id=session.source_id)
            .order_by("id")
            .values_list("payload", flat=True)
        )
        # The turns are the ones the recording ran (its root deck's run.start events), so
        # imported sessions, scenario runs and replays of replays replay as recorded.
        is_root = recorded.root_matcher(
            job.source_events, abs_path=str(deck_file), rel_path=session.deck_path
        )
        job.turns = [
            recorded.turn_message(start)
            for start in recorded.root_turns(job.source_events, is_root)
        ]
    return job


# ---------------------------------------------------------------- execution


def _parse_compute_input(text: str | None, default: Any) -> Any:
    return default if text is None else input_from_text(text)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


async def execute_run(run_id: str, *, router: Any = None) -> str:
    """Run one claimed run to its end; return its final status."""
    job = await db(_load, run_id)
    run, session = job.run, job.session
    writer = EventWriter(run.id, session.id, job.next_seq)
    # The deck as this process has it loaded (once per process, until a file changes). A
    # deck that does not load is given to the runtime by path, which fails the run with
    # the loader's error and trace, as it always has.
    tree = None
    deck: Any = job.deck_file
    # Every file a run reads lies in the served workspace; the bundled assistant deck in its
    # own folder.
    jail = (
        project_root(Path(job.deck_file).parent)
        if run.kind == "assistant"
        else project_root(session.workspace)
    )
    try:
        tree = await asyncio.to_thread(deck_trees.load, job.deck_file, root=jail)
        deck = tree
        job.deck_kind = tree.root.kind
        params = tree.root.model_params
        job.deck_models = list(params.models or []) if params else []
    except DeckLoadError:
        pass
    own_router = None
    if job.run.kind == "replay":
        provider = ReplayProvider.from_trace(job.source_events, chunk_delay=REPLAY_CHUNK_DELAY)
        resolver = None
        override = None
    else:
        if router is None:
            router = own_router = providers.make_router(session.workspace.root)
        provider = resolver = router
        override, _, _ = providers.effective_model(session.model, job.deck_models, router)

    latest: dict[str, Any] = {
        "state": None,
        "usage": None,
        "output": None,
        # the root deck's path and its top-level run.start / model.result events: which
        # model answered is read from them when the run ends
        "root": tree.root.path if tree is not None else str(job.deck_file),
        "answers": [],
    }
    transcript: list[dict[str, Any]] = []

    def on_trace(event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "run.end":
            # one per run_deck call: a replay's turns, a scenario's persona and root turns
            # and a grader's per-turn calls each end one, and the run used all of them
            latest["usage"] = recorded.add_usage(latest["usage"], event.get("usage"))
        elif kind in ("run.start", "model.result") and not event.get("parentActionCallId"):
            latest["answers"].append(
                {
                    k: event.get(k)
                    for k in ("type", "deckPath", "model", "provider", "offline", "runId")
                }
            )
        elif kind == "log":
            deck_trees.report_warning(event)
        writer.add(event)

    def on_state(state: Any) -> None:
        if job.deck_kind != "compute":  # a compute deck's transcript is kept by us
            latest["state"] = state
            if run.kind in CHECKPOINTED:
                writer.checkpoint(state)

    async def one_turn(message: str | None, state: Any, **extra: Any) -> Any:
        kwargs: dict[str, Any] = {
            **extra,
            "provider": provider,
            "on_trace": on_trace,
            "on_state": on_state,
            "stream": True,
            "run_id": run.id,
            "strict": deck_trees.strict_mode(),  # a deck given by path is loaded as strictly
            "project_root": jail,
        }
        if resolver is not None:
            kwargs["model_resolver"] = resolver
        if override:
            kwargs["model_override"] = override
        if job.deck_kind == "compute":
            kwargs["context"] = _parse_compute_input(message, session.context)
            result = await run_deck(deck, **kwargs)
            if message is not None:
                transcript.append({"role": "user", "content": message})
            transcript.append({"role": "assistant", "content": _as_text(result.output)})
            return result
        if state is not None:
            kwargs["state"] = state_from_dict(state) if isinstance(state, dict) else state
        elif session.context is not None:
            kwargs["context"] = session.context
        if message is not None:
            kwargs["message"] = message
        return await run_deck(deck, **kwargs)

    async def body() -> Any:
        if run.kind == "assistant":
            grant = (run.output or {}).get("grant", "read")
            perms = assistant.permissions(session.workspace, session.deck_path, grant)
            folder = assistant.deck_folder(session.workspace, session.deck_path)
            result = await one_turn(
                run.message,
                job.state,
                session_permissions=perms,
                tools_base_dir=folder,
                on_tool=assistant.edit_tool(session.workspace, session.deck_path, grant),
            )
            after = await asyncio.to_thread(assistant.snapshot, folder)
            return _ScenarioOutcome({**(run.output or {}), "after": after}, result.state)
        if run.kind == "scenario":
            root = Path(session.workspace.root)
            settings = run.output if isinstance(run.output, dict) else {}
            persona: Any = root / (run.message or "")
            try:
                persona = await asyncio.to_thread(deck_trees.load, persona, "scenario", root=jail)
            except DeckLoadError:
                pass  # the runtime reports it
            outcome = await run_scenario(
                deck,
                persona,
                provider=provider,
                context=session.context if session.context is not None else _MISSING,
                scenario_input=settings.get("scenarioInput", _MISSING),
                max_turns=int(settings.get("maxTurns") or 6),
                on_state=on_state,
                on_trace=on_trace,
                stream=True,
                run_id=run.id,
                strict=deck_trees.strict_mode(),
                project_root=jail,
                model_resolver=resolver,
                **({"model_override": override} if override else {}),
            )
            return _ScenarioOutcome(
                {**settings, "turns": outcome.turns, "stopped": outcome.stopped}, outcome.state
            )
        if run.kind == "verify":
            return await verify.execute_verify(
                run=run,
                session=session,
                run_options={
                    "provider": provider,
                    "model_resolver": resolver,
                    "stream": False,
                    **({"model_override": override} if override else {}),
                },
                db=db,
            )
        if run.kind == "grader":
            return await grading.grade_session(
                workspace_root=session.workspace.root,
                grader_path=run.message or "",
                state=job.graded_state,
                run_options={
                    "provider": provider,
                    "model_resolver": resolver,
                    "on_trace": on_trace,
                    "stream": False,
                    "run_id": run.id,
                    **({"model_override": override} if override else {}),
                },
            )
        if run.kind == "replay":
            state = None
            result = None
            for message in job.turns or [None]:
                result = await one_turn(message, state)
                state = result.state
            return result
        return await one_turn(run.message, job.state)

    started = time.monotonic()
    task = asyncio.create_task(body())
    status, error, output = "completed", "", None
    canceled_by_user = False
    try:
        last_beat = time.monotonic()
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_SECONDS)
            if done:
                break
            try:
                if await db(_cancel_requested, run.id):
                    canceled_by_user = True
                    task.cancel()
                    break
                if time.monotonic() - last_beat > HEARTBEAT_SECONDS:
                    last_beat = time.monotonic()
                    await db(_heartbeat, run.id)
            except DatabaseError as exc:
                outage.failed("the database", exc)  # the run goes on; checked again soon
                await _reset_connection()
        try:
            result = await task
            output = result.output if result is not None else None
            if result is not None and result.state is not None and job.deck_kind != "compute":
                latest["state"] = result.state
        except asyncio.CancelledError:
            if not canceled_by_user:
                raise
            status, error = "canceled", "Run canceled"
        except Exception as exc:
            status, error = "failed", str(exc) or type(exc).__name__
            output = getattr(exc, "output", None)  # a failed grade keeps the turns it graded
            log.info("run %s failed: %s", run.id, error)
    except asyncio.CancelledError:
        # The worker is shutting down: stop the deck and record the run as interrupted.
        task.cancel()
        try:
            await task
        except BaseException:
            pass
        await writer.close(wait=5.0)  # a stopping process has seconds, not minutes
        await db(_finish, run.id, "interrupted", INTERRUPTED, None, latest, transcript, started)
        await event_log.notify(session.id)
        raise
    finally:
        if own_router is not None:
            try:
                await own_router.aclose()
            except Exception:
                pass
    await writer.close()
    await db_patiently(_finish, run.id, status, error, output, latest, transcript, started)
    await event_log.notify(session.id)
    return status


@dataclass
class _ScenarioOutcome:
    output: dict[str, Any]
    state: Any


def _cancel_requested(run_id: str) -> bool:
    """Stop asked for, or the run is no longer `running` (another process ended it)."""
    row = Run.objects.filter(pk=run_id).values("cancel_requested", "status").first()
    return row is None or row["cancel_requested"] or row["status"] != "running"


def _heartbeat(run_id: str) -> None:
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now())


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def _finish(
    run_id: str,
    status: str,
    error: str,
    output: Any,
    latest: dict[str, Any],
    transcript: list[dict[str, Any]],
    started: float,
) -> None:
    """Save the run's outcome and the session's new SavedState in one transaction."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        session = Session.objects.select_for_update().get(pk=run.session_id)
        # A run that was marked interrupted by another process (its heartbeat looked stale)
        # keeps that record; what it did is in its trace.
        owned = run.status == "running"
        if not owned:
            log.warning("run %s ended %s but was already %s", run_id, status, run.status)
            status, error = run.status, run.error
        usage = latest.get("usage") or {}
        run.status = status
        run.error = error or ""
        run.output = _jsonable(output)
        run.finished_at = timezone.now()
        run.duration_ms = int((time.monotonic() - started) * 1000)
        run.total_tokens, run.cost = recorded.usage_totals(usage)
        if run.kind == "replay":
            # The replay provider reports the recorded tokens (comparable with the
            # original), but nothing was billed.
            usage = {k: v for k, v in usage.items() if k not in recorded.COST_KEYS}
            run.cost = 0.0
        run.usage = usage or None
        answers = latest.get("answers") or []
        answered = recorded.answered_model(
            answers, recorded.root_matcher(answers, abs_path=latest.get("root"))
        )
        if answered is not None:  # the model that answered, not the one planned
            run.model, run.offline = answered
        run.save()
        if run.kind == "grader":
            grading.record_grading(run, session)
        state = latest.get("state")
        if not owned:
            pass  # stopped or interrupted by someone else meanwhile: their record stands
        elif state is not None:
            save_turn_state(run, session, state, last_seq=None)
            run.save(update_fields=["turn_base"])
        elif transcript:
            session.messages = (session.messages or []) + transcript
            session.format = "chat" if not session.items else session.format
            session.message_refs = with_message_refs(session.messages or [], session.message_refs)
            session.state_version += 1
        if status == "interrupted" and owned:
            recover_interrupted_turn(run, session)
        session.save()
    close_old_connections()
