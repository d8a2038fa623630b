"""Server time of the session pages of a long session (issue 9: a 5,000-event session's page).

    .venv/bin/python bench/bench_pages.py [--events 5000] [--repeat 15]

A real conversation is made with the engine (each turn: the user's message, a model call
that calls a compute action, the action, a streamed reply of 40 words, all traced) and
stored the way the simulator's worker stores it (one `Run` per turn, text deltas coalesced),
until the session holds about `--events` trace events. Then each page is requested through
Django's test client in this process, so the time is the server's alone (URL routing, the
queries, building the tree, rendering the template), with no network or browser. Prints the
median and the slowest of `--repeat` requests per page, on a temporary SQLite database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DECK = """
+++
label = "Long chat"
modelParams.model = "bench-model"
[[actions]]
name = "add"
description = "Add one"
execute = "./add.py"
+++
You add numbers and explain each step at length.
"""
WORDS = 40


def setup_django(folder: Path) -> None:
    os.environ["GAMBIT_WORKSPACE"] = str(folder)
    (folder / ".gambit").mkdir(exist_ok=True)
    os.environ["GAMBIT_SIM_DB"] = str(folder / ".gambit" / "bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_session(folder: Path, events_wanted: int):
    """A session whose turns were run by the engine and stored as the worker stores them."""
    from decks_app.models import Run, TraceEvent
    from decks_app.runs import events as event_log
    from decks_app.sessions.actions import create_session
    from decks_app.workspaces.served import current_workspace
    from gambit.core import item_to_dict, load_deck_tree, run_deck
    from gambit.providers.offline import Call, ScriptedProvider, Stream

    tree = load_deck_tree(folder / "long" / "PROMPT.md")
    session = create_session(current_workspace(), "long/PROMPT.md", model="bench-model")
    state = None
    stored = 0
    turn = 0
    while stored < events_wanted:
        trace: list[dict] = []
        provider = ScriptedProvider()
        words = [f"word{i} " for i in range(WORDS)]
        provider.enqueue(Call("add", {"n": turn}), Stream(words))
        result = asyncio.run(
            run_deck(
                tree,
                provider=provider,
                message=f"Add one to {turn}, and tell me everything.",
                state=state,
                stream=True,
                on_trace=trace.append,
                on_stream_text=lambda _t: None,
            )
        )
        state = result.state
        rows = event_log.coalesce(trace)
        run = Run.objects.create(
            session=session, status="completed", kind="manual", params={"message": f"turn {turn}"}
        )
        TraceEvent.objects.bulk_create(
            TraceEvent(
                run=run,
                session=session,
                seq=i + 1,
                type=p["type"][:80],
                payload=p,
                ts=int(p.get("ts") or 0),
            )
            for i, p in enumerate(rows)
        )
        stored += len(rows)
        turn += 1
    session.format = "responses"
    session.items = [item_to_dict(i) for i in state.items]
    session.messages = [m.to_dict() for m in state.messages]
    session.message_refs = [r.to_dict() for r in state.message_refs]
    session.state_version = turn
    session.save()
    return session, stored, turn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "long").mkdir()
        (folder / "long" / "PROMPT.md").write_text(textwrap.dedent(DECK).lstrip())
        from bench_engine import ADD  # the engine bench's compute action, as it is

        (folder / "long" / "add.py").write_text(textwrap.dedent(ADD))
        setup_django(folder)
        from django.test import Client

        session, stored, turns = make_session(folder, args.events)
        client = Client(SERVER_NAME="localhost")
        pages = [
            ("session page (HTML)", f"/test/{session.id}"),
            ("session page (JSON twin)", f"/test/{session.id}.json"),
            ("trace page (HTML)", f"/test/{session.id}/trace"),
            ("sessions list", "/test"),
        ]
        print(
            f"server time per request: a session of {stored} trace events ({turns} turns),"
            f" {args.repeat} requests each, SQLite, in process"
        )
        for name, url in pages:
            response = client.get(url)  # warm up (templates, caches)
            assert response.status_code == 200, (url, response.status_code)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            size = len(response.content) / 1024
            print(
                f"  {name:<26} median {statistics.median(times):7.1f} ms"
                f"   max {max(times):7.1f} ms   {size:8.0f} KiB"
            )


if __name__ == "__main__":
    main()
