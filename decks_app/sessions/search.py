"""Searching sessions: their id, deck label, model and title, and the text of their
conversation through the database's own full-text index (FTS5 on SQLite, a `tsvector` GIN
index on PostgreSQL; decks_app/migrations/0006_session_search.py keeps both).

Every word of the query must occur (a word typed so far matches as a prefix, so the search
works as you type); a word is letters and digits only, so nothing typed reaches either
database's query syntax. The matching line comes back as a snippet whose highlights are
`<mark>`s around escaped text (`Snippet.html`); the JSON twin has the plain line and the
highlighted ranges (docs/simulator.md, "Sessions list").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WORD = re.compile(r"\w+", re.UNICODE)
MAX_WORDS = 8
START, STOP = "\ue000", "\ue001"  # private-use characters around a highlight
SNIPPET_CHARS = 220


def words(q: str) -> list[str]:
    return WORD.findall(q or "")[:MAX_WORDS]


def has_index() -> bool:
    return connection.vendor in ("sqlite", "postgresql")


def _match_sqlite(ws: list[str]) -> str:
    return " ".join(f'"{w}"*' for w in ws)  # \w+ holds no quote: each word a prefix phrase


def _match_pg(ws: list[str]) -> str:
    return " & ".join(f"{w}:*" for w in ws)


def conversation_match(ws: list[str]) -> RawSQL | None:
    """A boolean expression: the session's conversation holds every word (None without an
    index on this database)."""
    if not ws:
        return None
    if connection.vendor == "sqlite":
        return RawSQL(
            "decks_app_session.id IN (SELECT k.session_id FROM decks_app_session_search_key k"
            " JOIN decks_app_session_search s ON s.rowid = k.id"
            " WHERE decks_app_session_search MATCH %s)",
            [_match_sqlite(ws)],
            output_field=BooleanField(),
        )
    if connection.vendor == "postgresql":
        # A subquery of its own, so the GIN index answers it even when the outer query ORs
        # it with the cheap matches on id, label and model.
        return RawSQL(
            "decks_app_session.id IN (SELECT s.id FROM decks_app_session s WHERE"
            " to_tsvector('simple'::regconfig, gambit_session_text(s.messages, s.items))"
            " @@ to_tsquery('simple'::regconfig, %s))",
            [_match_pg(ws)],
            output_field=BooleanField(),
        )
    return None


def search(qs: QuerySet, q: str, *, also: tuple[str, ...] = ()) -> QuerySet:
    """`qs` narrowed to the sessions whose id, deck label, model or any field in `also`
    contains `q`, or whose conversation holds every word of it."""
    q = (q or "").strip()
    if not q:
        return qs
    plain = Q(id__icontains=q) | Q(deck_label__icontains=q) | Q(model__icontains=q)
    for name in also:
        plain |= Q(**{f"{name}__icontains": q})
    match = conversation_match(words(q))
    if match is None:
        return qs.filter(plain)
    return qs.alias(in_conversation=match).filter(plain | Q(in_conversation=True))


@dataclass(frozen=True)
class Snippet:
    """The line of a conversation where the words matched, and where (character ranges)."""

    text: str
    marks: list[tuple[int, int]]

    def html(self) -> SafeString:
        """The line escaped, each match in a `<mark>` (the only markup in it)."""
        out: list[str] = []
        at = 0
        for start, end in self.marks:
            out.append(escape(self.text[at:start]))
            out.append(f"<mark>{escape(self.text[start:end])}</mark>")
            at = end
        out.append(escape(self.text[at:]))
        return mark_safe("".join(out))  # every piece was escaped above

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "highlights": [list(m) for m in self.marks]}


def snippets(session_ids: list[str], q: str) -> dict[str, Snippet]:
    """The matching line of each of these sessions' conversations: the database marks the
    matches (FTS5 `highlight`, PostgreSQL `ts_headline`), `_line` keeps the first marked line."""
    ws = words(q)
    if not ws or not session_ids:
        return {}
    marks = (START, STOP)
    with connection.cursor() as cursor:
        holders = ", ".join(["%s"] * len(session_ids))
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT k.session_id, highlight(decks_app_session_search, 0, %s, %s)"
                " FROM decks_app_session_search s"
                " JOIN decks_app_session_search_key k ON k.id = s.rowid"
                f" WHERE decks_app_session_search MATCH %s AND k.session_id IN ({holders})",
                [*marks, _match_sqlite(ws), *session_ids],
            )
        elif connection.vendor == "postgresql":
            # The first line holding any of the words, highlighted whole (ts_headline over
            # that line only, not over the whole conversation).
            options = f"StartSel={START}, StopSel={STOP}, HighlightAll=true"
            cursor.execute(
                "SELECT s.id, (SELECT ts_headline('simple'::regconfig, line, q, %s)"
                " FROM regexp_split_to_table("
                "gambit_session_text(s.messages, s.items), E'\\n') AS line"
                " WHERE to_tsvector('simple'::regconfig, line) @@ q LIMIT 1)"
                " FROM decks_app_session s, to_tsquery('simple'::regconfig, %s) AS q"
                f" WHERE s.id IN ({holders})",
                [options, " | ".join(f"{w}:*" for w in ws), *session_ids],
            )
        else:
            return {}
        found = {sid: _line(text) for sid, text in cursor.fetchall() if text}
    return {sid: snip for sid, snip in found.items() if snip.marks}


def _line(marked: str) -> Snippet:
    """The line holding the first highlight, with its highlights as ranges (the markers
    removed; unbalanced markers ignored)."""
    lines = marked.split("\n")
    line = next((ln for ln in lines if START in ln), lines[0])
    text, marks, opened = [], [], None
    size = 0
    for ch in line:
        if ch == START:
            opened = size
        elif ch == STOP:
            if opened is not None and size > opened:
                marks.append((opened, size))
            opened = None
        else:
            text.append(ch)
            size += 1
    plain = "".join(text).rstrip("\r")
    if len(plain) > SNIPPET_CHARS:  # keep the first highlight in view
        first = marks[0][0] if marks else 0
        start = max(0, min(first - 60, len(plain) - SNIPPET_CHARS))
        plain = plain[start : start + SNIPPET_CHARS]
        marks = [
            (a - start, min(b - start, SNIPPET_CHARS))
            for a, b in marks
            if a >= start and a < start + SNIPPET_CHARS
        ]
    return Snippet(plain, marks)
