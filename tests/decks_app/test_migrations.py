"""An old database opens: rows written as the simulator stored them before runs had params
and results (decks_app 0003, the schema of HEAD 37ce7be: `Run.message` / `Run.output`,
Verify's settings in `Session.context`, `ApiKey` in decks_app) are migrated to the latest
schema, and every old session, run, grade, batch, feedback and key shows through today's
code: the pages' JSON twins and /v1 (docs/simulator.md, "Jobs"; migration 0005)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from decks_app.models import Run, Session
from decks_app.runs import registry

pytestmark = pytest.mark.django_db(transaction=True)

OLD = [("decks_app", "0003_run_turn_base_one_active")]
DECK = "support/PROMPT.md"
GRADER = "support/graders/tone/PROMPT.md"
SCENARIO = "support/scenarios/late_delivery/PROMPT.md"
KEY = "gk-an-old-key-made-before-the-endpoint-app"
RESPONSE_ID = "resp-" + "ab" * 12


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate the test database to `targets`; the apps (historical models) there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _fill_old_database(apps: Any) -> dict[str, str]:
    """Sessions of every origin and runs of every kind, as 0003 stored them."""
    Workspace = apps.get_model("decks_app", "Workspace")
    Session_ = apps.get_model("decks_app", "Session")
    Run_ = apps.get_model("decks_app", "Run")
    Feedback = apps.get_model("decks_app", "Feedback")
    ApiKey = apps.get_model("decks_app", "ApiKey")
    from decks_app.workspaces.served import current_workspace

    root = current_workspace().root
    Workspace.objects.all().delete()
    ws = Workspace.objects.create(id="workspace-" + "0" * 24, root=root, label="examples")
    ids: dict[str, str] = {}

    def session(origin: str, n: int, **fields: Any) -> Any:
        s = Session_.objects.create(
            id=f"session-{n:024x}",
            workspace=ws,
            deck_path=fields.pop("deck_path", DECK),
            deck_label="Support",
            origin=origin,
            **fields,
        )
        ids[f"session:{origin}:{n}"] = s.id
        return s

    def run(kind: str, s: Any, n: int, **fields: Any) -> Any:
        r = Run_.objects.create(id=f"run-{n:024x}", session=s, kind=kind, **fields)
        ids[f"run:{kind}:{n}"] = r.id
        return r

    conversation = {
        "format": "chat",
        "messages": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "You said: hello"},
        ],
        "message_refs": [
            {"id": "msg-u1", "role": "user", "source": "manual"},
            {"id": "msg-a1", "role": "assistant", "source": "manual"},
        ],
    }
    chat = session("manual", 1, context={"name": "Ann"}, **conversation)
    run("manual", chat, 1, status="completed", message="hello", output="You said: hello")
    Feedback.objects.create(session=chat, message_ref_id="msg-a1", score=2, reason="clear")
    session("import", 2, **conversation)
    replay = session("replay", 3, source=chat, **conversation)
    run("replay", replay, 3, status="completed", message=None, output="You said: hello")

    grading = {
        "id": "grading-1",
        "graderId": "tone",
        "graderPath": GRADER,
        "graderLabel": "Tone: kind, concrete, short",
        "mode": "turns",
        "status": "completed",
        "runAt": "2026-01-01T00:00:00Z",
        "score": 2,
        "results": [
            {
                "score": 2,
                "reason": "kind and short",
                "evidence": ["You said"],
                "messageIndex": 1,
                "messageRefId": "msg-a1",
                "payload": None,
            }
        ],
        "graderHash": "hash-1",
    }
    grade_session = session("grade", 4, deck_path=GRADER, source=chat)
    run("grader", grade_session, 4, status="completed", message=GRADER, output=grading)
    chat.meta = {"gradingRuns": [{**grading, "runId": ids["run:grader:4"]}]}
    chat.save()

    settings = {
        "scenarios": [SCENARIO],
        "graders": [GRADER],
        "runs": 1,
        "repeats": 1,
        "concurrency": 2,
        "maxTurns": 3,
        "threshold": 1.0,
        "context": {"name": "Bo"},
    }
    batch = session("verify", 5, context=settings)
    report = {
        "runs": [
            {
                "id": "scenario-run-1",
                "scenario": SCENARIO,
                "scenarioLabel": "Late delivery",
                "status": "completed",
                "turns": 1,
                "session": f"session-{6:024x}",
            }
        ],
        "grades": [
            {"grader": GRADER, "graderLabel": "Tone", "runId": "scenario-run-1", "score": 2}
        ],
        "summaries": {GRADER: {"samples": 1}},
        "settings": settings,
        "progress": {"runs": {"completed": 1}},
    }
    run(
        "verify",
        batch,
        5,
        status="completed",
        message=None,
        output={"settings": settings, "progress": {"runs": {"completed": 1}}, "report": report},
    )
    made = session(
        "scenario",
        6,
        source=batch,
        meta={"scenarioPath": SCENARIO, "verifyBatchRunId": ids["run:verify:5"]},
        **conversation,
    )
    run(
        "scenario",
        made,
        6,
        status="completed",
        message="Late delivery #1",
        output={"turns": 1, "stopped": "persona_ended"},
    )
    tab = session("scenario", 7, meta={"scenarioPath": SCENARIO}, **conversation)
    run(
        "scenario",
        tab,
        7,
        status="completed",
        message=SCENARIO,
        output={
            "maxTurns": 2,
            "scenarioInput": {"orderId": "A7"},
            "turns": 2,
            "stopped": "max_turns",
        },
    )

    build = session("assistant", 8, meta={"assistant": True}, **conversation)
    run(
        "assistant",
        build,
        8,
        status="completed",
        message="make it shorter",
        output={
            "grant": "write",
            "before": {"PROMPT.md": "long\n"},
            "after": {"PROMPT.md": "short\n"},
            "undone": True,
        },
    )

    resource = {"id": RESPONSE_ID, "object": "response", "status": "completed", "output": []}
    api = session("api", 9, meta={"api": {"model": "deck/support", "owner": None}})
    run(
        "api",
        api,
        9,
        status="completed",
        message="hi",
        output={
            "id": RESPONSE_ID,
            "store": True,
            "response": resource,
            "input_items": [{"type": "message", "id": "msg-in", "role": "user", "content": []}],
        },
    )
    ApiKey.objects.create(
        id="key-" + "1" * 24,
        name="old",
        digest=hashlib.sha256(KEY.encode()).hexdigest(),
        prefix=KEY[:10],
    )
    return ids


def test_an_old_database_opens_with_every_session_run_and_key():
    ids = _fill_old_database(_migrate(OLD))
    _migrate(_latest())
    client = Client(HTTP_HOST="127.0.0.1")

    listed = {row["id"]: row["origin"] for row in client.get("/test.json").json()["sessions"]}
    for origin, n in [("manual", 1), ("import", 2), ("replay", 3), ("scenario", 7)]:
        assert listed[ids[f"session:{origin}:{n}"]] == origin
    for key, session_id in ids.items():
        if key.startswith("session:"):
            assert client.get(f"/test/{session_id}").status_code == 200, key
            assert client.get(f"/test/{session_id}.json").status_code == 200, key

    chat = client.get(f"/test/{ids['session:manual:1']}.json").json()
    assert chat["runs"][0]["params"] == {"message": "hello"}
    assert chat["runs"][0]["result"] == {"output": "You said: hello"}
    assert chat["context"] == {"name": "Ann"}
    said = [(b["kind"], b["text"]) for b in chat["conversation"]]
    assert said == [("user", "hello"), ("assistant", "You said: hello")]
    assert chat["conversation"][1]["feedback"]["score"] == 2  # the old rating, on its message
    assert chat["conversation"][1]["feedback"]["rater"] == ""  # made before rater names (0007)
    calibration = client.get("/grade/calibration.json").json()
    assert calibration["ratings"]["raters"] == ["unknown"]  # counted as one unnamed rater
    assert chat["gradingRuns"][0]["runId"] == ids["run:grader:4"]
    assert not chat["gradingRuns"][0]["imported"]  # still one of this simulator's grade runs

    grade = client.get(f"/grade/runs/{ids['run:grader:4']}.json").json()
    assert (grade["grader"], grade["score"], grade["mode"]) == (GRADER, 2, "turns")
    assert grade["results"][0]["reason"] == "kind and short"
    assert client.get(f"/grade/runs/{ids['run:grader:4']}").status_code == 200

    batch = client.get(f"/grade/verify/{ids['run:verify:5']}.json").json()
    assert batch["settings"]["threshold"] == 1.0 and batch["settings"]["scenarios"] == [SCENARIO]
    assert batch["recordedProgress"] == {"runs": {"completed": 1}}
    assert batch["progress"]["run"]["done"] == 1  # counted from its runs, never "?"
    assert batch["runs"][0]["session"] == ids["session:scenario:6"]
    assert client.get(f"/grade/verify/{ids['run:verify:5']}").status_code == 200
    verify_session = Session.objects.get(pk=ids["session:verify:5"])
    assert verify_session.context == {"name": "Bo"}  # the deck's context input, no settings

    made = Run.objects.get(pk=ids["run:scenario:6"])
    assert made.params == {"scenario": SCENARIO, "label": "Late delivery #1"}
    tab = Run.objects.get(pk=ids["run:scenario:7"])
    assert tab.params == {"scenario": SCENARIO, "maxTurns": 2, "scenarioInput": {"orderId": "A7"}}
    assert tab.result == {"turns": 2, "stopped": "max_turns"}

    build = client.get("/build/assistant.json", {"deck": DECK}).json()
    assert build["session"] == ids["session:assistant:8"]
    (assistant_run,) = build["runs"]
    assert assistant_run["message"] == "make it shorter" and assistant_run["undone"] is True
    assert assistant_run["changes"][0]["path"] == "PROMPT.md"

    auth = {"HTTP_AUTHORIZATION": f"Bearer {KEY}"}
    assert client.get("/v1/models", **auth).status_code == 200
    assert client.get("/v1/models", HTTP_AUTHORIZATION="Bearer gk-wrong").status_code == 401
    stored = client.get(f"/v1/responses/{RESPONSE_ID}", **auth)
    assert stored.status_code == 200 and stored.json()["id"] == RESPONSE_ID
    items = client.get(f"/v1/responses/{RESPONSE_ID}/input_items", **auth).json()
    assert [i["id"] for i in items["data"]] == ["msg-in"]

    for run in Run.objects.all():  # every row reads back as its kind's models
        kind = registry.get(run.kind)
        kind.params.model_validate(run.params)
        if run.result is not None and kind.result is not None:
            kind.result.model_validate(run.result)


def test_the_migration_goes_back_to_message_and_output():
    ids = _fill_old_database(_migrate(OLD))
    _migrate(_latest())
    apps = _migrate([("decks_app", "0004_apikey_moves_to_endpoint")])
    OldRun = apps.get_model("decks_app", "Run")
    OldSession = apps.get_model("decks_app", "Session")
    try:
        back = {r.id: (r.message, r.output) for r in OldRun.objects.all()}
        assert back[ids["run:manual:1"]] == ("hello", "You said: hello")
        assert back[ids["run:grader:4"]][0] == GRADER
        assert back[ids["run:scenario:6"]] == (
            "Late delivery #1",
            {"turns": 1, "stopped": "persona_ended"},
        )
        assert back[ids["run:scenario:7"]][1]["scenarioInput"] == {"orderId": "A7"}
        assistant = back[ids["run:assistant:8"]]
        assert assistant[1]["grant"] == "write" and assistant[1]["undone"] is True
        assert back[ids["run:verify:5"]][1]["settings"]["threshold"] == 1.0
        assert OldSession.objects.get(pk=ids["session:verify:5"]).context["maxTurns"] == 3
        assert back[ids["run:api:9"]][1]["id"] == RESPONSE_ID
    finally:
        _migrate(_latest())
