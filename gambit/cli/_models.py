"""Which model each deck of a command gets, and what the command says about it.

`--model-force` replaces the model of the deck under test and the decks it calls; the
scenario persona and the graders keep their own unless `--scenario-model` / `--grader-model`
replace theirs (docs/decisions.md, "Which model each deck gets"). A grader forced onto the
deck's model would otherwise grade with whatever the deck was tested with:
`--model-force offline/echo` made every grade the echo model's greeting, and a 100% pass rate
of nothing.

`--model` is only a default, for decks that name no model; `note_default_model` says which
decks keep their own. `GraderWatch` sees which model answered each grader and warns when that
model cannot grade (the echo model) or its replies were not grades.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

from gambit.core import Deck, DeckTree

from ._common import RunFlags, shown_path, warn_once
from ._options import Decorator, options_in_order

# Offline models that answer without reading the request: what they say is no verdict.
CANNOT_GRADE = {"offline/echo": "it repeats its input"}

# How a grader's failure reads when its model replied with something that is no grade: text
# where the grader output schema asks for a score and a reason, an object without a score, or
# no gambit_respond call within the deck's passes.
NOT_A_GRADE = (
    "does not match its responseSchema",
    "the grader returned no score",
    "Model did not complete within guardrails",
)


def role_model_options() -> Decorator:
    """`--scenario-model` and `--grader-model` (scenario, verify)."""
    return options_in_order(
        click.option(
            "--scenario-model",
            help="Model for the scenario (persona) decks, replacing their own.",
        ),
        click.option(
            "--grader-model",
            help="Model for the grader decks, replacing their own (--model-force does not "
            "reach the graders).",
        ),
    )


def role_run_options(
    scenario_model: str | None, grader_model: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(persona options, grader options) for `run_scenario` / `run_verify`: each role's own
    override, None when not given (so `--model-force` stops at the deck under test)."""
    return {"model_override": scenario_model}, {"model_override": grader_model}


def decks_of(tree: DeckTree, roles: Iterable[str]) -> list[Deck]:
    wanted = set(roles)
    return [tree.decks[e.path] for e in tree.entries if e.role in wanted and e.path in tree.decks]


UNDER_TEST = ("root", "action")
ROLE_FIX = (
    "--model-force replaces the model of the deck under test, --scenario-model the persona's "
    "and --grader-model the graders'"
)


def note_default_model(
    model: str | None,
    decks: Iterable[Deck],
    fix: str = "--model-force replaces the model of the deck under test",
) -> None:
    """`--model` reaches only the decks that name no model: say which of `decks` (those it
    could reach, not already forced) keep their own, and what would replace it (`fix`)."""
    if not model:
        return
    own: dict[str, Deck] = {}
    for deck in decks:
        if deck.model_params.models and deck.path not in own:
            own[deck.path] = deck
    if not own:
        return
    named = [f"{shown_path(d.path)} ({', '.join(d.model_params.models)})" for d in own.values()]
    shown = "; ".join(named[:3]) + (f"; and {len(named) - 3} more" if len(named) > 3 else "")
    click.echo(
        f"note: --model {model} is used only by decks that name no model; "
        f"{'this deck keeps its own' if len(own) == 1 else f'{len(own)} decks keep their own'}: "
        f"{shown}. {fix[:1].upper()}{fix[1:]}.",
        err=True,
    )


def note_role_models(
    tree: DeckTree,
    scenario_trees: list[DeckTree],
    grader_trees: list[DeckTree],
    flags: RunFlags,
    scenario_model: str | None,
    grader_model: str | None,
    *,
    declared: bool = True,
) -> None:
    """`note_default_model` for a command that runs scenarios and graders (scenario, verify):
    the deck under test and the decks it calls unless --model-force replaced their model, the
    scenarios and graders named on the command line unless --scenario-model / --grader-model
    replaced theirs, else (`declared`) the root's."""
    personas = [d for t in scenario_trees for d in decks_of(t, ("scenario", "action"))]
    judges = [d for t in grader_trees for d in decks_of(t, ("grader", "action"))]
    if declared and not scenario_trees:
        personas = decks_of(tree, ("scenario",))
    if declared and not grader_trees:
        judges = decks_of(tree, ("grader",))
    note_default_model(
        flags.model,
        [
            *([] if flags.model_force else decks_of(tree, UNDER_TEST)),
            *([] if scenario_model else personas),
            *([] if grader_model else judges),
        ],
        ROLE_FIX,
    )


class GraderWatch:
    """A trace observer: which models answered each deck (by the deck's path), so a grader's
    can be told once it has graded."""

    def __init__(self, *, fix: str = "--grader-model MODEL"):
        self.models: dict[str, list[str]] = {}
        self.fix = fix

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") != "model.call":
            return
        path, model = event.get("deckPath"), event.get("model")
        if isinstance(path, str) and isinstance(model, str):
            seen = self.models.setdefault(path, [])
            if model not in seen:
                seen.append(model)

    def chain(self, other: Callable[[dict[str, Any]], None] | None) -> Callable[..., None]:
        """This observer beside `other` (the command's --trace / --verbose sink)."""
        if other is None:
            return self

        def both(event: dict[str, Any]) -> None:
            self(event)
            other(event)

        return both

    def warn(self, label: str, path: str, errors: Iterable[str | None], total: int) -> None:
        """Warn about the grader at `path` (shown as `label`): a model that cannot grade
        answered it, or some of its `total` replies (whose `errors` are given) were no grade."""
        models = self.models.get(path, [])
        for model in models:
            why = CANNOT_GRADE.get(model)
            if why is not None:
                warn_once(
                    f"the grader {label} was answered by {model}, which cannot grade ({why}): "
                    f"its scores mean nothing. Give it a model that can with {self.fix}."
                )
        bad = sum(1 for e in errors if e and any(mark in e for mark in NOT_A_GRADE))
        if bad:
            by = f" from {', '.join(models)}" if models else ""
            warn_once(
                f"{bad} of {total} replies{by} to the grader {label} were not a grade (the "
                "grader output schema: a numeric score and a reason); that model may not be "
                f"able to grade: give it another with {self.fix}."
            )
