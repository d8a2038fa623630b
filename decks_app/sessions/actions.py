"""Sessions: create, send, stop, list and read (the data behind the Test tab and its JSON)."""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent, Workspace
from decks_app.runs import events as event_log
from decks_app.runs import providers
from decks_app.runs.registry import NoParams, Payload, TurnParams
from decks_app.sessions import fragments, summaries, trace_tree
from decks_app.sessions.conversation import conversation, conversation_blocks, shown_before
from decks_app.workspaces.served import DeckInfo, find_deck, is_listed_deck
from gambit.core import is_valid_id, new_id

MAX_MESSAGE_CHARS = 100_000


class SessionBusy(Exception):
    """A run of this session is still queued or running."""


class InvalidInput(ValueError):
    pass


# ---------------------------------------------------------------- lookups


def get_session(session_id: str) -> Session | None:
    """The session, or None for an unknown or malformed id (never queried when malformed)."""
    if not is_valid_id(session_id, "session"):
        return None
    return Session.objects.select_related("workspace").filter(pk=session_id).first()


def active_run(session: Session) -> Run | None:
    return session.runs.filter(status__in=Run.ACTIVE).order_by("created_at").first()


# ---------------------------------------------------------------- commands


def parse_context(text: str | None) -> Any:
    """The context input typed in the new-session form: JSON when it parses, else text."""
    if text is None or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
    except RecursionError:
        raise InvalidInput("the context is nested too deeply") from None


def create_session(
    workspace: Workspace,
    deck_path: str,
    *,
    model: str = "",
    context: Any = None,
    origin: str = "manual",
) -> Session:
    if not is_listed_deck(workspace, deck_path):
        raise InvalidInput(f"no deck at {deck_path[:200]!r} in this workspace")
    deck = find_deck(workspace, deck_path)
    if deck is None:
        raise InvalidInput(f"no deck at {deck_path!r} in this workspace")
    if deck.error:
        raise InvalidInput(f"the deck does not load: {deck.error}")
    if model and len(model) > 200:
        raise InvalidInput("model name too long")
    session = Session.objects.create(
        workspace=workspace,
        deck_path=deck.path,
        deck_label=deck.label,
        model=model.strip(),
        context=context,
        origin=origin,
        state_run_id=new_id("run"),
        format="responses",
        meta={"deckPath": deck.path, "simulatorSession": None},
    )
    session.meta = {"deckPath": deck.path, "simulatorSessionId": session.id}
    session.save(update_fields=["meta"])
    if origin == "manual" and (
        # a compute deck given a context answers it first, as `gambit repl --context` does;
        # each message after that is its input (docs/decisions.md, "A compute root...")
        context not in (None, "") if deck.kind == "compute" else deck.start_mode == "assistant"
    ):
        enqueue_run(session, message=None)
    return session


def create_run(**fields: Any) -> Run:
    """`Run.objects.create`, with the database's one-active-run-per-session rule raised as
    `SessionBusy` (the constraint holds even when two processes race past the page's check)."""
    try:
        with transaction.atomic():
            return Run.objects.create(**fields)
    except IntegrityError as exc:
        text = str(exc)
        if "one_active_run_per_session" in text or "decks_app_run.session_id" in text:
            raise SessionBusy("a run of this session is still in progress") from None
        raise


def enqueue_run(session: Session, *, message: str | None, kind: str = "manual") -> Run:
    """Queue a chat turn (`message`, None: the deck speaks first) or a replay."""
    params: Payload = NoParams() if kind == "replay" else TurnParams(message=message)
    deck = find_deck(session.workspace, session.deck_path)
    deck_models = deck.models if deck else []
    router = providers.make_router(session.workspace.root)
    _, label, offline = providers.effective_model(session.model, deck_models, router)
    if kind == "replay":
        label, offline = "offline-replay", True
    with transaction.atomic():
        # Lock the session row so two sends cannot both start a run (PostgreSQL).
        Session.objects.select_for_update().filter(pk=session.pk).first()
        if session.runs.filter(status__in=Run.ACTIVE).exists():
            raise SessionBusy("a run of this session is still in progress")
        run = create_run(session=session, kind=kind, params=params, model=label, offline=offline)
    return run


def send_message(session: Session, text: str) -> Run:
    text = (text or "").strip()
    if not text:
        raise InvalidInput("the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"the message is longer than {MAX_MESSAGE_CHARS} characters")
    if "\x00" in text:
        raise InvalidInput("the message contains a NUL character")
    return enqueue_run(session, message=text)


def stop_session(session: Session) -> list[str]:
    """Cancel queued runs now; ask running ones to stop (their worker cancels them)."""
    stopped = []
    with transaction.atomic():
        for run in session.runs.filter(status__in=Run.ACTIVE).select_for_update():
            if run.status == "queued":
                run.status = "canceled"
                run.error = "Run canceled before it started"
                run.finished_at = timezone.now()
                run.save(update_fields=["status", "error", "finished_at"])
            else:
                run.cancel_requested = True
                run.save(update_fields=["cancel_requested"])
            stopped.append(run.id)
    if stopped:
        event_log.notify_sync(session.id)
    return stopped


RETRYABLE = ("interrupted", "failed")


def retryable_run(session: Session, runs: list[Run] | None = None) -> Run | None:
    """The session's last run when Retry can re-run its turn: a chat turn (a message of its
    own) that ended interrupted or failed, with nothing run after it."""
    last = runs[-1] if runs else session.runs.order_by("-created_at").first()
    if (
        last is None
        or last.status not in RETRYABLE
        or last.kind != "manual"
        or not last.turn_base
        or not last.read_params(TurnParams).message
    ):
        return None
    return last


def retry_run(session: Session, run_id: str) -> Run:
    """Re-run an interrupted or failed turn: the conversation goes back to where that turn
    started (its user message and partial reply leave it) and the same message is sent."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        run = retryable_run(locked)
        if run is None or run.id != run_id:
            raise InvalidInput(
                "only the last turn can be retried, once it was interrupted or failed"
            )
        base = run.turn_base or {}
        locked.messages = (locked.messages or [])[: base.get("messages", 0)]
        if locked.items is not None:
            locked.items = locked.items[: base.get("items", 0)]
        locked.message_refs = (locked.message_refs or [])[: base.get("refs", 0)]
        locked.state_version += 1
        locked.save()
        session.refresh_from_db()
        retried = enqueue_run(session, message=run.read_params(TurnParams).message)
    return retried


# ---------------------------------------------------------------- reads


def run_dict(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "kind": run.kind,
        "status": run.status,
        # what the run was asked (its kind's params) and what it produced (its result)
        "params": run.params,
        "result": run.result,
        "error": run.error or None,
        "model": run.model,
        "offline": run.offline,
        "createdAt": run.created_at.isoformat() if run.created_at else None,
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationMs": run.duration_ms,
        "usage": run.usage,
        "totalTokens": run.total_tokens,
        "cost": run.cost,
    }


def shown_model(session: Session, runs: list[Run]) -> tuple[str, bool]:
    """(the model to show for a session, offline?): the model that answered its latest run
    that has one (runs record the model of their `model.result` events when they end;
    the replay provider for a replay), else the session's model override."""
    for run in reversed(runs):
        if run.model:
            return run.model, run.offline
    return session.model, False


def grading_summaries(session: Session) -> list[dict[str, Any]]:
    """The session's `meta.gradingRuns` (newest first, the records `gambit grade` writes),
    each marked `imported` unless a grade run of this simulator made it."""
    records = [g for g in (session.meta or {}).get("gradingRuns") or [] if isinstance(g, dict)]
    if not records:
        return []
    ours = set(
        Run.objects.filter(
            kind="grader", session__source=session, session__origin="grade"
        ).values_list("id", flat=True)
    )
    out = []
    for g in records:
        imported = g.get("runId") not in ours
        out.append(
            {
                "id": g.get("id"),
                "runId": g.get("runId"),
                "grader": g.get("graderLabel") or g.get("graderPath"),
                "graderPath": g.get("graderPath"),
                "mode": g.get("mode"),
                "status": g.get("status"),
                "score": g.get("score"),
                "runAt": g.get("runAt"),
                "imported": imported,
                "url": reverse("grading:grade_run", args=[g["runId"]]) if not imported else None,
            }
        )
    return out


def session_status(session: Session, last_run: Run | None = None) -> str:
    run = last_run if last_run is not None else session.runs.order_by("-created_at").first()
    return run.status if run else "idle"


TREE_RUNS = 5  # runs whose trace the session page shows (the trace page shows all)


def context_fill(session: Session) -> dict[str, Any] | None:
    """How full the model's context window was at the session's latest root model call
    (docs/decks.md, "Context window and compaction"): the input tokens the provider
    reported, else those counted before the call, out of the window; None when no call had a
    known window. Read from the trace (`model.result` `contextTokens`)."""
    latest = (
        TraceEvent.objects.filter(session=session, type="model.result")
        .order_by("-id")
        .values_list("payload", flat=True)[:20]
    )
    for payload in latest:
        if payload.get("parentActionCallId"):
            continue  # an action's own conversation
        counts = payload.get("contextTokens")
        if not isinstance(counts, dict) or not isinstance(counts.get("window"), int):
            return None
        reported = counts.get("reported")
        tokens = reported if isinstance(reported, int) else counts.get("counted")
        if not isinstance(tokens, int) or counts["window"] <= 0:
            return None
        return {
            "tokens": tokens,
            "window": counts["window"],
            "percent": round(100 * tokens / counts["window"]),
            # reported by the provider, or counted before the call (api, a tokenizer, estimate)
            "source": "reported" if isinstance(reported, int) else counts.get("method"),
            "compactions": TraceEvent.objects.filter(
                session=session, type="context.compacted"
            ).count(),
        }
    return None


def session_detail(session: Session) -> dict[str, Any]:
    """Everything the session page shows, read at one cursor (see `live_events`)."""
    deck: DeckInfo | None = find_deck(session.workspace, session.deck_path)
    with transaction.atomic():
        session.refresh_from_db()
        cursor = event_log.last_event_id(session.id)
        runs = list(session.runs.all())
        active = next((r for r in runs if r.active), None)
        live = (
            list(TraceEvent.objects.filter(run=active, id__lte=cursor).order_by("id"))
            if active
            else []
        )
        bubbles = conversation(session)
        # The trace panel shows the newest runs; the trace page has them all.
        tree_runs = runs[-TREE_RUNS:]
        payloads = trace_tree.tree_rows(session, cursor, runs=tree_runs)
    totals = session.runs.aggregate(tokens=Sum("total_tokens"), cost=Sum("cost"))
    live_blocks = fragments.live_blocks(live)
    blocks = conversation_blocks(bubbles, session.items)
    shown, hidden = shown_before(blocks, len(blocks))
    model, model_offline = shown_model(session, runs)
    gradings = grading_summaries(session)
    return {
        "session": session,
        "deck": deck,
        "runs": runs,
        "active_run": active,
        "live_events": live,
        "live_blocks": live_blocks,
        # The page's "thinking / responding" timer starts from these.
        "active_elapsed": (timezone.now() - active.created_at).total_seconds() if active else None,
        "active_phase": (
            ("responding" if any(b.get("kind") == "assistant" for b in live_blocks) else "thinking")
            if active
            else None
        ),
        "tree": trace_tree.build_tree(payloads),
        "tree_omitted": len(runs) - len(tree_runs),
        # The raw event list loads when its panel is opened (`/events/recent`); live rows
        # are appended to it as events arrive.
        "raw_events": [],
        "raw_events_limit": event_log.RECENT_LIMIT,
        "cursor": cursor,
        "version": session.state_version,
        "bubbles": bubbles,
        "blocks": blocks,
        # The page shows the newest blocks; "Show earlier" loads the rest.
        "blocks_shown": shown,
        "blocks_before": hidden,
        "status": runs[-1].status if runs else "idle",
        "tokens": totals["tokens"] or 0,
        "cost": totals["cost"],
        "needs_first_message": deck is not None and deck.start_mode == "user" and not runs,
        "retry_run": retryable_run(session, runs),
        "shown_model": model,
        "shown_model_offline": model_offline,
        "gradings": gradings,
        "imported_gradings": sum(1 for g in gradings if g["imported"]),
        "context_fill": context_fill(session),
        "summary": summaries.summary_of(session),
    }


def session_json(session: Session, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    d = detail or session_detail(session)
    deck = d["deck"]
    return {
        "id": session.id,
        "deck": deck.to_dict()
        if deck
        else {"path": session.deck_path, "label": session.deck_label},
        # the model that answered (see shown_model); the override the session was made with
        "model": d["shown_model"] or None,
        "offline": d["shown_model_offline"],
        "modelOverride": session.model or None,
        # the title written after the first exchange (docs/simulator.md, "Session titles")
        "summary": d["summary"],
        # how full the context window was at the latest model call (null: no known window)
        "contextFill": d["context_fill"],
        "context": session.context,
        "origin": session.origin,
        "sourceSessionId": session.source_id,
        "createdAt": session.created_at.isoformat(),
        "status": d["status"],
        "activeRunId": d["active_run"].id if d["active_run"] else None,
        # thinking (no reply text yet) or responding, and for how long the run has been going
        "activity": {"phase": d["active_phase"], "elapsedSeconds": round(d["active_elapsed"], 1)}
        if d["active_run"]
        else None,
        "cursor": d["cursor"],
        "stateVersion": d["version"],
        "tokens": d["tokens"],
        "cost": d["cost"],
        "conversation": [b.to_dict() for b in d["bubbles"]],
        # the same as shown: things said, and one activity block per turn between them
        "blocks": [b.to_dict() for b in d["blocks"]],
        # the newest TREE_RUNS runs' trace; /trace.json has every run's
        "trace": [n.to_dict() for n in d["tree"]],
        "traceOmittedRuns": d["tree_omitted"],
        # the newest events (at most events.RECENT_LIMIT, oldest first); /trace.json has all
        "events": [
            event_log.event_dict(e) for e in event_log.recent_events(session.id, d["cursor"])
        ],
        "runs": [run_dict(r) for r in d["runs"]],
        # Retry re-runs the last turn after an interruption or failure: POST runId to url.
        "retry": {
            "runId": d["retry_run"].id,
            "url": reverse("sessions:session_retry", args=[session.id]),
        }
        if d["retry_run"]
        else None,
        "notes": session.notes,
        "conversationScore": session.conversation_score,
        # meta.gradingRuns: grades from this simulator and imported ones (CLI, other files)
        "gradingRuns": d["gradings"],
    }
