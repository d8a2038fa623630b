"""One item of the rating queue as the rater sees it: the conversation up to the rated message
(or all of it, for a conversation), the rater's own rating, and the graders' scores and
reasons, which are shown only once the rater has rated (no anchoring: docs/calibration.md,
"The rating queue")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.urls import reverse

from decks_app.grading.calibration_inputs import CONVERSATION, Inputs, scenario_name, target_key
from decks_app.grading.rate_queue import QueueItem
from decks_app.models import Feedback, Session
from decks_app.sessions.conversation import content_text, conversation

RATER_COOKIE = "gambit_rater"
# The keyboard map: a key per score (1 is -3, 4 is 0, 7 is +3), and the moves.
SCORE_KEYS = [(str(i + 1), score) for i, score in enumerate(range(-3, 4))]
MOVE_KEYS = [
    ("r", "write a reason (Enter saves it, Esc leaves the field)"),
    ("n or →", "next item"),
    ("p or ←", "previous item"),
    ("s", "skip this item (it comes back the next time the queue is loaded)"),
]


@lru_cache(maxsize=1)
def _url_patterns() -> tuple[str, str, str]:
    """The three URLs an item needs, reversed once with placeholders (ids hold no slash or
    dot, so filling them in gives what reverse() would; reverse() costs ~1 ms a call)."""
    return (
        reverse("grading:rate_item", args=["SESSION", "REF"]),
        reverse("grading:rate_submit", args=["SESSION", "REF"]),
        reverse("sessions:session", args=["SESSION"]),
    )


def item_urls(session_id: str, ref: str | None) -> dict[str, str]:
    ref = ref or CONVERSATION
    item, rating, conversation = (
        p.replace("SESSION", session_id).replace("REF", ref) for p in _url_patterns()
    )
    return {
        "url": item,
        "ratingUrl": rating,
        "conversationUrl": conversation + (f"#{ref}" if ref != CONVERSATION else ""),
    }


def queue_entry(item: QueueItem) -> dict[str, Any]:
    return {**item.to_json(), **item_urls(item.session, item.ref)}


@dataclass
class RateItem:
    """What the rater sees of one item; `graders` is None until they have rated it."""

    session: Session
    ref: str | None
    rater: str
    bubbles: list[dict[str, Any]]
    rating: dict[str, Any] | None
    graders: list[dict[str, Any]] | None
    why: str | None = None

    @property
    def target(self) -> str:
        return target_key(self.session.id, self.ref)

    @property
    def kind(self) -> str:
        return "message" if self.ref else "conversation"

    @property
    def urls(self) -> dict[str, str]:
        return item_urls(self.session.id, self.ref)

    @property
    def scenario(self) -> str | None:
        return scenario_name((self.session.meta or {}).get("scenarioPath"))

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "session": self.session.id,
            "messageRefId": self.ref,
            "kind": self.kind,
            "deck": self.session.deck_path,
            "scenario": self.scenario,
            "why": self.why,
            "rater": self.rater,
            "conversation": self.bubbles,
            "rating": self.rating,
            "graders": self.graders,
            "gradersHidden": self.graders is None,
            **self.urls,
        }


def is_rateable(session: Session, ref: str | None) -> bool:
    """A conversation with messages, or one of its assistant messages with text (a step
    that only calls tools says nothing a person could rate)."""
    messages = session.messages or []
    if ref is None:
        return bool(messages)
    for i, entry in enumerate(session.message_refs or []):
        if entry.get("id") == ref and i < len(messages):
            message = messages[i]
            return message.get("role") == "assistant" and bool(content_text(message.get("content")))
    return False


def _bubbles(session: Session, ref: str | None) -> list[dict[str, Any]]:
    """The conversation up to and including the message `ref` (all of it when None), with no
    one's rating on it."""
    out = []
    for bubble in conversation(session):
        out.append(
            {
                "kind": bubble.kind,
                "text": bubble.text,
                "name": bubble.name,
                "messageRefId": bubble.ref_id,
                "current": ref is not None and bubble.ref_id == ref,
            }
        )
        if ref is not None and bubble.ref_id == ref:
            break
    return out


def own_rating(session: Session, ref: str | None, rater: str) -> dict[str, Any] | None:
    if ref is None:
        score = session.conversation_score or {}
        if "score" in score and str(score.get("rater") or "") == rater:
            return {"score": score["score"], "reason": score.get("reason") or "", "rater": rater}
        return None
    fb = Feedback.objects.filter(session=session, message_ref_id=ref, rater=rater).first()
    return {"score": fb.score, "reason": fb.reason, "rater": rater} if fb else None


def _grader_scores(inputs: Inputs, target: str) -> list[dict[str, Any]]:
    out = []
    for version in inputs.scoring_versions():
        grades = version.grades.get(target)
        if grades:
            newest = grades[0]
            out.append(
                {
                    "grader": version.grader,
                    "label": version.label,
                    "graderHash": version.grader_hash,
                    "score": newest.score,
                    "reason": newest.reason,
                    "gradeRun": newest.run_id,
                    "repeats": [g.score for g in grades],
                }
            )
    return out


def rate_item(
    inputs: Inputs, session: Session, ref: str | None, rater: str, why: str | None = None
) -> RateItem:
    rating = own_rating(session, ref, rater)
    graders = _grader_scores(inputs, target_key(session.id, ref)) if rating else None
    return RateItem(session, ref, rater, _bubbles(session, ref), rating, graders, why)
