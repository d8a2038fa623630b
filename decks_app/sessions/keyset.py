"""Keyset pagination of session lists, newest first: a page ends at a cursor (the last
row's `created_at` and `id`), and the next page is what lies strictly beyond it. Unlike an
offset, a session started meanwhile shifts nothing: "older" shows exactly the rows after the
last one seen, "newer" the rows before the first (docs/simulator.md, "Sessions list").

A cursor is opaque in the URL (`?before=` / `?after=`): the row's time and id, base64url. A
cursor that does not decode is `BadCursor` (the view answers 400 with a link to the newest).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class Cursor:
    created_at: datetime
    id: str

    def encode(self) -> str:
        raw = f"{self.created_at.isoformat()}|{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            if len(token) > 200:
                raise ValueError("too long")
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            when, _, ident = raw.partition("|")
            created = datetime.fromisoformat(when)
        except (ValueError, UnicodeDecodeError, binascii.Error):
            raise BadCursor("this page link is broken; start again from the newest") from None
        if created.tzinfo is None or not ID.fullmatch(ident):
            raise BadCursor("this page link is broken; start again from the newest")
        return cls(created, ident)

    @classmethod
    def of(cls, row: Any) -> Cursor:
        return cls(row.created_at, row.id)


@dataclass
class Page:
    """One page of rows (newest first) and the cursors of the pages beside it (None when
    there is nothing older, or nothing newer)."""

    rows: list[Any]
    older: str | None
    newer: str | None

    def to_json(self) -> dict[str, Any]:
        return {"older": self.older, "newer": self.newer, "size": len(self.rows)}


class PageLinks:
    """The Older / Newer links of a list page holding one keyset `Page` (the sessions list,
    the Grade tab's picker, the Verify batches): a subclass gives `keyset_page` and
    `page_url(fmt, **cursor)`, its list's URL (filters kept) at a cursor."""

    @property
    def keyset_page(self) -> Page:
        raise NotImplementedError

    def page_url(self, fmt: str | None = None, **cursor: str | None) -> str:
        raise NotImplementedError

    @property
    def older_url(self) -> str | None:
        older = self.keyset_page.older
        return self.page_url(before=older) if older else None

    @property
    def newer_url(self) -> str | None:
        newer = self.keyset_page.newer
        return self.page_url(after=newer) if newer else None

    def page_json(self) -> dict[str, Any]:
        """The twin's `page`: pass `older` as ?before= (or `newer` as ?after=) for the next
        one, or follow its URLs."""
        page = self.keyset_page
        return {
            **page.to_json(),
            "olderUrl": self.page_url("json", before=page.older) if page.older else None,
            "newerUrl": self.page_url("json", after=page.newer) if page.newer else None,
        }


def paginate(qs: QuerySet, *, size: int, before: str = "", after: str = "") -> Page:
    """The page of `qs` (any order is replaced by newest first) after `before` or before
    `after` (cursors from an earlier Page), or the newest page."""
    if before:
        at = Cursor.decode(before)
        older = Q(created_at__lt=at.created_at) | Q(created_at=at.created_at, id__lt=at.id)
        rows = list(qs.filter(older).order_by("-created_at", "-id")[: size + 1])
        more, rows = len(rows) > size, rows[:size]
        return Page(rows, Cursor.of(rows[-1]).encode() if more else None, _edge(rows, True))
    if after:
        at = Cursor.decode(after)
        newer = Q(created_at__gt=at.created_at) | Q(created_at=at.created_at, id__gt=at.id)
        rows = list(qs.filter(newer).order_by("created_at", "id")[: size + 1])
        if len(rows) <= size:  # back at the top: the newest page, full
            return paginate(qs, size=size)
        rows = rows[:size]
        rows.reverse()
        return Page(rows, _edge(rows, False), Cursor.of(rows[0]).encode())
    rows = list(qs.order_by("-created_at", "-id")[: size + 1])
    more, rows = len(rows) > size, rows[:size]
    return Page(rows, Cursor.of(rows[-1]).encode() if more else None, None)


def _edge(rows: list[Any], first: bool) -> str | None:
    """The cursor back towards where the reader came from (the page exists: they saw it)."""
    if not rows:
        return None
    return Cursor.of(rows[0] if first else rows[-1]).encode()
