"""Short session summaries: a title of a few words for each conversation, for the sessions list
(docs/simulator.md, "Session titles").

After a session's first exchange (a chat turn that ends with an assistant reply, and no
summary yet), `schedule` starts a background task on the run's event loop: the turn is not
waited for, nor slowed down. The task asks the summary model, a weak and cheap one, for a
title (its own request, without tools), and stores it in `session.meta["summary"]`:
`{"text", "model", "createdAt"}`. The model is `GAMBIT_SUMMARY_MODEL`, else gambit.toml's
`[simulator] summary_model`; with neither, nothing is asked. A failure is logged and leaves
the session without a title (the next turn tries again).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from django.db import transaction
from django.utils import timezone

from decks_app.models import Session
from decks_app.runs import events as event_log
from decks_app.runs import providers
from decks_app.runs.database import db
from gambit.core import CreateResponseRequest, message_item, output_text

log = logging.getLogger("decks_app.summaries")

SUMMARY_MODEL_ENV = "GAMBIT_SUMMARY_MODEL"
META_KEY = "summary"
TIMEOUT_SECONDS = 60.0
MAX_TITLE = 120  # characters kept of the model's answer
TRANSCRIPT_CHARS = 4000  # how much of the conversation the summary model reads

SHORT_SUMMARY_PROMPT = (
    "Write a title for the conversation below: at most eight words saying what it is about, "
    "in the conversation's language, with no quotes and no final full stop. Answer with the "
    "title only.\n\n"
)

_tasks: set[asyncio.Task[Any]] = set()


def summary_model(workspace_root: str) -> str | None:
    """The model that writes titles: the environment's, else gambit.toml's; None for none."""
    named = os.environ.get(SUMMARY_MODEL_ENV, "").strip()
    if named:
        return named
    return providers.make_router(workspace_root).config.summary_model


def summary_of(session: Session) -> str | None:
    """The session's title, when one was written."""
    record = (session.meta or {}).get(META_KEY)
    text = record.get("text") if isinstance(record, dict) else None
    return text if isinstance(text, str) and text else None


def _transcript(messages: list[Any]) -> str:
    lines = []
    for message in messages:
        role = getattr(message, "role", None)
        content = getattr(message, "content", None)
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            lines.append(f"{role}: {content.strip()}")
    return "\n".join(lines)[:TRANSCRIPT_CHARS]


def schedule(session: Session, messages: list[Any]) -> asyncio.Task[Any] | None:
    """Start titling `session` in the background when it has none, its conversation has an
    assistant reply and a summary model is configured; the task, or None."""
    if summary_of(session) is not None:
        return None
    if not any(getattr(m, "role", None) == "assistant" for m in messages):
        return None
    transcript = _transcript(messages)
    if not transcript:
        return None
    task = asyncio.create_task(_summarise(session.id, session.workspace.root, transcript))
    _tasks.add(task)  # the loop keeps only weak references to tasks
    task.add_done_callback(_tasks.discard)
    return task


async def _summarise(session_id: str, workspace_root: str, transcript: str) -> str | None:
    try:
        model = await asyncio.to_thread(summary_model, workspace_root)
        if model is None:
            return None
        router = providers.make_router(workspace_root)
        try:
            request = CreateResponseRequest(
                model=model, input=[message_item("user", SHORT_SUMMARY_PROMPT + transcript)]
            )
            answer = await asyncio.wait_for(router.responses(request), TIMEOUT_SECONDS)
        finally:
            await router.aclose()
        title = " ".join(output_text(answer.response).split()).strip(" \"'.")[:MAX_TITLE]
        if not title:
            return None
        await db(_store, session_id, title, model)
        await event_log.notify(session_id)
        return title
    except Exception as exc:  # a title is a nicety: never let it fail anything else
        log.warning("session %s: no summary: %s: %s", session_id, type(exc).__name__, exc)
        return None


def _store(session_id: str, title: str, model: str) -> None:
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return
        record = {"text": title, "model": model, "createdAt": timezone.now().isoformat()}
        session.meta = {**(session.meta or {}), META_KEY: record}
        session.save(update_fields=["meta"])
