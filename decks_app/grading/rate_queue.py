"""The rating queue: which assistant messages and conversations most need a human, for one rater.

In this order (docs/calibration.md, "The rating queue"):

1. **disagreement**: items other people rated where a grader's score is furthest from their
   (mean) rating; a second opinion settles whether the grader or the rating is off, and gives
   Krippendorff's alpha items rated twice;
2. **inconsistent**: items a grader scored differently on repeats, widest spread first;
3. **unrated scenario**: items of scenarios that no one has rated anything of, one scenario
   after another (each such scenario gets an item early);
4. **unrated**: graded items no one rated yet, which become calibration pairs once rated.

Items the rater has already rated are left out; each item appears once, in its first tier. A
grader's score is the mean of its current version's repeats (else its newest version's), as
on the calibration page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decks_app.grading.calibration_inputs import Inputs

LIMIT = 200
WHY = {
    "disagreement": "a grader and the people who rated it disagree",
    "inconsistent": "a grader gave it different scores on repeats",
    "unrated scenario": "no one has rated anything of its scenario yet",
    "unrated": "graded, not rated by anyone yet",
}


@dataclass(frozen=True)
class QueueItem:
    target: str
    session: str
    ref: str | None  # None: the whole conversation
    tier: str
    detail: str  # the figures behind the choice: shown once the rater has rated

    @property
    def why(self) -> str:
        """Why it is served, without any score (no anchoring)."""
        return WHY[self.tier]

    @property
    def kind(self) -> str:
        return "message" if self.ref else "conversation"

    @property
    def ref_or_conversation(self) -> str:
        return self.ref or "conversation"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "session": self.session,
            "messageRefId": self.ref,
            "kind": self.kind,
            "tier": self.tier,
            "why": self.why,
            "detail": self.detail,
        }


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace(".0", "")


def build_queue(inputs: Inputs, rater: str) -> list[QueueItem]:
    """Everything `rater` has still to rate, most useful first (the page shows the first
    LIMIT and says how many there are in all)."""
    human = inputs.human()
    mine = inputs.rated_by(rater)
    versions = inputs.scoring_versions()
    seen: set[str] = set()
    out: list[QueueItem] = []

    def add(target: str, tier: str, detail: str) -> None:
        if target in seen or target in mine or target not in inputs.session_of:
            return
        seen.add(target)
        session, ref = inputs.session_of[target], inputs.ref_of[target]
        out.append(QueueItem(target, session, ref, tier, detail))

    # 1. disagreement, largest first
    gaps: list[tuple[float, str, str]] = []
    for v in versions:
        for target, score in v.scores().items():
            if target in human and abs(score - human[target]) >= 1:
                gap = abs(score - human[target])
                gaps.append(
                    (
                        gap,
                        target,
                        f"{v.label} scored {_signed(score)}, people rated {_signed(human[target])}",
                    )
                )
    for _, target, why in sorted(gaps, key=lambda g: (-g[0], g[1])):
        add(target, "disagreement", why)
    # 2. least self-consistent, widest spread first
    spreads: list[tuple[float, str, str]] = []
    for v in versions:
        for target, grades in v.grades.items():
            scores = [g.score for g in grades]
            if len(scores) >= 2 and max(scores) - min(scores) >= 1:
                why = (
                    f"{v.label} scored it {len(scores)} times, from {_signed(min(scores))} "
                    f"to {_signed(max(scores))}"
                )
                spreads.append((max(scores) - min(scores), target, why))
    for _, target, why in sorted(spreads, key=lambda s: (-s[0], s[1])):
        add(target, "inconsistent", why)
    # 3. scenarios with no rating at all: round-robin over them, graded items first
    graded = {t for v in versions for t in v.grades}
    rated_scenarios = {inputs.scenario_of.get(inputs.session_of.get(t, "")) for t in human}
    unrated_scenarios: dict[str, list[str]] = {}
    for session, scenario in inputs.scenario_of.items():
        if scenario not in rated_scenarios:  # not one rating on any of its conversations
            unrated_scenarios.setdefault(scenario, []).append(session)
    if unrated_scenarios:
        per_scenario: dict[str, list[str]] = {}
        for target, session in inputs.session_of.items():
            found = inputs.scenario_of.get(session)
            if (
                found is not None
                and found in unrated_scenarios
                and (target in graded or target in inputs.message_targets)
            ):
                per_scenario.setdefault(found, []).append(target)
        for targets in per_scenario.values():
            targets.sort(key=lambda t: (t not in graded, t))
        depth = max((len(t) for t in per_scenario.values()), default=0)
        for i in range(depth):
            for scenario in sorted(per_scenario):
                if i < len(per_scenario[scenario]):
                    add(
                        per_scenario[scenario][i],
                        "unrated scenario",
                        f"no one has rated anything of scenario {scenario!r} yet",
                    )
    # 4. graded, not rated by anyone
    for target in sorted(graded):
        if target not in human:
            add(target, "unrated", "graded, not rated by anyone yet")
    return out
