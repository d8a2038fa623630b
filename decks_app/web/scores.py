"""How a -3..+3 score is coloured on every page (the `score_class` filter, grade cards)."""

from __future__ import annotations

from typing import Any


def score_class(score: Any) -> str:
    """The colour class of a -3..+3 score badge."""
    if not isinstance(score, int | float) or isinstance(score, bool):
        return "score-none"
    if score >= 2:
        return "score-high"
    if score > 0:
        return "score-good"
    if score == 0:
        return "score-zero"
    if score > -2:
        return "score-low"
    return "score-bad"
