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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection, transaction
from django.db.models import Max
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent
from decks_app.services import assistant, grading, providers, verify
from decks_app.services import events as event_log
from decks_app.services.sessions import with_message_refs
from decks_app.services.workspaces import find_deck, jailed_path
from gambit.core import run_deck, run_scenario, state_from_dict, state_to_dict
from gambit.core._runtime import _MISSING
from gambit.providers.offline import ReplayProvider

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 60.0
REPLAY_CHUNK_DELAY = 0.01
INTERRUPTED = "interrupted: the server or worker stopped while this run was in flight"


def db(fn, *args, **kwargs):
    return sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)


# ---------------------------------------------------------------- queue


def claim_next_run(worker_id: str) -> str | None:
    """Claim the oldest queued run (SKIP LOCKED where the database has it)."""
    with transaction.atomic():
        qs = Run.objects.filter(status="queued").order_by("created_at")
        if connection.features.has_select_for_update_skip_locked:
            qs = qs.select_for_update(skip_locked=True)
        run = qs.first()
        if run is None:
            return None
        now = timezone.now()
        updated = Run.objects.filter(pk=run.pk, status="queued").update(
            status="running", worker_id=worker_id[:100], started_at=now, heartbeat_at=now
        )
        return run.pk if updated else None


def mark_interrupted(*, stale_only: bool) -> list[str]:
    """Runs left `running` by a stopped process become `interrupted` (with a reason).

    `stale_only`: only those whose worker has not sent a heartbeat for a while (safe while
    other workers are alive, in the distributed profile); otherwise every running run (the
    embedded profile's startup, where no other process runs them).
    """
    qs = Run.objects.filter(status="running")
    if stale_only:
        qs = qs.filter(heartbeat_at__lt=timezone.now() - dt.timedelta(seconds=STALE_AFTER_SECONDS))
    ids = list(qs.values_list("id", flat=True))
    if ids:
        Run.objects.filter(id__in=ids, status="running").update(
            status="interrupted", error=INTERRUPTED, finished_at=timezone.now()
        )
    return ids


# ---------------------------------------------------------------- writer


class EventWriter:
    """Buffers trace events and writes them in batches: append first, notify second.

    While a write is in flight new events accumulate, so under load text deltas are
    coalesced into fewer, larger events (and fewer notifications).
    """

    def __init__(self, run_id: str, session_id: str, next_seq: int):
        self.run_id = run_id
        self.session_id = session_id
        self.next_seq = next_seq
        self.pending: list[dict[str, Any]] = []
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.wake = asyncio.Event()
        self.closed = False
        self.task = asyncio.create_task(self._pump())
        self.written = 0

    def add(self, event: dict[str, Any]) -> None:
        if threading.get_ident() == self.thread:
            self._add(event)
        else:
            self.loop.call_soon_threadsafe(self._add, event)

    def _add(self, event: dict[str, Any]) -> None:
        self.pending.append(event)
        self.wake.set()

    async def _pump(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await self.flush()
            if self.closed and not self.pending:
                return

    async def flush(self) -> None:
        if not self.pending:
            return
        batch = event_log.coalesce(self.pending)
        self.pending = []
        first = self.next_seq
        self.next_seq += len(batch)
        await db(event_log.append_events, self.run_id, self.session_id, first, batch)
        self.written += len(batch)
        await event_log.notify(self.session_id)

    async def close(self) -> None:
        self.closed = True
        self.wake.set()
        await self.task


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
    deck = find_deck(session.workspace, session.deck_path)
    deck_file = jailed_path(session.workspace, session.deck_path)
    next_seq = (TraceEvent.objects.filter(run=run).aggregate(m=Max("seq"))["m"] or 0) + 1
    job = _Job(
        run=run,
        session=session,
        deck_file=deck_file,
        deck_kind=deck.kind if deck else "llm",
        deck_models=deck.models if deck else [],
        state=session_state_dict(session),
        next_seq=next_seq,
    )
    if run.kind == "grader" and session.source_id:
        job.graded_state = session_state_dict(session.source)
    if run.kind == "assistant":
        from decks_app.services.assistant import ASSISTANT_DECK

        job.deck_file = ASSISTANT_DECK  # the bundled assistant works on session.deck_path
        job.deck_kind = "llm"
        job.deck_models = ["openrouter/openai/gpt-4o-mini"]
    if run.kind == "replay" and session.source_id:
        source_runs = list(session.source.runs.order_by("created_at"))
        job.turns = [r.message for r in source_runs if r.kind in ("manual", "replay")]
        job.source_events = list(
            TraceEvent.objects.filter(session_id=session.source_id)
            .order_by("id")
            .values_list("payload", flat=True)
        )
    return job


# ---------------------------------------------------------------- execution


def _parse_compute_input(text: str | None, default: Any) -> Any:
    if text is None:
        return default
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


async def execute_run(run_id: str, *, router: Any = None) -> str:
    """Run one claimed run to its end; return its final status."""
    job = await db(_load, run_id)
    run, session = job.run, job.session
    writer = EventWriter(run.id, session.id, job.next_seq)
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

    latest: dict[str, Any] = {"state": None, "usage": None, "output": None}
    transcript: list[dict[str, Any]] = []

    def on_trace(event: dict[str, Any]) -> None:
        if event.get("type") == "run.end":
            latest["usage"] = event.get("usage")
        writer.add(event)

    def on_state(state: Any) -> None:
        if job.deck_kind != "compute":  # a compute deck's transcript is kept by us
            latest["state"] = state

    async def one_turn(message: str | None, state: Any, **extra: Any) -> Any:
        kwargs: dict[str, Any] = {
            **extra,
            "provider": provider,
            "on_trace": on_trace,
            "on_state": on_state,
            "stream": True,
            "run_id": run.id,
        }
        if resolver is not None:
            kwargs["model_resolver"] = resolver
        if override:
            kwargs["model_override"] = override
        if job.deck_kind == "compute":
            kwargs["context"] = _parse_compute_input(message, session.context)
            result = await run_deck(job.deck_file, **kwargs)
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
        return await run_deck(job.deck_file, **kwargs)

    async def body() -> Any:
        if run.kind == "assistant":
            grant = (run.output or {}).get("grant", "read")
            perms = assistant.permissions(session.workspace, session.deck_path, grant)
            folder = assistant.deck_folder(session.workspace, session.deck_path)
            result = await one_turn(
                run.message, job.state, session_permissions=perms, tools_base_dir=folder
            )
            after = await asyncio.to_thread(assistant.snapshot, folder)
            return _ScenarioOutcome({**(run.output or {}), "after": after}, result.state)
        if run.kind == "scenario":
            root = Path(session.workspace.root)
            settings = run.output if isinstance(run.output, dict) else {}
            outcome = await run_scenario(
                job.deck_file,
                root / (run.message or ""),
                provider=provider,
                context=session.context if session.context is not None else _MISSING,
                max_turns=int(settings.get("maxTurns") or 6),
                on_state=on_state,
                on_trace=on_trace,
                stream=True,
                run_id=run.id,
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
            if await db(_cancel_requested, run.id):
                canceled_by_user = True
                task.cancel()
                break
            if time.monotonic() - last_beat > HEARTBEAT_SECONDS:
                last_beat = time.monotonic()
                await db(_heartbeat, run.id)
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
        await writer.close()
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
    await db(_finish, run.id, status, error, output, latest, transcript, started)
    await event_log.notify(session.id)
    return status


@dataclass
class _ScenarioOutcome:
    output: dict[str, Any]
    state: Any


def _cancel_requested(run_id: str) -> bool:
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


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
        usage = latest.get("usage") or {}
        run.status = status
        run.error = error or ""
        run.output = _jsonable(output)
        run.finished_at = timezone.now()
        run.duration_ms = int((time.monotonic() - started) * 1000)
        run.usage = usage or None
        run.total_tokens = int(usage.get("totalTokens") or 0)
        cost = usage.get("costUsd", usage.get("cost"))
        run.cost = float(cost) if isinstance(cost, int | float) else None
        run.save()
        changed = False
        if run.kind == "grader":
            grading.record_grading(run, session)
        state = latest.get("state")
        if state is not None:
            data = state_to_dict(state)
            session.format = data.get("format") or session.format
            session.state_run_id = data.get("runId") or session.state_run_id
            session.messages = data.get("messages")
            session.items = data.get("items")
            if data.get("meta"):
                session.meta = {**(session.meta or {}), **data["meta"]}
            changed = True
        elif transcript:
            session.messages = (session.messages or []) + transcript
            session.format = "chat" if not session.items else session.format
            changed = True
        if changed:
            session.message_refs = with_message_refs(session.messages or [], session.message_refs)
            session.state_version += 1
        session.save()
    close_old_connections()
