"""Run by test_worker_warm_up.py in processes of their own, on the distributed profile's
settings (DATABASE_URL, REDIS_URL), as a server and a `gambit worker` are: STEP=queue
migrates and queues a one-turn run (as `gambit serve` does); STEP=run executes the queued
run, with `slots.warm_up()` called before its claim (WARM=1) or not (WARM=0), and reports
the packages the run imported. The run streams from the fake model server over HTTP and
notifies its session's sockets through Redis. Prints one JSON object of what it saw."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simulator.settings")
    django.setup()
    from decks_app.runs import executor, queue, slots

    if os.environ["STEP"] == "queue":
        from django.core.management import call_command

        from decks_app.sessions.actions import create_session, send_message
        from decks_app.workspaces.served import current_workspace

        call_command("migrate", verbosity=0)
        deck, model = "support/PROMPT.md", "openresponses/fake"
        run = send_message(create_session(current_workspace(), deck, model=model), "hello")
        print(json.dumps({"run": run.id}))
        return

    from tests.support.fake_model_server import FakeModelServer, Reply

    with FakeModelServer() as fake:
        os.environ.update(fake.env())
        fake.default_reply = Reply(text="ok")
        if os.environ["WARM"] == "1":
            slots.warm_up()
        before = set(sys.modules)
        run_id = queue.claim_next_run("probe")
        status = asyncio.run(executor.execute_run(run_id)) if run_id else None
        imported = sorted({name.split(".")[0] for name in set(sys.modules) - before})
    print(json.dumps({"run": run_id, "status": status, "imported": imported}))


if __name__ == "__main__":
    main()
