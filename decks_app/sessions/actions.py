"""Sessions: create, send, stop, list and read (the data behind the Test tab and its JSON)."""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from decks_app.models import Run, Session, Workspace
from decks_app.runs import events as event_log
from decks_app.runs import providers
from decks_app.runs.registry import NoParams, Payload, TurnParams
from decks_app.workspaces.served import find_deck, is_listed_deck
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
