"""Two Verify batches compared: what changed between them, and whether the results moved.

- `changes`: what differs in what was run (the deck's files, a grader's rubric, the model,
  the settings), in words, so a difference in results can be put down to its cause;
- `graders`: each grader's pass rate and mean before and after, from
  `gambit.core.verify.compare` (the pass rates by the two-proportion test, each side with
  its Wilson interval; the means by Welch's standard error; docs/simulator.md states the
  rule), with the direction: better, worse, no clear change;
- `scenarios`: each scenario's passes per grader before and after (the matrix's tallies).
"""

from __future__ import annotations

from typing import Any

from decks_app.grading import verify as verify_service
from decks_app.models import Run
from gambit.core.verify import compare, matrix

SETTINGS = {
    "runs": "runs per scenario",
    "repeats": "grades of each run",
    "maxTurns": "persona turns",
    "threshold": "pass threshold",
    "concurrency": "concurrency",
}


def comparison(before: Run, after: Run) -> dict[str, Any]:
    """The compare page's record (its JSON twin)."""
    first, second = verify_service.batch_dict(before), verify_service.batch_dict(after)
    threshold = after.read_params(verify_service.VerifyParams).threshold
    samples_before = verify_service.samples_of(before)
    samples_after = verify_service.samples_of(after)
    labels = {**first["graderLabels"], **second["graderLabels"]}
    graders = {
        name: {**c.to_json(), "label": labels.get(name, name)}
        for name, c in compare(samples_before, samples_after, threshold=threshold).items()
    }
    table_before = matrix(samples_before, threshold).to_json()
    table_after = matrix(samples_after, threshold).to_json()
    return {
        "before": before.id,
        "after": after.id,
        "threshold": threshold,
        "changes": changes(first, second, labels),
        "graders": graders,
        "scenarios": _scenarios(table_before, table_after),
    }


def changes(first: dict[str, Any], second: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """What differs between two batches' inputs, in words ([] when nothing we record)."""
    out = []
    if first.get("deck") != second.get("deck"):
        # Said first: every other figure compares two different agents.
        out.append(
            f"The deck under test changed: {first.get('deck') or '–'} → "
            f"{second.get('deck') or '–'}; these batches test different agents."
        )
    # A grader's edit first: the deck's hash covers its graders' and scenarios' files too, so
    # "the deck's files changed" alone read as if the deck itself had (it may not have).
    hashes_before, hashes_after = _grader_hashes(first), _grader_hashes(second)
    for grader in sorted(hashes_before.keys() & hashes_after.keys()):
        if hashes_before[grader] != hashes_after[grader]:
            out.append(
                f"The grader {labels.get(grader, grader)}'s rubric changed: a change in its "
                "figures may be the grader's, not the deck's."
            )
    if first.get("deckHash") and second.get("deckHash"):
        if first["deckHash"] != second["deckHash"]:
            out.append(
                "The files of the deck, its scenarios and its graders changed "
                f"({first['deckHash'][:8]} → {second['deckHash'][:8]})."
            )
        else:
            out.append("The files of the deck, its scenarios and its graders are the same.")
    if (first.get("model") or "") != (second.get("model") or ""):
        out.append(
            f"The model changed: {first.get('model') or '–'} → {second.get('model') or '–'}."
        )
    a, b = first["settings"], second["settings"]
    for key, name in SETTINGS.items():
        if a.get(key) != b.get(key):
            out.append(f"The {name} changed: {a.get(key)} → {b.get(key)}.")
    for key, name in (("scenarios", "scenario"), ("graders", "grader")):
        added = [x for x in b.get(key) or [] if x not in (a.get(key) or [])]
        removed = [x for x in a.get(key) or [] if x not in (b.get(key) or [])]
        if added:
            out.append(f"Only the second batch ran the {name}s {', '.join(added)}.")
        if removed:
            out.append(f"Only the first batch ran the {name}s {', '.join(removed)}.")
    return out


def _grader_hashes(batch: dict[str, Any]) -> dict[str, str]:
    return {g["grader"]: g["graderHash"] for g in batch["grades"] if g.get("graderHash")}


def _scenarios(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    first = {s["scenario"]: s["graders"] for s in before["scenarios"]}
    second = {s["scenario"]: s["graders"] for s in after["scenarios"]}
    out = []
    for scenario in [*first, *(s for s in second if s not in first)]:
        a, b = first.get(scenario, {}), second.get(scenario, {})
        out.append(
            {
                "scenario": scenario,
                "graders": {
                    g: {"before": a.get(g), "after": b.get(g)}
                    for g in [*a, *(x for x in b if x not in a)]
                },
            }
        )
    return out
