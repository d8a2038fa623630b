"""The Test tab's run kinds: a chat turn ("manual"), an offline replay ("replay") and a
scenario run ("scenario"), with the session origins of the sessions they run in.

Registered from decks_app.apps.DecksAppConfig.ready(), like any run kind (docs/simulator.md,
"Jobs").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from decks_app.models import TraceEvent
from decks_app.runs import deck_trees, recorded
from decks_app.runs.executor import RunContext
from decks_app.runs.registry import (
    NoParams,
    Outcome,
    Payload,
    Preparation,
    TurnParams,
    register_origin,
    run_kind,
)
from decks_app.sessions import summaries
from gambit.core import MISSING as _MISSING
from gambit.core import DeckLoadError, run_scenario, state_messages
from gambit.providers.offline import ReplayProvider

REPLAY_CHUNK_DELAY = 0.01

register_origin("manual", "a conversation started on the Test tab")
register_origin("import", "a session imported from a file (`gambit` CLI or another simulator)")


class ChatResult(Payload):
    """What a chat turn (or a replay) produced: the deck's output, its last reply."""

    output: Any = None


class ScenarioParams(Payload):
    """A scenario run: the scenario deck (workspace-relative), at most `maxTurns` persona
    messages, and the scenario deck's own input when one was given (`scenarioInput`, left
    out when not: None is an input a schema may accept). A Verify batch's scenario runs are
    recorded with a `label` ("<scenario> #<n>") and are never executed on their own."""

    scenario: str
    label: str | None = None
    max_turns: int = 6
    scenario_input: Any = None

    @property
    def has_scenario_input(self) -> bool:
        return "scenario_input" in self.model_fields_set


class ScenarioResult(Payload):
    """The persona messages sent (`turns`) and why the scenario stopped."""

    turns: int = 0
    stopped: str | None = None


@run_kind(
    "manual",
    params=TurnParams,
    result=ChatResult,
    description="one turn of a Test-tab conversation",
    checkpoints=True,
    user_turn=True,
    partial_reply=True,
)
async def chat_turn(ctx: RunContext[TurnParams]) -> Outcome:
    result = await ctx.one_turn(ctx.params.message, ctx.state)
    # A title for the sessions list, written in the background: the turn does not wait.
    summaries.schedule(ctx.session, state_messages(result.state))
    return Outcome(ChatResult(output=result.output), result.state)


@dataclass
class _Recording:
    """A replay's source: its trace and the messages of its root deck's turns."""

    events: list[dict[str, Any]] = field(default_factory=list)
    turns: list[str | None] = field(default_factory=list)


def _load_recording(prep: Preparation) -> None:
    recording = _Recording()
    session = prep.session
    if session.source_id:
        recording.events = list(
            TraceEvent.objects.filter(session_id=session.source_id)
            .order_by("id")
            .values_list("payload", flat=True)
        )
        # The turns are the ones the recording ran (its root deck's run.start events), so
        # imported sessions, scenario runs and replays of replays replay as recorded.
        is_root = recorded.root_matcher(
            recording.events, abs_path=str(prep.deck_file), rel_path=session.deck_path
        )
        recording.turns = [
            recorded.turn_message(start) for start in recorded.root_turns(recording.events, is_root)
        ]
    prep.data = recording


def _recorded_provider(prep: Preparation) -> ReplayProvider:
    return ReplayProvider.from_trace(prep.data.events, chunk_delay=REPLAY_CHUNK_DELAY)


@run_kind(
    "replay",
    params=NoParams,
    result=ChatResult,
    description="the source session's turns again, answered from its recorded model results",
    checkpoints=True,
    partial_reply=True,
    billed=False,
    prepare=_load_recording,
    provider=_recorded_provider,
    origins=("replay",),
)
async def replay(ctx: RunContext[NoParams]) -> Outcome:
    recording: _Recording = ctx.prepared
    state: Any = None
    result: Any = None
    for message in recording.turns or [None]:
        result = await ctx.one_turn(message, state)
        state = result.state
    return Outcome(ChatResult(output=result.output), result.state)


@run_kind(
    "scenario",
    params=ScenarioParams,
    result=ScenarioResult,
    description="a scenario deck (a synthetic user) talking to the session's deck",
    checkpoints=True,
    origins=("scenario",),
)
async def scenario(ctx: RunContext[ScenarioParams]) -> Outcome:
    params = ctx.params
    persona: Any = ctx.workspace_root / params.scenario
    try:
        persona = await asyncio.to_thread(
            deck_trees.load, persona, "scenario", root=ctx.project_root
        )
    except DeckLoadError:
        pass  # the runtime reports it
    context = ctx.session.context
    outcome = await run_scenario(
        ctx.deck,
        persona,
        context=context if context is not None else _MISSING,
        scenario_input=params.scenario_input if params.has_scenario_input else _MISSING,
        max_turns=params.max_turns,
        on_state=ctx.on_state,
        on_trace=ctx.on_trace,
        stream=True,
        run_id=ctx.run.id,
        strict=deck_trees.strict_mode(),
        project_root=ctx.project_root,
        **ctx.model_options(),
    )
    return Outcome(ScenarioResult(turns=outcome.turns, stopped=outcome.stopped), outcome.state)
