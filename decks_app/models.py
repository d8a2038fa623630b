"""The simulator's data model.

- `Workspace`: a deck folder on disk.
- `Session`: one conversation with one root deck, holding its SavedState (docs/decks.md,
  "Saved state").
- `Run`: one execution inside a session, of a kind registered in decks_app.runs.registry (a
  chat turn, a replay, a scenario, a grade, a Verify batch, an API call, the Build
  assistant, or a third party's), with what it was asked (`params`) and what it produced
  (`result`), each validated against its kind's model; its status, error, timings, usage and
  cost. Runs are the work queue.
- `TraceEvent`: the durable, append-only log of a run (unique per run and seq); the truth
  from which pages and websocket fragments are rendered.
- `Feedback`: a -3..+3 rating of one assistant message (by its message ref id), with a reason,
  by a named rater (one rating per rater and message; "" is a rating without a name, as the
  Test tab and databases older than rater names leave them).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from decks_app.runs import registry
from gambit.core import new_id


def new_workspace_id() -> str:
    return new_id("workspace")


def new_session_id() -> str:
    return new_id("session")


def new_run_id() -> str:
    return new_id("run")


def new_feedback_id() -> str:
    return new_id("fb")


class Workspace(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_workspace_id)
    root = models.CharField(max_length=1024, unique=True)
    label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.label or self.root


class Session(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_session_id)
    # Indexed by `Meta.indexes`, not `db_index`: on PostgreSQL a `db_index` on a varchar also
    # builds a `varchar_pattern_ops` copy for LIKE, which no query uses and every write of
    # the row pays for (docs/decisions.md, "No index a query does not use").
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    deck_path = models.CharField(max_length=1024, help_text="relative to the workspace root")
    deck_label = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True, help_text="model override")
    context = models.JSONField(null=True, blank=True, help_text="the deck's context input")
    # Which feature made the session (registered in decks_app.runs.registry: manual, import,
    # replay, grade, verify, scenario, api, assistant, or a third party's).
    origin = models.CharField(max_length=16, default="manual")
    source = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
        db_index=False,
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    # SavedState (docs/decks.md, "Saved state"), one field per key; `extra` keeps unknown keys.
    state_run_id = models.CharField(max_length=64, blank=True)
    format = models.CharField(max_length=16, blank=True)
    messages = models.JSONField(null=True, blank=True)
    items = models.JSONField(null=True, blank=True)
    message_refs = models.JSONField(null=True, blank=True)
    meta = models.JSONField(null=True, blank=True)
    notes = models.JSONField(null=True, blank=True)
    conversation_score = models.JSONField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # Bumped whenever the saved conversation changes (pages and sockets re-render it).
    state_version = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["workspace"], name="session_workspace"),
            models.Index(fields=["source"], name="session_source"),
        ]

    def __str__(self) -> str:
        return self.id

    def save(self, *args: Any, **kwargs: Any) -> None:
        fields = kwargs.get("update_fields")
        if fields is None or "origin" in fields:
            registry.check_origin(self.origin)
        super().save(*args, **kwargs)


class Run(models.Model):
    STATUSES = [
        ("queued", "queued"),
        ("running", "running"),
        ("completed", "completed"),
        ("failed", "failed"),
        ("canceled", "canceled"),
        ("interrupted", "interrupted"),
    ]
    ACTIVE = ("queued", "running")

    id = models.CharField(primary_key=True, max_length=40, default=new_run_id)
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    # A kind registered in decks_app.runs.registry, which validates params and result.
    kind = models.CharField(max_length=16, default="manual")
    status = models.CharField(max_length=16, choices=STATUSES, default="queued")
    params = models.JSONField(default=dict, blank=True, help_text="what the run was asked to do")
    result = models.JSONField(null=True, blank=True, help_text="what the run produced")
    error = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    worker_id = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True)
    offline = models.BooleanField(default=False)
    # Where this run's turn starts in the session's conversation, and how far its saved
    # checkpoints got: {"stateVersion", "messages", "items", "refs", "checkpointSeq"}. An
    # interrupted turn is recovered from it and Retry cuts the conversation back to it.
    turn_base = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            # One run per session at a time, enforced by the database (not only the page).
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_active_run_per_session",
            )
        ]
        indexes = [
            models.Index(fields=["session"], name="run_session"),
            models.Index(fields=["status"], name="run_status"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def active(self) -> bool:
        return self.status in self.ACTIVE

    def save(self, *args: Any, **kwargs: Any) -> None:
        fields = kwargs.get("update_fields")
        if fields is None or {"kind", "params", "result"} & set(fields):
            registry.check_run(self)  # a registered kind, params and result of its models
        super().save(*args, **kwargs)

    def read_params[P: registry.Payload](self, model: type[P]) -> P:
        """The params as `model`, the kind's params model (TypeError for another)."""
        return registry.read_params(self, model)

    def read_result[P: registry.Payload](self, model: type[P]) -> P | None:
        """The result as `model`, the kind's result model; None while there is none."""
        return registry.read_result(self, model)


class TraceEvent(models.Model):
    # No index of their own: `trace_event_run_seq` and `trace_event_session_cursor` lead
    # with them, and a run's ~20 events a turn each paid for four more index entries.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=80)
    payload = models.JSONField()
    ts = models.BigIntegerField(help_text="milliseconds since the epoch")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="trace_event_run_seq")]
        indexes = [models.Index(fields=["session", "id"], name="trace_event_session_cursor")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"


class Feedback(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="feedback")
    message_ref_id = models.CharField(max_length=64)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL)
    feedback_id = models.CharField(max_length=40, default=new_feedback_id)
    score = models.SmallIntegerField()
    reason = models.TextField(blank=True)
    rater = models.CharField(max_length=80, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "message_ref_id", "rater"], name="feedback_one_per_rater"
            ),
            models.CheckConstraint(
                condition=models.Q(score__gte=-3, score__lte=3), name="feedback_score_range"
            ),
        ]
