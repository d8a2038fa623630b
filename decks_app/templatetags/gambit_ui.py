"""Template filters: sanitised Markdown and pretty or compact JSON (all escape model text)."""

from __future__ import annotations

import html
import json
from typing import Any

import markdown as md
import nh3
from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from decks_app.web.json_view import json_view_html
from decks_app.web.routes import query_url
from decks_app.web.scores import score_class as classify_score
from decks_app.web.times import reltime_html

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
    return classify_score(value)


@register.filter
def counts(value: Any) -> str:
    """{"timeout": 2, "parse": 1} -> "2 timeout, 1 parse"; empty -> "0"."""
    if not isinstance(value, dict) or not value:
        return "0"
    return ", ".join(f"{n} {kind}" for kind, n in value.items())


@register.filter
def rates(value: Any) -> str:
    """{-1: 0.25, 2: 0.75} -> "-1 25%, +2 75%" (base rates of a score scale)."""
    if not isinstance(value, dict):
        return ""
    return ", ".join(f"{signed(k)} {percent(v)}" for k, v in value.items())


@register.simple_tag
def score_range() -> list[int]:
    return [-3, -2, -1, 0, 1, 2, 3]


# ---------------------------------------------------------------- URLs (no path typed by hand)


@register.simple_tag
def url_query(viewname: str, *args: Any, **query: Any) -> str:
    """`{% url_query 'building:build_file' path=f.path deck=deck %}`: the route's own
    arguments positional, the rest as the query string (encoded)."""
    return query_url(viewname, args, **query)


@register.filter
def ask_url(text: Any, deck: Any) -> str:
    """ "Add to chat": the Build tab's editor of `deck` with `text` put in the assistant's
    box. Used as `{% filter ask_url:deck %}…{% endfilter %}`: the block arrives
    HTML-escaped, so it is unescaped before it is encoded (the box shows the text as said)."""
    ask = html.unescape(str(text)).strip()
    return query_url("building:build_file", path=deck, deck=deck, ask=ask)


@register.simple_tag(takes_context=True)
def twin_url(context: template.Context) -> str:
    """The JSON twin of the page being rendered (same query string), or "" when the page
    has none (its route is not a `page_route`)."""
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    if request is None or match is None or not match.view_name:
        return ""
    if "(?P<fmt>json)" not in match.route:
        return ""
    try:
        url = reverse(match.view_name, args=match.args, kwargs={**match.kwargs, "fmt": "json"})
    except NoReverseMatch:
        return ""
    query = request.META.get("QUERY_STRING", "")
    return f"{url}?{query}" if query else url


@register.simple_tag
def socket_url(name: str, **kwargs: Any) -> str:
    """A websocket route's path by name (decks_app/routing.py), like `{% url %}` for pages."""
    return reverse(name, kwargs=kwargs, urlconf="decks_app.routing")


@register.filter
def reltime(value: Any) -> str:
    """`{{ session.created_at|reltime }}` -> `<time datetime=... title="exact time">3 min
    ago</time>`; also takes epoch milliseconds (a trace event's `ts`) or an ISO string."""
    return reltime_html(value)


@register.simple_tag
def json_view(value: Any, label: str = "JSON") -> str:
    """`{% json_view node.result "Result" %}`: JSON as a collapsible tree with Copy."""
    return json_view_html(value, label)
