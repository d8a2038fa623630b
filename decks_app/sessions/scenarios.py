"""Scenario runs from the Test tab: a synthetic user (a scenario deck) talks to the root deck.

One scenario run is a session of its own (origin "scenario", `meta.scenarioPath`) with one
`Run` of kind "scenario" that executes `gambit.core`'s persona loop (`run_scenario`): the
root deck's `startMode` (missing means "assistant": it speaks first), the init-fill of
missing context fields, the persona's end signal (an empty message) and `gambit_end`, at
most `maxTurns` persona messages. It streams into the session page like a manual chat.

Several runs of one scenario at a chosen concurrency are a batch: a Verify batch without
graders (see `services/verify.py`), whose page counts queued / running / completed / failed
runs and lists each run's turns, tokens, cost and latency.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from decks_app.grading import verify as verify_service
from decks_app.models import Run, Session, Workspace
from decks_app.runs import providers
from decks_app.sessions.kinds import ScenarioParams
from decks_app.workspaces.served import find_deck, is_listed_deck, list_decks

MAX_TURNS = (1, 200)
BATCH_RUNS = (1, 100)


class ScenarioError(ValueError):
    pass


# No input for the scenario deck was given (None is a value a schema may accept).
NO_INPUT: Any = object()


def workspace_scenarios(workspace: Workspace) -> list[dict[str, Any]]:
    """Every root deck's `[[scenarios]]`: deck, deck label, scenario path, label, description."""
    out = []
    for deck in list_decks(workspace):
        if deck.error:
            continue
        for ref in verify_service.deck_refs(workspace, deck.path)["scenarios"]:
            out.append({"deck": deck.path, "deckLabel": deck.label, **ref})
    return out


def declared_scenario(
    workspace: Workspace, deck_path: str, scenario_path: str
) -> dict[str, Any] | None:
    """The scenario `scenario_path` (label, description) when the listed deck `deck_path`
    declares it in `[[scenarios]]`, else None. Nothing outside the listing is loaded."""
    if not deck_path or not is_listed_deck(workspace, deck_path):
        return None
    refs = verify_service.deck_refs(workspace, deck_path)["scenarios"]
    return next((ref for ref in refs if ref["path"] == scenario_path), None)


def _bounded(raw: Any, name: str, bounds: tuple[int, int], default: int) -> int:
    low, high = bounds
    if raw in (None, ""):
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ScenarioError(f"{name} must be a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise ScenarioError(f"{name} must be from {low} to {high}, not {value}")
    return value


def start_scenario(
    workspace: Workspace,
    deck_path: str,
    scenario_path: str,
    *,
    max_turns: Any = None,
    context: Any = None,
    scenario_input: Any = NO_INPUT,
    model: str = "",
) -> Session:
    """Queue one scenario run; returns its session. `context` is the root deck's and
    `scenario_input` the scenario deck's own (already checked against their schemas)."""
    if declared_scenario(workspace, deck_path, scenario_path) is None:
        raise ScenarioError(
            f"{scenario_path!r} is not a scenario of {deck_path}; add it to [[scenarios]]"
        )
    deck = find_deck(workspace, deck_path)
    if deck is None or deck.error:
        raise ScenarioError(f"{deck_path} does not load; run gambit check on it")
    turns = _bounded(max_turns, "max turns", MAX_TURNS, 6)
    router = providers.make_router(workspace.root)
    _, label, offline = providers.effective_model(model, deck.models, router)
    with transaction.atomic():
        session = Session.objects.create(
            workspace=workspace,
            deck_path=deck.path,
            deck_label=deck.label,
            model=model.strip()[:200],
            context=context,
            origin="scenario",
            format="responses",
            meta={
                "deckPath": deck.path,
                "scenarioPath": scenario_path,
                **({"scenarioInput": scenario_input} if scenario_input is not NO_INPUT else {}),
            },
        )
        params = ScenarioParams(scenario=scenario_path, max_turns=turns)
        if scenario_input is not NO_INPUT:
            params.scenario_input = scenario_input  # given, even when None
        Run.objects.create(
            session=session, kind="scenario", params=params, model=label, offline=offline
        )
    return session


def start_batch(
    workspace: Workspace,
    deck_path: str,
    scenario_path: str,
    *,
    runs: Any,
    concurrency: Any,
    max_turns: Any = None,
    context: Any = None,
    scenario_input: Any = NO_INPUT,
) -> Run:
    """N runs of one scenario at a concurrency, as a Verify batch without graders."""
    settings = verify_service.VerifyParams(
        scenarios=[scenario_path],
        graders=[],
        runs=_bounded(runs, "runs", BATCH_RUNS, 5),
        repeats=1,
        concurrency=_bounded(concurrency, "concurrency", (1, 32), 4),
        max_turns=_bounded(max_turns, "max turns", MAX_TURNS, 6),
        context=context,
    )
    if scenario_input is not NO_INPUT:
        settings.scenario_input = scenario_input  # given, even when None
    if declared_scenario(workspace, deck_path, scenario_path) is None:
        raise ScenarioError(
            f"{scenario_path!r} is not a scenario of {deck_path}; add it to [[scenarios]]"
        )
    try:
        return verify_service.start_verify(workspace, deck_path, settings)
    except verify_service.VerifyError as exc:
        raise ScenarioError(str(exc)) from None
