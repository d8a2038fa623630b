"""The conversation as the session page shows it: things said as bubbles, and between
them one collapsed Activity block per turn (tool calls with their results, reasoning).

Read from a session's saved messages (and its responses items, for reasoning), never from
the trace: it is what the deck's state says happened. All text is escaped by the templates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from decks_app.models import Feedback, Session

BLOCKS_SHOWN = 60  # conversation blocks the session page shows; earlier ones load on demand


@dataclass
class Bubble:
    """One row of the conversation as shown (escaped in templates)."""

    kind: str  # user | assistant | tool_call | tool_result | context
    text: str
    ref_id: str | None = None
    name: str | None = None
    feedback: Feedback | None = None
    status: str | None = None  # "interrupted" for a reply cut off by a crash
    call_id: str | None = None  # pairs a tool_call with its tool_result

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "messageRefId": self.ref_id,
            "name": self.name,
            "feedback": feedback_dict(self.feedback) if self.feedback else None,
            "status": self.status,
        }


def feedback_dict(fb: Feedback) -> dict[str, Any]:
    return {
        "id": fb.feedback_id,
        "messageRefId": fb.message_ref_id,
        "runId": fb.run_id,
        "score": fb.score,
        "reason": fb.reason,
        "rater": fb.rater,
        "createdAt": fb.created_at.isoformat() if fb.created_at else None,
    }


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("refusal") or ""))
            else:
                parts.append(str(part))
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def conversation(session: Session) -> list[Bubble]:
    messages = session.messages or []
    refs = session.message_refs or []
    # The Test tab shows and edits the unnamed rating; a message rated only in the rating
    # queue shows its newest named rating (docs/calibration.md, "Raters").
    feedback: dict[str | None, Feedback] = {
        fb.message_ref_id: fb
        for fb in sorted(session.feedback.all(), key=lambda fb: (fb.rater == "", fb.created_at))
    }
    bubbles: list[Bubble] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        ref = refs[i]["id"] if i < len(refs) else None
        status = refs[i].get("status") if i < len(refs) else None
        if role == "user":
            bubbles.append(Bubble("user", content_text(message.get("content")), ref))
        elif role == "assistant":
            text = content_text(message.get("content"))
            if text:
                bubbles.append(
                    Bubble("assistant", text, ref, feedback=feedback.get(ref), status=status)
                )
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                name = fn.get("name")
                if name in ("gambit_context", "gambit_init"):
                    continue  # its result is shown
                bubbles.append(
                    Bubble(
                        "tool_call", fn.get("arguments") or "", name=name, call_id=call.get("id")
                    )
                )
        elif role == "tool":
            name = message.get("name")
            kind = "context" if name in ("gambit_context", "gambit_init") else "tool_result"
            bubbles.append(
                Bubble(
                    kind,
                    content_text(message.get("content")),
                    name=name,
                    call_id=message.get("tool_call_id"),
                )
            )
    return bubbles


# The synthetic calls the runtime makes for itself: shown only when an activity block is
# opened further (context injection and the completion envelope after each action;
# docs/decks.md, "The conversation and the synthetic tools"). gambit_respond and gambit_end
# are the deck's own decisions and stay visible.
INTERNAL_TOOLS = frozenset({"gambit_context", "gambit_init", "gambit_complete"})


@dataclass
class ActivityCall:
    name: str
    arguments: str = ""
    result: str | None = None
    internal: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "internal": self.internal,
        }


@dataclass
class Activity:
    """Everything between two things said (tool calls with their results, reasoning), shown
    as one collapsed block per turn instead of a bubble each."""

    calls: list[ActivityCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    kind: str = "activity"

    @property
    def visible(self) -> list[ActivityCall]:
        return [c for c in self.calls if not c.internal]

    @property
    def internal(self) -> list[ActivityCall]:
        return [c for c in self.calls if c.internal]

    @property
    def internal_names(self) -> str:
        """`gambit_context, gambit_complete`: the internal calls, for the block's header."""
        return ", ".join(c.name for c in self.internal)

    def summary(self) -> str:
        """`2 tool calls (order_status, draft_reply) · 1 reasoning` for the block's header."""
        parts = []
        visible = self.visible
        if visible:
            names = list(dict.fromkeys(c.name for c in visible))
            noun = "tool call" if len(visible) == 1 else "tool calls"
            parts.append(f"{len(visible)} {noun} ({', '.join(names)})")
        if self.reasoning:
            parts.append(f"{len(self.reasoning)} reasoning")
        if not parts:
            names = list(dict.fromkeys(c.name for c in self.internal))
            parts.append(f"internal: {', '.join(names)}")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "activity",
            "summary": self.summary(),
            "toolCalls": len(self.visible),
            "internalCalls": len(self.internal),
            "reasoning": list(self.reasoning),
            "calls": [c.to_dict() for c in self.calls],
        }


def _reasoning_by_segment(items: list[dict[str, Any]] | None) -> list[list[str]]:
    """Reasoning summaries of a responses-format conversation, split at each thing said (a
    user message, an assistant message with text), so segment k goes with activity block k."""
    segments: list[list[str]] = [[]]
    for item in items or []:
        kind = item.get("type")
        if kind == "message" and item.get("role") in ("user", "assistant"):
            if content_text(item.get("content")):
                segments.append([])
        elif kind == "reasoning":
            summary = item.get("summary") or []
            text = " ".join(
                str(part.get("text", "")) for part in summary if isinstance(part, dict)
            ).strip()
            segments[-1].append(text or "(reasoning without a summary)")
    return segments


def conversation_blocks(
    bubbles: list[Bubble], items: list[dict[str, Any]] | None = None
) -> list[Bubble | Activity]:
    """The conversation as shown: things said as bubbles, and between them one Activity per
    turn that folds the tool calls, their results and any reasoning."""
    reasoning = _reasoning_by_segment(items)
    blocks: list[Bubble | Activity] = []
    said = 0  # things said so far: the reasoning segment of the current gap
    current: Activity | None = None
    by_call: dict[str, ActivityCall] = {}
    call: ActivityCall | None

    def activity() -> Activity:
        nonlocal current
        if current is None:
            current = Activity(reasoning=list(reasoning[said]) if said < len(reasoning) else [])
            blocks.append(current)
        return current

    for bubble in bubbles:
        if bubble.kind in ("user", "assistant"):
            if current is None and said < len(reasoning) and reasoning[said]:
                activity()  # reasoning with no tool call still gets its block
            current = None
            said += 1
            blocks.append(bubble)
        elif bubble.kind == "tool_call":
            call = ActivityCall(
                bubble.name or "tool",
                bubble.text,
                internal=(bubble.name or "") in INTERNAL_TOOLS,
            )
            activity().calls.append(call)
            if bubble.call_id:
                by_call[bubble.call_id] = call
        else:  # tool_result or context
            call = by_call.get(bubble.call_id or "")
            if call is not None:
                call.result = bubble.text
            else:
                activity().calls.append(
                    ActivityCall(
                        bubble.name or bubble.kind,
                        result=bubble.text,
                        internal=bubble.kind == "context" or (bubble.name or "") in INTERNAL_TOOLS,
                    )
                )
    if current is None and said < len(reasoning) and reasoning[said]:
        activity()
    return blocks


def shown_before(blocks: list[Any], before: int) -> tuple[list[Any], int]:
    """The BLOCKS_SHOWN blocks before index `before`, and how many come before those (the
    page shows the newest: `before` = all of them; "Show earlier" asks for the rest)."""
    before = max(0, min(before, len(blocks)))
    start = max(0, before - BLOCKS_SHOWN)
    return blocks[start:before], start


def earlier_blocks(session: Session, before: int) -> dict[str, Any]:
    """The conversation blocks before index `before` (for "Show earlier")."""
    blocks = conversation_blocks(conversation(session), session.items)
    shown, start = shown_before(blocks, before)
    return {"session": session, "blocks_shown": shown, "blocks_before": start}
