"""Template filters: sanitised Markdown and pretty or compact JSON (all escape model text)."""

from __future__ import annotations

import json
from typing import Any

import markdown as md
import nh3
from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "hr",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


@register.filter
def markdown(text: Any) -> str:
    """Markdown rendered from *escaped* text, then sanitised: raw HTML in a model reply
    (`<script>`, `<img onerror>`) shows as text and never runs."""
    if text is None:
        return ""
    html = md.markdown(escape(str(text)), extensions=["fenced_code", "tables"])
    clean = nh3.clean(html, tags=_TAGS, url_schemes={"http", "https", "mailto"})
    return mark_safe(clean)


@register.filter
def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False, indent=2)


@register.filter
def compact_json(value: Any) -> str:
    """One-line JSON (autoescaped like any other string)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@register.filter
def signed(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:+.2f}"
    try:
        n = int(value)
    except (TypeError, ValueError):
        return str(value)
    return f"+{n}" if n > 0 else str(n)


@register.filter
def percent(value: Any) -> str:
    """0.875 -> "88%"; None -> "–" (a figure that cannot be computed is never shown as 0)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:.0%}"


@register.filter
def score_class(value: Any) -> str:
    """The colour class of a -3..+3 score badge."""
    from decks_app.grading.grades import score_class as classify

    return classify(value)


@register.simple_tag
def score_range() -> list[int]:
    return [-3, -2, -1, 0, 1, 2, 3]
