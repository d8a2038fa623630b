"""What a Verify batch writes as it goes: each scenario run as a session of its own (its
conversation, trace and the model that answered), and each grade into the `gradingRuns` of
the session it graded. `verify.execute_verify` calls these from its loop, one transaction
each."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from decks_app.models import Run, Session, TraceEvent, Workspace
from decks_app.runs import recorded
from decks_app.runs.state import with_message_refs
from decks_app.sessions.kinds import ScenarioParams, ScenarioResult
from gambit.core import state_to_dict
from gambit.core.verify import GradeRecord, ScenarioRunRecord, grade_reason


def relative_path(workspace: Workspace, path: str) -> str | None:
    try:
        return str(Path(path).resolve().relative_to(Path(workspace.root).resolve()))
    except ValueError:
        return None


def save_scenario_run(
    batch: Session, batch_run_id: str, record: ScenarioRunRecord, events: list[dict[str, Any]]
) -> str:
    """The scenario run as a session of its own, with its conversation and trace."""
    data = state_to_dict(record.state) if record.state is not None else {}
    now_ms = int(time.time() * 1000)
    meta = {
        **(data.get("meta") or {}),
        "deckPath": batch.deck_path,
        "verifyBatchRunId": batch_run_id,
        "verifyRunId": record.id,  # the run's id in the batch's report
        "verifyRunIndex": record.index,
        "scenarioLabel": record.scenario_label,
        "scenarioPath": relative_path(batch.workspace, record.scenario) or record.scenario,
    }
    with transaction.atomic():
        scenario = Session.objects.create(
            workspace=batch.workspace,
            deck_path=batch.deck_path,
            deck_label=batch.deck_label,
            origin="scenario",
            source=batch,
            format=data.get("format") or "responses",
            state_run_id=data.get("runId") or "",
            messages=data.get("messages"),
            items=data.get("items"),
            meta=meta,
        )
        scenario.message_refs = with_message_refs(scenario.messages or [], data.get("messageRefs"))
        scenario.state_version = 1
        scenario.save()
        scenario_path = relative_path(batch.workspace, record.scenario) or record.scenario
        label = record.scenario_label or Path(record.scenario).parent.name
        # The model that answered the root deck (the header, the list and the twin show it).
        answered = recorded.answered_model(
            events, recorded.root_matcher(events, abs_path=None, rel_path=batch.deck_path)
        )
        model, offline = answered or ("", False)
        run = Run.objects.create(
            session=scenario,
            kind="scenario",
            model=model,
            offline=offline,
            params=ScenarioParams(scenario=scenario_path, label=f"{label} #{record.index}"),
            status="completed" if record.status == "completed" else "failed",
            error=record.error or "",
            # recorded as it finished: it started its duration before (the two were the same
            # instant, beside a duration of seconds)
            started_at=(finished := timezone.now())
            - datetime.timedelta(milliseconds=record.duration_ms or 0),
            finished_at=finished,
            duration_ms=record.duration_ms,
            total_tokens=record.tokens,
            cost=record.cost,
            result=ScenarioResult(turns=record.turns, stopped=record.stopped),
        )
        TraceEvent.objects.bulk_create(
            TraceEvent(
                run=run,
                session=scenario,
                seq=seq,
                type=str(event.get("type", "event"))[:80],
                payload=json.loads(json.dumps(event, default=str)),
                ts=event["ts"] if isinstance(event.get("ts"), int) else now_ms,
            )
            for seq, event in enumerate(events, start=1)
        )
    return scenario.id


def save_grade(session_id: str | None, record: GradeRecord, batch_run_id: str) -> None:
    if session_id is None or record.grading is None:
        return
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        grading = record.grading.to_json()
        grading.update(
            {
                "runId": record.id,
                "graderHash": record.grader_hash,
                "graderPath": relative_path(session.workspace, record.grader) or record.grader,
                "repeat": record.repeat,
                "verifyBatchRunId": batch_run_id,  # the Grade tab links back to the batch
                "reason": grade_reason(record.grading),  # the batch page's cell shows it
            }
        )
        meta = dict(session.meta or {})
        meta["gradingRuns"] = [grading, *(meta.get("gradingRuns") or [])]
        session.meta = meta
        session.state_version += 1
        session.save(update_fields=["meta", "state_version", "updated_at"])
