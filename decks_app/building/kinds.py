"""The Build tab's run kind: one turn of the Build assistant ("assistant"), the bundled deck
that reads and edits the deck being built. Registered from decks_app.apps.DecksAppConfig.ready()
(docs/simulator.md, "Jobs")."""

from __future__ import annotations

import asyncio

from decks_app.building import assistant
from decks_app.building.assistant import AssistantParams, AssistantResult
from decks_app.runs.executor import RunContext
from decks_app.runs.registry import Outcome, Preparation, run_kind


def _assistant_deck(prep: Preparation) -> None:
    prep.deck_file = assistant.ASSISTANT_DECK  # it works on the session's deck_path


@run_kind(
    "assistant",
    params=AssistantParams,
    result=AssistantResult,
    description="one turn of the Build assistant about a deck",
    checkpoints=True,
    user_turn=True,
    partial_reply=True,
    prepare=_assistant_deck,
    origins=("assistant",),
)
async def assistant_turn(ctx: RunContext[AssistantParams]) -> Outcome:
    session, params = ctx.session, ctx.params
    perms = assistant.permissions(session.workspace, session.deck_path, params.grant)
    folder = assistant.deck_folder(session.workspace, session.deck_path)
    result = await ctx.one_turn(
        params.message,
        ctx.state,
        session_permissions=perms,
        tools_base_dir=folder,
        on_tool=assistant.edit_tool(session.workspace, session.deck_path, params.grant),
    )
    after = await asyncio.to_thread(assistant.snapshot, folder)
    return Outcome(AssistantResult(after=after), result.state)
