"""How a `/v1/responses` call is recorded: a session (origin "api") with one run per request,
its trace and its usage, so it can be inspected, rated and graded in the Test tab like any
other conversation; and the run's result, the call's record that the state endpoints read
(`store.call_record`).

The session and run are created after the first bytes are sent (recording adds nothing to
the time to first byte); `Recording.run_record` is the one place a call's run is made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from decks_app.models import Run, Session, Workspace
from decks_app.runs.database import db
from decks_app.runs.ending import RunProgress, finish_run
from decks_app.runs.writer import EventWriter
from decks_app.sessions import actions as session_service
from decks_app.workspaces.served import current_workspace
from endpoint import keys as api_keys
from endpoint import store as response_store
from endpoint.kinds import ApiCallRecord, ApiParams
from endpoint.models import ApiKey
from endpoint.routing import Target, busy
from endpoint.schemas import CreateResponseBody, Item, last_user_text
from gambit.core import new_id

log = logging.getLogger(__name__)

Resource = Callable[[str], dict[str, Any]]
"""The response resource at a status (`encoding.ResponseEncoder.resource`)."""


class Recording:
    """The database side of one call: its session, its run, and the record in the run's
    result."""

    def __init__(
        self,
        response_id: str,
        body: CreateResponseBody,
        items: list[Item],
        *,
        key: ApiKey | None,
        owner: str | None,
        route: tuple[str, str] | None,
    ) -> None:
        self.response_id = response_id
        self.body = body
        self.items = items
        self.store = body.store is not False
        self.key = key
        self.owner = owner
        self.route = route
        self.input_items: list[dict[str, Any]] = []
        self.session: Session | None = None
        self.run: Run | None = None

    def record_of(self, resource: dict[str, Any]) -> ApiCallRecord:
        """The run's result: this call's record (`store.call_record`)."""
        return ApiCallRecord.model_validate(
            response_store.call_record(self.response_id, self.store, resource, self.input_items)
        )

    def record(self, workspace: Workspace, target: Target, resource: Resource) -> Workspace:
        """Create this call's session (or continue the previous or routed one) and its run;
        returns the workspace row (an unsaved `served_workspace` is looked up here)."""
        model = self.body.model
        deck = target.deck
        if workspace._state.adding:  # the root only (`routing.served_workspace`)
            workspace = current_workspace()
        if self.key is not None:
            api_keys.touch(self.key)
        fields = {
            "workspace": workspace,
            "deck_path": deck.path if deck else "",
            "deck_label": (deck.label if deck else model)[:200],
            "model": "" if deck else model[:200],
            "origin": "api",
            "format": "responses",
            "state_run_id": new_id("run"),
            "meta": {
                "deckPath": deck.path if deck else None,
                "api": {
                    "model": model,
                    "metadata": self.body.metadata or {},
                    "owner": self.owner,
                    "route": self.route[0] if self.route is not None else None,
                },
            },
        }
        with transaction.atomic():
            if target.previous is not None or self.route is not None:
                # Continued, or routed: the first call of a routed name creates its session
                # (two racing first calls meet at the one row its derived id allows).
                Session.objects.get_or_create(pk=target.session_id, defaults=fields)
                self.session = Session.objects.select_for_update().get(pk=target.session_id)
                if self.session.runs.filter(status__in=Run.ACTIVE).exists():
                    raise busy(self.body, self.route)
            else:
                self.session = Session.objects.create(pk=target.session_id, **fields)
            self.input_items = response_store.input_items(self.items, target.references)
            try:
                self.run = self.run_record(resource("in_progress"))
            except session_service.SessionBusy:
                raise busy(self.body, self.route) from None
        return workspace

    def run_record(self, resource: dict[str, Any]) -> Run:
        """The call's run (kind "api"), running from now, its record the resource so far."""
        assert self.session is not None
        return session_service.create_run(
            session=self.session,
            kind="api",
            status="running",
            params=ApiParams(message=last_user_text(self.items)),
            model=self.body.model[:200],
            worker_id="api",
            started_at=timezone.now(),
            heartbeat_at=timezone.now(),
            result=self.record_of(resource),
        )

    def trace_writer(self) -> EventWriter:
        """Where the run's trace events go, batched."""
        assert self.run is not None and self.session is not None
        return EventWriter(self.run.id, self.session.id, 1)

    async def finish(
        self,
        status: str,
        error_text: str,
        resource: dict[str, Any],
        latest: RunProgress,
        started: float,
    ) -> None:
        """The run ends (`completed`, `failed`, `canceled`) with its state and usage."""
        assert self.run is not None
        await db(
            finish_run,
            self.run.id,
            status,
            error_text,
            self.record_of(resource),
            latest,
            started,
        )

    async def cancel(self, resource: dict[str, Any]) -> None:
        """The client left before the run started: the recorded run ends canceled."""
        if self.run is None:
            return
        await self.finish(
            "canceled", "the client disconnected", resource, RunProgress(), time.monotonic()
        )

    def store_resource(self, final: dict[str, Any]) -> None:
        """The answered resource, into the run's record (before the last event is sent)."""
        if self.run is None:
            return
        try:
            Run.objects.filter(pk=self.run.pk).update(result=self.record_of(final).to_json())
        except Exception:  # the answer still goes out; the record keeps its last state
            log.exception("response %s: storing the final resource failed", self.response_id)
