"""Filters of the Verify pages: intervals, corrected pass rates, verdicts, time left."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

VERDICTS = {
    "pass": "pass",
    "fail": "fail",
    "error": "error",
    "not_run": "not run",
    "empty": "–",
    "pending": "pending",
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register.filter
def interval(value: Any) -> str:
    """An interval's JSON ({low, high, ...}) as "[12–40%]"; "" without one."""
    if not isinstance(value, dict) or not _number(value.get("low")):
        return ""
    return f"[{value['low']:.0%}–{value['high']:.0%}]"


@register.filter
def verdict(value: Any) -> str:
    """A verdict as the page words it."""
    return VERDICTS.get(str(value), str(value))


@register.filter
def seconds_left(value: Any) -> str:
    """42 -> "about 42 s"; 150 -> "about 3 min"."""
    if not _number(value):
        return ""
    if value < 90:
        return f"about {max(1, round(value))} s"
    return f"about {round(value / 60)} min"


@register.filter
def scores(values: Any) -> str:
    """A cell's repeats' scores: "+1, −1" (— for an ungraded repeat)."""
    if not isinstance(values, list):
        return ""
    out = []
    for v in values:
        if _number(v):
            text = f"{v:+.2f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):+d}"
            out.append(text.replace("-", "−"))
        else:
            out.append("—")
    return ", ".join(out)


@register.filter
def label_of(labels: Any, name: Any) -> str:
    """A grader's label from a batch's `graderLabels`, else its path."""
    if isinstance(labels, dict):
        return str(labels.get(name, name))
    return str(name)


@register.filter
def points(value: Any) -> str:
    """A change of a rate in percentage points: 0.333 -> "+33 points"."""
    if not _number(value):
        return "–"
    return f"{value * 100:+.0f} points".replace("-", "−")


@register.filter
def change(value: Any) -> str:
    """A change of a mean score: 0.1667 -> "+0.17"."""
    if not _number(value):
        return "–"
    return f"{value:+.2f}".replace("-", "−")
