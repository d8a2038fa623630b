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


def parse_score(value: Any) -> int | None:
    """None (clear) for an empty value; else an integer in -3..3 (rounded, clamped)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise FeedbackError("score must be a number from -3 to 3") from exc
    if number != number:  # NaN
        raise FeedbackError("score must be a number from -3 to 3")
    return max(-3, min(3, round(number)))


def set_feedback(
    session: Session, ref_id: str, score: int | None, reason: str | None
) -> Feedback | None:
    """Save a rating (None clears it). `reason` None keeps the previous reason."""
    if not _assistant_ref(session, ref_id):
        raise FeedbackError("This message can't receive feedback.")
    existing = Feedback.objects.filter(session=session, message_ref_id=ref_id).first()
    if score is None and reason is None:
        if existing:
            existing.delete()
        return None
    if existing is None:
        if score is None:
            raise FeedbackError("rate the message before giving a reason")
        last_run = Run.objects.filter(session=session).order_by("-created_at").first()
        return Feedback.objects.create(
            session=session,
            message_ref_id=ref_id,
            run=last_run,
            score=score,
            reason=(reason or "")[:10_000],
        )
    if score is not None:
        existing.score = score
    if reason is not None:
        existing.reason = reason[:10_000]
    existing.save()
    return existing


def set_notes(session: Session, text: str) -> None:
    session.notes = {"text": text[:100_000], "updatedAt": timezone.now().isoformat()}
    session.save(update_fields=["notes", "updated_at"])


def set_conversation_score(session: Session, score: int | None) -> None:
    session.conversation_score = (
        None if score is None else {"score": score, "updatedAt": timezone.now().isoformat()}
    )
    session.save(update_fields=["conversation_score", "updated_at"])
