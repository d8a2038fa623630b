"""Run by test_session_search_pg.py in a process of its own, against a fresh PostgreSQL
database (DATABASE_URL): migrate, write sessions through the models, and ask the Test tab's
JSON twin, as a user would. Prints one JSON object of what it saw."""

from __future__ import annotations

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from decks_app.models import Session  # noqa: E402
from decks_app.sessions.actions import create_session  # noqa: E402
from decks_app.sessions.listing import SessionFilter, listed_sessions  # noqa: E402
from decks_app.workspaces.served import current_workspace  # noqa: E402


def _chat(workspace, user: str) -> Session:
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    session.messages = [
        {"role": "system", "content": "system prompt words"},
        {"role": "user", "content": user},
        {"role": "assistant", "content": "Sorry to hear that."},
    ]
    session.save()
    return session


def main() -> None:
    call_command("migrate", verbosity=0)
    workspace = current_workspace()
    client = Client(HTTP_HOST="127.0.0.1")
    # "Q1002", not a hex word: the search also matches ids, and one of 78 random hex ids
    # once contained "a1002".
    wanted = _chat(workspace, "Hi, I have a complaint about order Q1002.\nIt came <b>broken</b>.")
    _chat(workspace, "Where is my parcel?")
    items = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    items.items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hola"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "ticket opened zanzibar"},
    ]
    items.save()
    for _ in range(75):
        create_session(workspace, "hello/deck.py")
    out: dict = {"vendor": connection.vendor, "found": {}}
    for q in ("Q1002", "complaint", "q1002 complain", "BROKEN", "hola", "zanzibar", "system"):
        ids = [s["id"] for s in client.get("/test.json", {"q": q}).json()["sessions"]]
        out["found"][q] = [
            "wanted" if i == wanted.id else "items" if i == items.id else i for i in ids
        ]
    out["match"] = client.get("/test.json", {"q": "Q1002"}).json()["sessions"][0]["match"]
    out["html"] = (
        "It came &lt;b&gt;<mark>broken</mark>&lt;/b&gt;."
        in client.get("/test", {"q": "broken"}).content.decode()
    )
    pages, url = [], "/test.json"
    while url:
        data = client.get(url).json()
        pages.append(len(data["sessions"]))
        url = data["page"]["olderUrl"]
    out["pages"] = pages
    with connection.cursor() as cursor:  # the list's own query, as the planner runs it
        cursor.execute("SET enable_seqscan = off")
    out["plan"] = listed_sessions(workspace, SessionFilter(q="a1002")).explain()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
