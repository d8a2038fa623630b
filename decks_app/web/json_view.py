"""JSON as a collapsible, copyable tree, rendered on the server (docs/decisions.md, "The
trace view's JSON viewer"): nested `<details>` that open and close without a script, a
"Raw" block with the pretty-printed text, and Copy / Expand all / Collapse all buttons
(static/decks_app/trace.js). Every key and value is HTML-escaped.

The first levels are open; a big object or array starts closed. A value with more than
`MAX_NODES` entries in all is cut in the tree (the Raw block and Copy keep it whole).
"""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

__all__ = ["json_view_html"]

OPEN_DEPTH = 2  # levels open at first
OPEN_MAX_CHILDREN = 30  # a container with more entries starts closed
MAX_NODES = 2000


class _Budget:
    """How many more entries the tree may render."""

    def __init__(self, left: int) -> None:
        self.left = left


def _scalar(value: Any) -> str:
    if value is None:
        return '<span class="jv-null">null</span>'
    if isinstance(value, bool):
        return f'<span class="jv-bool">{"true" if value else "false"}</span>'
    if isinstance(value, int | float):
        return f'<span class="jv-num">{escape(json.dumps(value))}</span>'
    text = json.dumps(str(value), ensure_ascii=False)
    long = " jv-long" if len(text) > 120 or "\\n" in text else ""
    return f'<span class="jv-str{long}">{escape(text)}</span>'


def _key(key: Any, is_index: bool) -> str:
    if key is None:
        return ""
    css = "jv-index" if is_index else "jv-key"
    shown = key if is_index else json.dumps(str(key), ensure_ascii=False)
    return f'<span class="{css}">{escape(shown)}</span>: '


def _node(value: Any, key: Any, is_index: bool, depth: int, budget: _Budget, out: list[str]):
    if not isinstance(value, dict | list):
        out.append(f"<li>{_key(key, is_index)}{_scalar(value)}</li>")
        return
    entries = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    brackets = "{}" if isinstance(value, dict) else "[]"
    if not entries:
        out.append(f'<li>{_key(key, is_index)}<span class="jv-punct">{brackets}</span></li>')
        return
    noun = "key" if isinstance(value, dict) else "item"
    count = f"{len(entries)} {noun}{'' if len(entries) == 1 else 's'}"
    is_open = depth < OPEN_DEPTH and len(entries) <= OPEN_MAX_CHILDREN
    out.append(
        f"<li><details{' open' if is_open else ''}><summary>{_key(key, is_index)}"
        f'<span class="jv-punct">{brackets[0]}…{brackets[1]}</span> '
        f'<span class="jv-count">{count}</span></summary><ul class="jv-children">'
    )
    for index, (child_key, child) in enumerate(entries):
        if budget.left <= 0:
            more = len(entries) - index
            out.append(f'<li class="jv-more">… {more} more (in Raw, and in Copy)</li>')
            break
        budget.left -= 1
        _node(child, child_key, isinstance(value, list), depth + 1, budget, out)
    out.append("</ul></details></li>")


def json_view_html(value: Any, label: str = "JSON") -> SafeString:
    """The viewer for `value` (any JSON data; a string holding JSON is shown parsed)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    pretty = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    out = [
        f'<div class="json-view" data-json-view aria-label="{escape(label)}" role="group">',
        '<div class="json-tools">'
        '<button type="button" class="small" data-json-copy>Copy</button>'
        '<button type="button" class="small" data-json-expand>Expand all</button>'
        '<button type="button" class="small" data-json-collapse>Collapse all</button>'
        '<span class="json-status meta" role="status"></span></div>',
        '<ul class="json-tree">',
    ]
    _node(value, None, False, 0, _Budget(MAX_NODES), out)
    out.append("</ul>")
    out.append(
        '<details class="json-raw"><summary>Raw</summary>'
        f'<pre class="json-text">{escape(pretty)}</pre></details></div>'
    )
    return mark_safe("".join(out))
