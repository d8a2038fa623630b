"""Ratings of assistant messages (-3..+3 with a reason), session notes and the
conversation score: persisted, listed, and exported inside the SavedState."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from decks_app.models import Feedback, Run, Session


class FeedbackError(ValueError):
    pass


def _assistant_ref(session: Session, ref_id: str) -> bool:
    messages = session.messages or []
    for i, ref in enumerate(session.message_refs or []):
        if ref.get("id") == ref_id and i < len(messages):
            return messages[i].get("role") == "assistant"
    return False


MAX_REASON_CHARS = 10_000
MAX_NOTES_CHARS = 100_000


def parse_score(value: Any) -> int | None:
    """None (clear) for an empty value; else a whole number from -3 to 3. Anything else is
    refused with a message (never rounded or clamped into range)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise FeedbackError(
            f"score must be a whole number from -3 to 3, not {text[:20]!r}"
        ) from None
    if not -3 <= number <= 3:
        raise FeedbackError(f"score must be a whole number from -3 to 3, not {number}")
    return number


def clean_text(value: str, *, what: str, limit: int) -> str:
    """User text as given, or a FeedbackError naming what is wrong with it."""
    if "\x00" in value:
        raise FeedbackError(f"the {what} contains a NUL character")
    if len(value) > limit:
        raise FeedbackError(f"the {what} is longer than {limit:,} characters ({len(value):,})")
    return value


MAX_RATER_CHARS = 80


def clean_rater(value: str | None) -> str:
    """A rater's name as stored: trimmed, at most MAX_RATER_CHARS, no control characters
    ("" is a rating without a name)."""
    name = (value or "").strip()
    if len(name) > MAX_RATER_CHARS:
        raise FeedbackError(f"the rater name is longer than {MAX_RATER_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise FeedbackError("the rater name contains a control character")
    return name


def _run_that_said(session: Session, ref_id: str) -> Run | None:
    """The run whose turn added the message: the last one that started (`turn_base.refs`)
    before the message's place in the conversation; the session's latest run when no run
    recorded where its turn started (before, always the latest: a rating of the first
    reply named the fourth turn's run)."""
    refs = [r.get("id") for r in session.message_refs or []]
    runs = list(Run.objects.filter(session=session).order_by("created_at").only("id", "turn_base"))
    if ref_id in refs:
        place = refs.index(ref_id)
        started = [r for r in runs if (r.turn_base or {}).get("refs", place + 1) <= place]
        if started:
            return started[-1]
    return runs[-1] if runs else None


def set_feedback(
    session: Session, ref_id: str, score: int | None, reason: str | None, *, rater: str = ""
) -> Feedback | None:
    """Save `rater`'s rating (None clears it). `reason` None keeps the previous reason."""
    if not _assistant_ref(session, ref_id):
        raise FeedbackError("This message can't receive feedback.")
    rater = clean_rater(rater)
    existing = Feedback.objects.filter(session=session, message_ref_id=ref_id, rater=rater).first()
    if score is None and reason is None:
        if existing:
            existing.delete()
        return None
    if existing is None:
        if score is None:
            raise FeedbackError("rate the message before giving a reason")
        return Feedback.objects.create(
            session=session,
            message_ref_id=ref_id,
            run=_run_that_said(session, ref_id),
            score=score,
            reason=clean_text(reason or "", what="reason", limit=MAX_REASON_CHARS),
            rater=rater,
        )
    if score is not None:
        existing.score = score
    if reason is not None:
        existing.reason = clean_text(reason, what="reason", limit=MAX_REASON_CHARS)
    existing.save()
    return existing


def set_notes(session: Session, text: str) -> None:
    text = clean_text(text, what="notes", limit=MAX_NOTES_CHARS)
    session.notes = {"text": text, "updatedAt": timezone.now().isoformat()}
    session.save(update_fields=["notes", "updated_at"])


def set_conversation_score(
    session: Session, score: int | None, *, rater: str | None = None, reason: str | None = None
) -> None:
    """The session's one conversation score; the rating queue also records who gave it and
    why (a later score by anyone replaces it: conversations have one score each)."""
    if score is None:
        session.conversation_score = None
    else:
        entry: dict[str, object] = {"score": score, "updatedAt": timezone.now().isoformat()}
        if rater:
            entry["rater"] = clean_rater(rater)
        if reason:
            entry["reason"] = clean_text(reason, what="reason", limit=MAX_REASON_CHARS)
        session.conversation_score = entry
    session.save(update_fields=["conversation_score", "updated_at"])
