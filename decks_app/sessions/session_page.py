"""The session page's data (`SessionPage`): read once, at one cursor, and rendered either as
the page's JSON twin or into its template and the live fragments its socket sends.

Read-only: the commands that change a session are in `decks_app.sessions.actions`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.db import connection, transaction
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import events as event_log
from decks_app.sessions import live_turn, replay, summaries, trace_tree
from decks_app.sessions.actions import retryable_run
from decks_app.sessions.conversation import (
    Activity,
    Bubble,
    conversation,
    conversation_blocks,
    shown_before,
)
from decks_app.web.pages import PageData
from decks_app.workspaces.served import DeckInfo, find_deck


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


@contextlib.contextmanager
def _snapshot() -> Iterator[None]:
    """A transaction whose reads see one snapshot. PostgreSQL's default (read committed)
    lets a run's end commit between the read of the session and that of its runs, and the
    page then said "completed" over the conversation as it was before the reply; a new
    transaction there reads at repeatable read. Inside an outer transaction its isolation
    stands. (SQLite's transaction already reads one snapshot.)"""
    repeatable = connection.vendor == "postgresql" and connection.get_autocommit()
    with transaction.atomic():
        if repeatable:  # the transaction's first statement, as PostgreSQL requires
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


@dataclass
class SessionPage(PageData):
    """Everything the session page shows, read at one cursor (the last event id): the
    saved conversation and, while a run is active, what its events add (`live_turn`)."""

    session: Session
    deck: DeckInfo | None
    runs: list[Run]
    cursor: int
    version: int
    status: str
    active_run: Run | None
    bubbles: list[Bubble]
    blocks: list[Bubble | Activity]
    # The page shows the newest blocks; "Show earlier" loads the rest.
    blocks_shown: list[Bubble | Activity]
    blocks_before: int
    # What the active run has said that the saved conversation does not hold yet, rendered
    # by the same partials as the conversation (docs/simulator.md, "Live updates").
    live_blocks: list[Bubble | Activity]
    active_elapsed: float | None
    active_phase: str | None
    tree: list[Any]
    tree_omitted: int
    tokens: int
    cost: float | None
    needs_first_message: bool
    retry_run: Run | None
    shown_model: str
    shown_model_offline: bool
    gradings: list[dict[str, Any]]
    context_fill: dict[str, Any] | None
    summary: str | None
    rerun: dict[str, Any] = field(default_factory=dict)
    # The raw event list loads when its panel is opened (`/events/recent`); live rows are
    # appended to it as events arrive.
    raw_events_limit: int = event_log.RECENT_LIMIT
    tab = "test"

    @classmethod
    def of(cls, session: Session, *, rerun: bool = True) -> SessionPage:
        """The page as it is now (`rerun`: also whether "Re-run offline" is offered, which
        reads the trace; the live fragments leave it out)."""
        deck = find_deck(session.workspace, session.deck_path)
        with _snapshot():
            session.refresh_from_db()
            cursor = event_log.last_event_id(session.id)
            runs = list(session.runs.all())
            active = next((r for r in runs if r.active), None)
            pending = live_turn.run_pending(active, session, cursor) if active else []
            bubbles = conversation(session)
            # The trace panel shows the newest runs; the trace page has them all.
            tree_runs = runs[-TREE_RUNS:]
            payloads = trace_tree.tree_rows(session, cursor, runs=tree_runs)
        totals = session.runs.aggregate(tokens=Sum("total_tokens"), cost=Sum("cost"))
        blocks = conversation_blocks(bubbles, session.items)
        shown, hidden = shown_before(blocks, len(blocks))
        model, model_offline = shown_model(session, runs)
        streaming = any(b.status == live_turn.STREAMING and b.kind == "assistant" for b in pending)
        return cls(
            session=session,
            deck=deck,
            runs=runs,
            cursor=cursor,
            version=session.state_version,
            status=runs[-1].status if runs else "idle",
            active_run=active,
            bubbles=bubbles,
            blocks=blocks,
            blocks_shown=shown,
            blocks_before=hidden,
            live_blocks=conversation_blocks(pending),
            # The page's "thinking / responding" timer starts from these.
            active_elapsed=(timezone.now() - active.created_at).total_seconds() if active else None,
            active_phase=("responding" if streaming else "thinking") if active else None,
            tree=trace_tree.build_tree(payloads),
            tree_omitted=len(runs) - len(tree_runs),
            tokens=totals["tokens"] or 0,
            cost=totals["cost"],
            needs_first_message=deck is not None and deck.start_mode == "user" and not runs,
            retry_run=retryable_run(session, runs),
            shown_model=model,
            shown_model_offline=model_offline,
            gradings=grading_summaries(session),
            context_fill=context_fill(session),
            summary=summaries.summary_of(session),
            # "Re-run offline" only where a recording can answer
            rerun=replay.rerun_info(session) if rerun else {},
        )

    # ------------------------------------------------------------ what the template shows

    @property
    def imported_gradings(self) -> int:
        return sum(1 for g in self.gradings if g["imported"])

    @cached_property  # the header and the twin both show it; it may build a router
    def model_label(self) -> str:
        """The header's model: the one that answered, else why there is none."""
        if self._answered:
            return self.shown_model + (" (offline)" if self.shown_model_offline else "")
        deck = self.deck
        if deck is not None and deck.kind == "compute":
            return "no model (compute deck)"
        if self.runs:
            return "no model answered"
        if deck is None:
            return "no model set in the deck"
        # Nothing answered yet: the model that will, as the run will choose it (the offline
        # demo model when the deck's has no configured provider, or the deck names none).
        from decks_app.runs import providers

        router = providers.make_router(self.session.workspace.root)
        _, label, offline = providers.effective_model(self.session.model, deck.models, router)
        why = ""
        if offline and not self.session.model and label == providers.OFFLINE_MODEL:
            why = (
                f": {deck.models[0]} has no configured provider"
                if deck.models
                else ": the deck names no model"
            )
        return f"{label} will answer" + (f" (offline{why})" if offline else "")

    @property
    def model_title(self) -> str:
        """The header model's tooltip: what the figure is."""
        if self._answered or self.runs:
            return "The model that answered"
        return "The model that will answer the first message (nothing has answered yet)"

    @property
    def _answered(self) -> bool:
        """Whether a run recorded the model that answered it (else `shown_model` is only the
        session's override, which has answered nothing yet)."""
        return any(run.model for run in self.runs)

    @property
    def last_error(self) -> str:
        """The error of the last run, shown under the composer once no run is active."""
        last = self.runs[-1] if self.runs else None
        return last.error if last is not None and last.error and not self.active_run else ""

    # ------------------------------------------------------------ the JSON twin

    def to_json(self) -> dict[str, Any]:
        session = self.session
        deck = self.deck
        return {
            "id": session.id,
            "deck": deck.to_dict()
            if deck
            else {"path": session.deck_path, "label": session.deck_label},
            # the model that answered (see shown_model); the override the session was made with
            "model": self.shown_model or None,
            "offline": self.shown_model_offline,
            "modelOverride": session.model or None,
            # the header's sentence: the model that answered, or the one that will
            "modelLabel": self.model_label,
            # the title written after the first exchange (docs/simulator.md, "Session titles")
            "summary": self.summary,
            # how full the context window was at the latest model call (null: no known window)
            "contextFill": self.context_fill,
            "context": session.context,
            "origin": session.origin,
            "sourceSessionId": session.source_id,
            "createdAt": session.created_at.isoformat(),
            "status": self.status,
            "activeRunId": self.active_run.id if self.active_run else None,
            # thinking (no reply text yet) or responding, and for how long the run has been going
            "activity": {
                "phase": self.active_phase,
                "elapsedSeconds": round(self.active_elapsed or 0.0, 1),
            }
            if self.active_run
            else None,
            "cursor": self.cursor,
            "stateVersion": self.version,
            "tokens": self.tokens,
            "cost": self.cost,
            "conversation": [b.to_dict() for b in self.bubbles],
            # the same as shown: things said, and one activity block per turn between them
            "blocks": [b.to_dict() for b in self.blocks],
            # what the active run adds to them so far (the page's live area), same shape
            "live": [b.to_dict() for b in self.live_blocks],
            # the newest TREE_RUNS runs' trace; /trace.json has every run's
            "trace": [n.to_dict() for n in self.tree],
            "traceOmittedRuns": self.tree_omitted,
            # the newest events (at most events.RECENT_LIMIT, oldest first); /trace.json has all
            "events": [
                event_log.event_dict(e) for e in event_log.recent_events(session.id, self.cursor)
            ],
            "runs": [run_dict(r) for r in self.runs],
            # Retry re-runs the last turn after an interruption or failure: POST runId to url.
            "retry": {
                "runId": self.retry_run.id,
                "url": reverse("sessions:session_retry", args=[session.id]),
            }
            if self.retry_run
            else None,
            "notes": session.notes,
            "conversationScore": session.conversation_score,
            # meta.gradingRuns: grades from this simulator and imported ones (CLI, other files)
            "gradingRuns": self.gradings,
            "rerun": self.rerun,
        }
