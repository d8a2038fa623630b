"""Replay: step through a finished session's trace, and re-run it offline.

`frame(session, step)` folds the first `step` stored events into the conversation and the
tree as they were at that point. `rerun_offline(session)` creates a new session (origin
`replay`, linked to its source) whose single run replays every recorded model result with
the offline `ReplayProvider`: the same turns, no network, comparable side by side.
"""

from __future__ import annotations

import json
from typing import Any

from decks_app.models import Run, Session, TraceEvent
from decks_app.services import sessions
from decks_app.services.trace_tree import build_tree


class NotReplayable(ValueError):
    pass


def _fold_conversation(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    streaming: dict[str, dict[str, Any]] = {}
    for p in payloads:
        t = p.get("type")
        root = not p.get("parentActionCallId")
        if t == "message.user" and root:
            content = (p.get("message") or {}).get("content")
            rows.append(
                {
                    "kind": "user",
                    "text": content if isinstance(content, str) else json.dumps(content),
                }
            )
        elif t == "response.output_text.delta" and not (p.get("_gambit") or {}).get(
            "parent_action_call_id"
        ):
            key = str(p.get("item_id"))
            if key not in streaming:
                streaming[key] = {"kind": "assistant", "text": "", "partial": True}
                rows.append(streaming[key])
            streaming[key]["text"] += p.get("delta") or ""
        elif t == "model.result" and root:
            for row in [r for r in rows if r.get("partial")]:
                rows.remove(row)
            streaming.clear()
            message = p.get("message") or {}
            if message.get("content"):
                rows.append({"kind": "assistant", "text": str(message["content"])})
            for call in p.get("toolCalls") or []:
                rows.append(
                    {
                        "kind": "tool_call",
                        "name": call.get("name"),
                        "text": json.dumps(call.get("args")),
                    }
                )
        elif t == "tool.result" and p.get("toolKind") in ("action", "external"):
            rows.append(
                {
                    "kind": "tool_result",
                    "name": p.get("name"),
                    "text": json.dumps(p.get("result"))[:2000],
                }
            )
    return rows


def frame(session: Session, step: int | None) -> dict[str, Any]:
    events = list(
        TraceEvent.objects.filter(session=session)
        .order_by("id")
        .values("id", "type", "payload", "run_id", "seq")
    )
    total = len(events)
    step = total if step is None else max(0, min(step, total))
    shown = [e["payload"] for e in events[:step]]
    shown_rows = [(e["id"], e["payload"]) for e in events[:step]]
    current = events[step - 1] if step else None
    return {
        "session": session,
        "step": step,
        "total": total,
        "prev": max(0, step - 1),
        "next": min(total, step + 1),
        "current": current,
        "conversation": _fold_conversation(shown),
        "tree": build_tree(
            [r for r in shown_rows if not str(r[1].get("type", "")).startswith("response.")]
        ),
    }


def rerun_offline(source: Session) -> Session:
    if source.runs.filter(status__in=Run.ACTIVE).exists():
        raise NotReplayable("the session is still running")
    if not TraceEvent.objects.filter(session=source, type="model.result").exists():
        raise NotReplayable("the session has no recorded model results to replay")
    replay = Session.objects.create(
        workspace=source.workspace,
        deck_path=source.deck_path,
        deck_label=source.deck_label,
        model="",
        context=source.context,
        origin="replay",
        source=source,
        state_run_id=source.state_run_id,
        format="responses",
        meta={"deckPath": source.deck_path, "replayOf": source.id},
    )
    sessions.enqueue_run(replay, message=None, kind="replay")
    return replay
