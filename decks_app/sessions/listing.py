"""Lists of sessions, a page at a time: the Test tab's table and the session pickers (the
Grade tab's). Filters run in the database (the status is the last run's, by a subquery), the
search is `decks_app.sessions.search`, and pages are keyset pages (`decks_app.sessions.keyset`),
so every session stays reachable and a page never shifts while sessions start."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Avg, Count, OuterRef, QuerySet, Subquery, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

from decks_app.models import Feedback, Run, Session, Workspace
from decks_app.sessions import keyset, search
from decks_app.sessions.search import Snippet

PAGE_SIZE = 50
PICKER_SIZE = 20


@dataclass
class SessionFilter:
    status: str = ""
    deck: str = ""
    q: str = ""
    before: str = ""  # keyset cursors (decks_app.sessions.keyset)
    after: str = ""


@dataclass
class SessionPage:
    """One page of rows and the cursors of the pages beside it."""

    rows: list[dict[str, Any]]
    page: keyset.Page
    snippets: dict[str, Snippet] = field(default_factory=dict)


# The first user message is the session's title when no summary model wrote one (and its
# preview when one did). Read by the database from the first few messages (a system prompt,
# an assistant's opening and a context call may come first), never the whole conversation.
OPENING_MESSAGES = 4
_OPENING = {
    f"m{i}_{part}": KT(f"messages__{i}__{part}")
    for i in range(OPENING_MESSAGES)
    for part in ("role", "content")
}
TITLE_CHARS = 80
PREVIEW_CHARS = 160


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts (which the
    database hands over as JSON text)."""
    if not isinstance(content, str) or content == "null":
        return ""  # no content (SQLite's JSON text of a null, e.g. a /v1 call with input "")
    if content.startswith("["):
        try:
            parts = json.loads(content)
        except ValueError:
            return content
        if isinstance(parts, list):
            return " ".join(str(p.get("text") or "") for p in parts if isinstance(p, dict)).strip()
    return content


def first_user_message(session: Session) -> str:
    """The first user message among the session's opening messages (annotated by
    `listed_sessions`), on one line; "" when there is none yet."""
    for i in range(OPENING_MESSAGES):
        if getattr(session, f"m{i}_role", None) == "user":
            return " ".join(_text(getattr(session, f"m{i}_content", None)).split())
    return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _last_status() -> Coalesce:
    last = Run.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-id")
    return Coalesce(Subquery(last.values("status")[:1]), Value("idle"))


def listed_sessions(workspace: Workspace, flt: SessionFilter) -> QuerySet:
    """The Test tab's sessions matching `flt` (any order; the page sets it). Grade and
    Verify sessions are listed on the Grade tab and Verify."""
    qs = (
        Session.objects.filter(workspace=workspace)
        .exclude(origin__in=("grade", "verify"))
        .defer("items", "messages", "message_refs", "meta")
        # the title a summary model wrote (decks_app.sessions.summaries), without the meta
        .annotate(summary_text=KT("meta__summary__text"), **_OPENING)
    )
    if flt.deck:
        qs = qs.filter(deck_path=flt.deck)
    if flt.status:
        qs = qs.alias(last_status=_last_status()).filter(last_status=flt.status)
    return search.search(qs, flt.q, also=("summary_text",))


def list_sessions(workspace: Workspace, flt: SessionFilter, size: int = PAGE_SIZE) -> SessionPage:
    page = keyset.paginate(
        listed_sessions(workspace, flt), size=size, before=flt.before, after=flt.after
    )
    sessions = page.rows
    # The runs' totals are added up from one query of runs rather than by a GROUP BY that
    # would copy every session row.
    last_runs: dict[str, Run] = {}
    answered: dict[str, Run] = {}  # the latest run with a model, as on the session page
    totals: dict[str, list[Any]] = {}  # session -> [tokens, cost or None, runs]
    runs = Run.objects.filter(session__in=sessions).order_by("created_at", "id")
    for run in runs.only("id", "session_id", "status", "model", "offline", "total_tokens", "cost"):
        last_runs[run.session_id] = run
        if run.model:
            answered[run.session_id] = run
        total = totals.setdefault(run.session_id, [0, None, 0])
        total[0] += run.total_tokens or 0
        if run.cost is not None:
            total[1] = (total[1] or 0) + run.cost
        total[2] += 1
    ratings = {
        row["session"]: row
        for row in Feedback.objects.filter(session__in=sessions)
        .values("session")
        .annotate(n=Count("id"), avg=Avg("score"))
    }
    snippets = search.snippets([s.id for s in sessions], flt.q)
    rows = []
    for s in sessions:
        last = last_runs.get(s.id)
        fb = ratings.get(s.id)
        rows.append(
            {
                "session": s,
                "status": last.status if last else "idle",
                "model": answered[s.id].model if s.id in answered else s.model,
                "offline": bool(s.id in answered and answered[s.id].offline),
                "tokens": totals.get(s.id, [0])[0],
                "cost": totals.get(s.id, [0, None])[1],
                "runs": totals.get(s.id, [0, None, 0])[2],
                "ratings": fb["n"] if fb else 0,
                "avg_rating": round(fb["avg"], 2) if fb else None,
                "score": (s.conversation_score or {}).get("score"),
                "summary": getattr(s, "summary_text", None) or None,
                **_title(s),
                "match": snippets.get(s.id),
            }
        )
    return SessionPage(rows=rows, page=page, snippets=snippets)


def _title(session: Session) -> dict[str, str | None]:
    """A row's names (docs/simulator.md, "Sessions list"): the title is the summary a model
    wrote, else the first user message, else the deck's label; the preview is the first user
    message when the title is the summary."""
    summary = getattr(session, "summary_text", None) or ""
    opening = first_user_message(session)
    title = summary or _clip(opening, TITLE_CHARS) or session.deck_label or session.deck_path
    preview = _clip(opening, PREVIEW_CHARS) if summary and opening else None
    return {"title": title, "preview": preview}


def session_row_json(row: dict[str, Any]) -> dict[str, Any]:
    s = row["session"]
    return {
        "id": s.id,
        "deck": s.deck_path,
        "deckLabel": s.deck_label,
        "origin": s.origin,
        "status": row["status"],
        "model": row["model"],
        "offline": row["offline"],
        "tokens": row["tokens"],
        "cost": row["cost"],
        "runs": row["runs"],
        "ratings": row["ratings"],
        "averageRating": row["avg_rating"],
        "conversationScore": row["score"],
        # a short title written after the first exchange (null until then, or without a
        # summary model: docs/simulator.md, "Session titles")
        "summary": row.get("summary"),
        # what the list shows as the session's name: the summary, else the first user message,
        # else the deck's label; and the first user message under a summary
        "title": row.get("title"),
        "preview": row.get("preview"),
        # where the search matched the conversation: the line, and the matched ranges
        "match": row["match"].to_json() if row.get("match") else None,
        "createdAt": s.created_at.isoformat(),
    }


def gradable_sessions(workspace: Workspace, q: str = "") -> QuerySet:
    """The sessions the Grade tab can grade: with a conversation, not a grading itself."""
    qs = Session.objects.filter(workspace=workspace, messages__isnull=False).exclude(origin="grade")
    return search.search(qs.defer("items", "messages", "message_refs", "meta"), q)


def pick_sessions(
    qs: QuerySet, *, q: str = "", before: str = "", after: str = "", size: int = PICKER_SIZE
) -> tuple[keyset.Page, dict[str, Snippet]]:
    """A picker's page of `qs` (already searched for `q`) and where `q` matched."""
    page = keyset.paginate(qs, size=size, before=before, after=after)
    return page, search.snippets([s.id for s in page.rows], q)
