"""Times as people read them: "3 min ago", with the exact time one hover away.

`reltime` (the template filter of the same name in `gambit_ui`) renders
`<time datetime="2026-11-26T23:20:05+00:00" title="Thu 26 Nov 2026, 23:20:05 UTC">3 min
ago</time>`: the page never shows a raw ISO string, and the machine-readable value stays in
the markup. It takes a datetime, milliseconds since the Unix epoch (trace events' `ts`) or
an ISO 8601 string; anything else renders as "—".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

__all__ = ["as_datetime", "relative", "reltime_html"]


def as_datetime(value: Any) -> datetime | None:
    """A timezone-aware datetime from a datetime, epoch milliseconds or an ISO string."""
    if isinstance(value, datetime):
        return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return as_datetime(parsed)
    return None


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def relative(moment: datetime, now: datetime | None = None) -> str:
    """As a phrase: "just now", "42 s ago", "5 min ago", "3 h ago", "yesterday", "4 days ago", then the
    date ("26 Nov", or "26 Nov 2025" in another year); the future reads "in 5 min"."""
    now = now or timezone.now()
    delta = now - moment
    future = delta < timedelta(0)
    seconds = int(abs(delta).total_seconds())
    if seconds < 10:
        return "just now"
    if seconds < 60:
        span = f"{seconds} s"
    elif seconds < 3600:
        span = f"{seconds // 60} min"
    elif seconds < 86400:
        span = f"{seconds // 3600} h"
    elif seconds < 7 * 86400:
        days = seconds // 86400
        if days == 1:
            return "tomorrow" if future else "yesterday"
        span = _plural(days, "day")
    else:
        local = timezone.localtime(moment)
        same_year = local.year == timezone.localtime(now).year
        return f"{local.day} {local:%b}" + ("" if same_year else f" {local.year}")
    return f"in {span}" if future else f"{span} ago"


def exact(moment: datetime) -> str:
    local = timezone.localtime(moment)
    return f"{local:%a} {local.day} {local:%b %Y, %H:%M:%S} {local.tzname() or ''}".rstrip()


def reltime_html(value: Any, now: datetime | None = None) -> SafeString:
    moment = as_datetime(value)
    if moment is None:
        return format_html("{}", "—")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(timespec="seconds"),
        exact(moment),
        relative(moment, now),
    )
