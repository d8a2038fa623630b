"""Executing a claimed run, whatever its kind: load its session and deck, hand the kind's
`execute` a `RunContext`, stream the trace (coalesced) and notify the session's sockets,
watch for Stop and send heartbeats, then hand how it ended (an `Ending`) to
decks_app.runs.ending, which records the outcome and the session's SavedState, usage and
cost (`end_run`).

What a run does is its kind's (decks_app.runs.registry); this module imports no feature.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from decks_app.models import Run, Session
from decks_app.runs import deck_trees, ending, outage, providers, recorded, registry, telemetry
from decks_app.runs import events as event_log
from decks_app.runs.database import db, db_patiently, reset_connection
from decks_app.runs.queue import HEARTBEAT_SECONDS, ClaimedRun, cancel_requested, heartbeat
from decks_app.runs.recovery import INTERRUPTED
from decks_app.runs.registry import JSONObject, Payload, Preparation, RunFailed, RunKind
from decks_app.runs.state import session_state_dict, turn_base
from decks_app.runs.writer import EventWriter
from decks_app.workspaces.served import jailed_path, project_root
from gambit.core import (
    CompactionSettings,
    DeckLoadError,
    ProjectRoot,
    input_from_text,
    run_deck,
    state_from_dict,
)

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.25


class RunRefused(Exception):
    """The run cannot be executed by this process (an unknown kind, invalid params)."""

    def __init__(self, error: str, session_id: str):
        super().__init__(error)
        self.session_id = session_id


@dataclass
class Job:
    run: Run
    session: Session
    kind: RunKind
    params: Payload
    deck_file: Path
    state: JSONObject | None
    next_seq: int
    prepared: Any = None
    # The deck as this process has it loaded (`load_deck`); until then, or when it does not
    # load, its path (the runtime then fails the run with the loader's error and trace).
    deck: Any = None
    deck_kind: str = "llm"
    deck_models: list[str] = field(default_factory=list)
    jail: ProjectRoot | None = None


def load_job(run_id: str, claimed: ClaimedRun | None = None) -> Job:
    """The run's job: from the run as its claim read it (`queue.claim_run`), or read now."""
    if claimed is not None:
        run, first_start = claimed.run, claimed.first_start
    else:
        run = Run.objects.select_related("session__workspace").get(pk=run_id)
        first_start = run.turn_base is None
    session = run.session
    try:
        kind = registry.get(run.kind)
        if not kind.queued:
            raise ValueError(
                f"run kind {kind.name!r} runs in the process that creates it, not in a worker"
            )
        params = registry.parse_params(run)
    except ValueError as exc:  # UnknownRunKind, InvalidPayload
        raise RunRefused(str(exc).splitlines()[0], session.id) from None
    deck_file = jailed_path(session.workspace, session.deck_path)
    if first_start:
        # Nothing of the run is written yet but its turn base: by its claim, or here.
        next_seq = 1
        if claimed is None:
            run.turn_base = turn_base(session, 0)
            run.save(update_fields=["turn_base"])
    else:
        next_seq = ending.next_seq(run)
    job = Job(
        run=run,
        session=session,
        kind=kind,
        params=params,
        deck_file=deck_file,
        state=session_state_dict(session),
        next_seq=next_seq,
    )
    if kind.prepare is not None:
        prep = Preparation(run=run, session=session, deck_file=deck_file)
        kind.prepare(prep)
        job.deck_file, job.prepared = prep.deck_file, prep.data
    job.deck = job.deck_file
    # Every file a run reads lies in the served workspace; a deck a kind brings along (the
    # Build assistant's, bundled with the app) in its own folder.
    job.jail = (
        project_root(session.workspace)
        if Path(job.deck_file).resolve().is_relative_to(Path(session.workspace.root).resolve())
        else project_root(Path(job.deck_file).parent)
    )
    return job


def load_deck(job: Job) -> Job:
    """The job's deck tree, as this process has it loaded (once per process, until a file
    changes); a deck that does not load stays a path (see `Job.deck`)."""
    try:
        tree = deck_trees.load(job.deck_file, root=job.jail)
    except DeckLoadError:
        return job
    model_params = tree.root.model_params
    job.deck, job.deck_kind = tree, tree.root.kind
    job.deck_models = list(model_params.models or []) if model_params else []
    return job


def prepare(run_id: str, claimed: ClaimedRun | None = None) -> Job:
    """`load_job` and `load_deck` in one go, in a thread that may use the database (a
    worker's slot, right after its claim: no hand-off to the run loop's database thread)."""
    return load_deck(load_job(run_id, claimed))


class RunContext[P: Payload]:
    """What a kind's `execute` gets: the run, its session and typed params, the loaded deck,
    the provider (and model resolver and override) to run it with, the trace and state
    callbacks, and `one_turn` for chat-like kinds."""

    def __init__(
        self,
        job: Job,
        writer: EventWriter,
        progress: ending.RunProgress,
        *,
        deck: Any,
        deck_kind: str,
        provider: Any,
        resolver: Any,
        override: str | None,
        jail: ProjectRoot | None = None,
    ):
        self.run = job.run
        self.session = job.session
        self.kind = job.kind
        self.params: P = job.params  # type: ignore[assignment]  # the kind's own model
        self.prepared = job.prepared
        self.state = job.state  # the session's conversation when the run started
        self.deck_file = job.deck_file
        self.deck = deck  # the loaded DeckTree, or its path when it does not load
        self.deck_kind = deck_kind
        self.provider = provider
        self.resolver = resolver
        self.override = override
        # Where every file the run reads must lie (the served workspace): give it to each
        # gambit.core run function a kind calls.
        self.project_root = jail
        self._writer = writer
        self.progress = progress
        # OpenTelemetry spans of the run, when an export is configured (None otherwise); the
        # conversation is the session's, or for a grade run the session it grades.
        session = job.session
        graded = session.source_id if session.origin == "grade" else None
        self.spans = telemetry.sink(graded or session.id)

    @property
    def workspace_root(self) -> Path:
        return Path(self.session.workspace.root)

    def on_trace(self, event: JSONObject) -> None:
        kind = event.get("type")
        if kind == "run.end":
            # one per run_deck call: a replay's turns, a scenario's persona and root turns
            # and a grader's per-turn calls each end one, and the run used all of them
            self.progress.usage = recorded.add_usage(self.progress.usage, event.get("usage"))
        elif kind == "log":
            deck_trees.report_warning(event)
        self.progress.note_answer(event)
        self._writer.add(event)
        if self.spans is not None:
            self.spans(event)

    def on_state(self, state: Any) -> None:
        if self.deck_kind != "compute":  # a compute deck's transcript is kept by us
            # The first state a run publishes is the conversation it started from plus the
            # message it was given: nothing a crash could lose (the run's params hold the
            # message, and recovery restores it), and the page shows it from the trace. Its
            # checkpoint would cost a transaction per run; later passes are checkpointed.
            starting = self.progress.state is None
            self.progress.state = state
            if self.kind.checkpoints and not starting:
                self._writer.checkpoint(state)

    def model_options(self) -> dict[str, Any]:
        """provider, model_resolver and model_override, for gambit.core's run functions."""
        options: dict[str, Any] = {"provider": self.provider}
        if self.resolver is not None:
            options["model_resolver"] = self.resolver
        if self.override:
            options["model_override"] = self.override
        # gambit.toml's [context] (context windows, compaction); a run that answers from a
        # recording (a replay) never compacts: a summary request would take a recorded answer.
        config = getattr(self.resolver, "config", None)
        options["compaction"] = (
            config.compaction() if config is not None else CompactionSettings(enabled=False)
        )
        return options

    async def one_turn(self, message: str | None, state: Any, **extra: Any) -> Any:
        """One `run_deck` of the session's deck: `message` after the conversation `state`
        (None: the session's context starts a new one). A compute deck takes the message as
        its input, and we keep its transcript."""
        kwargs: dict[str, Any] = {
            **extra,
            **self.model_options(),
            "on_trace": self.on_trace,
            "on_state": self.on_state,
            "stream": True,
            # Chat mode when the server runs in it (GAMBIT_CHAT_FALLBACK=1, as the CLI does).
            "mode": "chat" if getattr(settings, "GAMBIT_CHAT_FALLBACK", False) else "responses",
            "run_id": self.run.id,
            "strict": deck_trees.strict_mode(),  # a deck given by path is loaded as strictly
            "project_root": self.project_root,
        }
        context = self.session.context
        if self.deck_kind == "compute":
            kwargs["context"] = context if message is None else input_from_text(message)
            result = await run_deck(self.deck, **kwargs)
            if message is not None:
                self.progress.transcript.append({"role": "user", "content": message})
            self.progress.transcript.append(
                {"role": "assistant", "content": _as_text(result.output)}
            )
            return result
        if state is not None:
            kwargs["state"] = state_from_dict(state) if isinstance(state, dict) else state
        elif context is not None:
            kwargs["context"] = context
        if message is not None:
            kwargs["message"] = message
        return await run_deck(self.deck, **kwargs)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


async def execute_run(
    run_id: str,
    *,
    router: Any = None,
    routers: providers.SharedRouters | None = None,
    claimed: ClaimedRun | None = None,
) -> str:
    """Run one claimed run to its end; return its final status. Its provider router is
    `router`, else one of `routers` (the run loop's, shared by its runs), else its own.
    `claimed`: the run as `queue.claim_run` read it (not read again).

    A worker's slot does the same in three steps, the first and last in its own thread
    (`worker.execute`): `prepare`, `run_job` on the run loop, `ending.end_run`."""
    try:
        # Patiently: the database thread keeps its connection from run to run, and the first
        # query after a database restart finds it broken (it is replaced, and tried again).
        job = await db_patiently(load_job, run_id, claimed)
    except RunRefused as exc:
        await db_patiently(refuse, run_id, exc)
        await event_log.notify(exc.session_id)
        return "failed"
    # Loading a deck the first time validates its schemas: off the loop, and off the one
    # database thread the run loop's runs share.
    job = await asyncio.to_thread(load_deck, job)
    ended = await run_job(job, router=router, routers=routers)
    await db_patiently(ending.end_run, ended)
    await event_log.notify(ended.session_id)
    return ended.status


def refuse(run_id: str, exc: RunRefused) -> None:
    """A run this process cannot execute (`RunRefused`) fails with the reason."""
    log.warning("run %s refused: %s", run_id, exc)
    ending.finish_run(run_id, "failed", str(exc), None, ending.RunProgress(), None)


async def run_job(
    job: Job, *, router: Any = None, routers: providers.SharedRouters | None = None
) -> ending.Ending:
    """On the run loop: execute the prepared run's kind, stream its trace, watch for Stop and
    send heartbeats; return how it ended, for `ending.end_run`. A run stopped by its process
    shutting down (cancelled) is recorded as interrupted here, and the cancellation goes on."""
    run, session, kind = job.run, job.session, job.kind
    assert kind.execute is not None
    writer = EventWriter(run.id, session.id, job.next_seq)
    deck: Any = job.deck if job.deck is not None else job.deck_file
    own_router = shared_router = None
    if kind.provider is not None:
        provider = kind.provider(Preparation(run, session, job.deck_file, job.prepared))
        # A provider that answers every model itself (a recording) resolves the decks'
        # models to its own name, so the trace names the model that answered.
        resolver = provider if callable(getattr(provider, "resolve_model", None)) else None
        override = None
    else:
        if router is None and routers is not None:
            router = shared_router = await routers.acquire(session.workspace.root)
        elif router is None:
            router = own_router = providers.make_router(session.workspace.root)
        provider = resolver = router
        override, _, _ = providers.effective_model(session.model, job.deck_models, router)
    progress = ending.RunProgress(root=deck.root.path if deck is not job.deck_file else str(deck))
    ctx: RunContext[Any] = RunContext(
        job,
        writer,
        progress,
        deck=deck,
        deck_kind=job.deck_kind,
        provider=provider,
        resolver=resolver,
        override=override,
        jail=job.jail,
    )

    started = time.monotonic()
    task = asyncio.create_task(kind.execute(ctx))
    status, error, result = "completed", "", None
    canceled_by_user = False
    try:
        last_beat = time.monotonic()
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_SECONDS)
            if done:
                break
            try:
                if await db(cancel_requested, run.id):
                    canceled_by_user = True
                    task.cancel()
                    break
                if kind.heartbeats and time.monotonic() - last_beat > HEARTBEAT_SECONDS:
                    last_beat = time.monotonic()
                    await db(heartbeat, run.id)
            except DatabaseError as exc:
                outage.failed("the database", exc)  # the run goes on; checked again soon
                await reset_connection()
        try:
            outcome = await task
            result = outcome.result
            if outcome.state is not None and job.deck_kind != "compute":
                progress.state = outcome.state
            status, error, result = _checked(kind, status, error, result)
        except asyncio.CancelledError:
            if not canceled_by_user:
                raise
            status, error = "canceled", "Run canceled"
        except RunFailed as exc:
            status, error = "failed", str(exc) or "the run failed"
            _, _, result = _checked(kind, status, error, exc.result)
            log.info("run %s failed: %s", run.id, error)
        except Exception as exc:
            status, error = "failed", str(exc) or type(exc).__name__
            log.info("run %s failed: %s", run.id, error)
    except asyncio.CancelledError:
        # The worker is shutting down: stop the deck and record the run as interrupted.
        task.cancel()
        try:
            await task
        except BaseException:
            pass
        await writer.close(wait=5.0)  # a stopping process has seconds, not minutes
        await db(ending.finish_run, run.id, "interrupted", INTERRUPTED, None, progress, started)
        await event_log.notify(session.id)
        raise
    finally:
        telemetry.close(ctx.spans)
        if own_router is not None:
            try:
                await own_router.aclose()
            except Exception:
                pass
        if shared_router is not None and routers is not None:
            await routers.release(shared_router)
    rest = await writer.hand_over()  # written with the run's end, in one transaction
    return ending.Ending(run.id, session.id, status, error, result, progress, started, rest)


def _checked(
    kind: RunKind, status: str, error: str, result: Payload | None
) -> tuple[str, str, Payload | None]:
    """A result of the kind's own model passes; anything else fails the run (a kind's bug)."""
    if result is None or (kind.result is not None and isinstance(result, kind.result)):
        return status, error, result
    expected = kind.result.__name__ if kind.result else "no result"
    return (
        "failed",
        f"run kind {kind.name!r} returned {type(result).__name__}, not {expected}",
        None,
    )
