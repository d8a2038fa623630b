"""The Grade tab: start a grade run, execute it, read results, flag; the 405/403/404 matrix
and the htmx variant. Grade runs execute through the same run executor as chat turns."""

from __future__ import annotations

import asyncio
import json

import pytest

from decks_app.models import Run, Session
from decks_app.runs import executor, queue
from tests.decks_app.conftest import chat_session
from tests.decks_app.grading.graded import Turn, graded_session, tone_hash

pytestmark = pytest.mark.django_db(transaction=True)

TONE = "support/graders/tone/PROMPT.md"


def _graded(client, workspace):
    session = chat_session(workspace, reply="Your order A1002 ships <b>today</b>.")
    response = client.post("/grade/run", {"session": session.id, "grader": TONE})
    assert response.status_code == 302
    run_id = response["Location"].rstrip("/").split("/")[-1]
    return session, run_id


def _execute(run_id: str) -> str:
    assert queue.claim_next_run("test-worker") == run_id
    return asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 30))


def test_an_empty_workspace_says_how_to_get_a_session(client, workspace):
    page = client.get("/grade")
    assert page.status_code == 200
    assert "No sessions found. Run the Test view" in page.content.decode()
    assert "No grade runs for this session yet" not in page.content.decode()  # there is none
    assert client.get("/grade.json").json()["sessions"] == []


def test_it_lists_the_graders_of_the_sessions_deck(client, workspace):
    session = chat_session(workspace)
    data = client.get(f"/grade.json?session={session.id}").json()
    assert data["session"] == session.id
    assert data["graders"] == [
        {
            "path": TONE,
            "label": "Tone",
            "description": None,
            "mode": "turns",
            "error": None,
        }
    ]
    assert 'name="grader"' in client.get(f"/grade?session={session.id}").content.decode()


def test_a_grade_run_grades_each_turn_and_is_recorded_in_the_session(client, workspace):
    session, run_id = _graded(client, workspace)
    assert Run.objects.get(pk=run_id).status == "queued"
    assert _execute(run_id) == "completed"
    data = client.get(f"/grade/runs/{run_id}.json").json()
    assert data["status"] == "completed" and data["mode"] == "turns"
    assert data["session"] == session.id and data["graderHash"]
    (row,) = data["results"]
    assert row["title"] == "Assistant turn 1" and isinstance(row["score"], int)
    assert row["input"]["assistant"] == "Your order A1002 ships <b>today</b>."
    assert row["input"]["user"] == "hello"
    session.refresh_from_db()
    recorded = session.meta["gradingRuns"][0]
    assert recorded["runId"] == run_id and recorded["graderPath"] == TONE
    assert recorded["results"][0]["messageRefId"] == "msg-000000000000000000000003"
    # the tab lists it; the grading session is not a conversation in the Test tab
    tab = client.get(f"/grade.json?session={session.id}").json()
    assert [r["id"] for r in tab["runs"]] == [run_id] and tab["imported"] == []
    listed = [s["id"] for s in client.get("/test.json").json()["sessions"]]
    assert session.id in listed and data["gradingSession"] not in listed
    html = client.get(f"/grade/runs/{run_id}").content.decode()
    assert "ships &lt;b&gt;today&lt;/b&gt;" in html  # model and user text escaped
    assert "Show input" in html
    # which model graded, and that it was offline (the page said neither)
    model = Run.objects.get(pk=run_id).model
    assert model and (data["model"], data["offline"]) == (model, Run.objects.get(pk=run_id).offline)
    offline = " (offline)" if data["offline"] else ""
    assert f'graded by <span id="grade-model">{model}{offline}</span>' in html


def test_flags_toggle_with_a_reason_and_a_reason_needs_a_flag(client, workspace):
    session, run_id = _graded(client, workspace)
    _execute(run_id)
    missing = client.post(f"/grade/runs/{run_id}/flag/0/reason?format=json", {"reason": "x"})
    assert missing.status_code == 404
    assert "Flag not found for refId: msg-000000000000000000000003" in missing.json()["error"]
    flagged = client.post(
        f"/grade/runs/{run_id}/flag/0?format=json", {"reason": "the quote is invented"}
    )
    assert flagged.json()["flag"]["reason"] == "the quote is invented"
    client.post(f"/grade/runs/{run_id}/flag/0/reason", {"reason": "score too high"})
    data = client.get(f"/grade/runs/{run_id}.json").json()
    assert data["results"][0]["flag"]["reason"] == "score too high"
    session.refresh_from_db()
    assert session.meta["gradingFlags"][0]["refId"] == "msg-000000000000000000000003"
    unflagged = client.post(f"/grade/runs/{run_id}/flag/0?format=json")
    assert unflagged.json() == {"flag": None}
    assert client.post(f"/grade/runs/{run_id}/flag/7?format=json").status_code == 400
    too_long = client.post(f"/grade/runs/{run_id}/flag/0?format=json", {"reason": "x" * 2001})
    assert too_long.status_code == 400


def test_the_picker_is_the_session_that_is_graded(client, workspace):
    # issue 26: on /grade?session=A, picking B and running a grader graded A (a hidden copy
    # of the shown session won over a <select> picker). The picker is now a list of links:
    # picking opens the tab for that session, whose form carries it and nothing else.
    first, second = chat_session(workspace), chat_session(workspace)
    html = client.get(f"/grade?session={first.id}").content.decode()
    form = html[
        html.index('<form method="post"') : html.index("</form>", html.index('<form method="post"'))
    ]
    assert form.count('name="session"') == 1 and f'value="{first.id}"' in form
    choices = html[html.index('id="grade-session-choices"') :]
    assert f'href="/grade?session={second.id}' in choices
    picked = client.get(f"/grade?session={second.id}").content.decode()
    form = picked[
        picked.index('<form method="post"') : picked.index(
            "</form>", picked.index('<form method="post"')
        )
    ]
    assert form.count('name="session"') == 1 and f'value="{second.id}"' in form
    started = client.post("/grade/run", {"session": second.id, "grader": TONE})
    run_id = started["Location"].rstrip("/").split("/")[-1]
    assert client.get(f"/grade/runs/{run_id}.json").json()["session"] == second.id


def test_a_flag_shows_on_the_grade_run_it_was_set_on_only(client, workspace):
    # issue: a flag set on one grade run showed on both runs of the message in the history
    session, first = _graded(client, workspace)
    _execute(first)
    second = client.post("/grade/run", {"session": session.id, "grader": TONE})
    second = second["Location"].rstrip("/").split("/")[-1]
    _execute(second)
    client.post(f"/grade/runs/{first}/flag/0?format=json", {"reason": "too generous"})
    runs = {r["id"]: r for r in client.get(f"/grade.json?session={session.id}").json()["runs"]}
    assert runs[first]["results"][0]["flag"]["reason"] == "too generous"
    assert runs[second]["results"][0]["flag"] is None
    html = client.get(f"/grade?session={session.id}").content.decode()
    assert html.count("⚑") == 1
    assert client.get(f"/grade/runs/{second}.json").json()["results"][0]["flag"] is None
    # flagging the second run adds its own flag; unflagging it leaves the first one
    assert client.post(f"/grade/runs/{second}/flag/0?format=json").json()["flag"]
    assert client.post(f"/grade/runs/{second}/flag/0?format=json").json() == {"flag": None}
    assert client.get(f"/grade/runs/{first}.json").json()["results"][0]["flag"]
    exported = client.get("/grade/export/grades.jsonl").content.decode().splitlines()
    flags = {json.loads(line)["gradeRun"]: json.loads(line)["flag"] for line in exported}
    assert flags == {first: True, second: False}


def test_a_grader_that_is_not_declared_or_nothing_to_grade_is_refused(client, workspace):
    session = chat_session(workspace)
    bad = client.post("/grade/run?format=json", {"session": session.id, "grader": "../etc/x"})
    assert bad.status_code == 400 and "is not a grader of support/PROMPT.md" in bad.json()["error"]
    empty = Session.objects.create(workspace=workspace, deck_path="support/PROMPT.md")
    nothing = client.post("/grade/run?format=json", {"session": empty.id, "grader": TONE})
    assert nothing.status_code == 400 and "no conversation to grade" in nothing.json()["error"]
    assert client.post("/grade/run", {"session": "nope", "grader": TONE}).status_code == 400


def test_a_failed_grader_shows_its_cause(client, workspace, settings, tmp_path):
    session, run_id = _graded(client, workspace)
    grader = tmp_path / "missing"
    Run.objects.filter(pk=run_id).update(params={"grader": str(grader.name) + "/PROMPT.md"})
    assert _execute(run_id) == "failed"
    data = client.get(f"/grade/runs/{run_id}.json").json()
    assert data["status"] == "failed" and data["error"]
    assert "Grader run failed" in client.get(f"/grade/runs/{run_id}").content.decode()


def test_cli_gradings_in_the_session_are_shown_as_imported(client, workspace):
    session = chat_session(workspace)
    session.meta = {
        **(session.meta or {}),
        "gradingRuns": [
            {
                "id": "grade-cli",
                "graderPath": TONE,
                "graderLabel": "Tone",
                "mode": "turns",
                "status": "completed",
                "runAt": "2026-11-24T10:00:00+00:00",
                "score": 2,
                "results": [{"score": 2, "reason": "kind", "messageIndex": 2}],
            }
        ],
    }
    session.save()
    data = client.get(f"/grade.json?session={session.id}").json()
    assert [g["id"] for g in data["imported"]] == ["grade-cli"]
    html = client.get(f"/grade?session={session.id}").content.decode()
    assert 'id="imported-grades"' in html and "No grade runs for this session yet" not in html
    # issue 26: a relative time with the exact one on hover, never a raw ISO string as text
    assert 'datetime="2026-11-24T10:00:00+00:00"' in html
    assert ">2026-11-24T10:00:00+00:00<" not in html


def test_simulator_grades_travel_with_an_exported_session(client, workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile

    session, run_id = _graded(client, workspace)
    assert _execute(run_id) == "completed"
    (ours,) = client.get(f"/test/{session.id}.json").json()["gradingRuns"]
    assert (ours["imported"], ours["runId"], ours["url"]) == (
        False,
        run_id,
        f"/grade/runs/{run_id}",
    )
    assert ">1 grade</a>" in client.get(f"/test/{session.id}").content.decode()
    state = client.get(f"/test/{session.id}/export/state.json").content
    r = client.post(
        "/test/import?format=json",
        {"deck": "support/PROMPT.md", "state": SimpleUploadedFile("s.json", state)},
    )
    assert r.status_code == 201
    copy = Session.objects.get(pk=r.json()["id"])
    session.refresh_from_db()
    assert copy.meta["gradingRuns"] == session.meta["gradingRuns"]
    # in the copy, no grade run of this simulator made it: it is an imported grade
    (theirs,) = client.get(f"/test/{copy.id}.json").json()["gradingRuns"]
    assert (theirs["id"], theirs["imported"], theirs["url"]) == (ours["id"], True, None)
    tab = client.get(f"/grade.json?session={copy.id}").json()
    assert tab["runs"] == [] and [g["id"] for g in tab["imported"]] == [ours["id"]]
    assert client.get(f"/grade.json?session={session.id}").json()["imported"] == []


def test_stopping_a_queued_grade_cancels_it(client, workspace):
    _, run_id = _graded(client, workspace)
    assert client.post(f"/grade/runs/{run_id}/stop?format=json").json() == {"stopped": [run_id]}
    assert Run.objects.get(pk=run_id).status == "canceled"


def test_htmx_gets_the_result_fragment_only(client, workspace):
    _, run_id = _graded(client, workspace)
    html = client.get(f"/grade/runs/{run_id}", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="grade-result"' in html and "<html" not in html
    assert "every 1s" not in html  # the page follows the grading session's socket instead
    page = client.get(f"/grade/runs/{run_id}").content.decode()
    assert 'data-live-view="grade_run" data-live-key="' + run_id in page
    tab = client.get("/grade", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="grade-history"' in tab and "<html" not in tab


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/grade/run"),
        ("post", "/grade"),
        ("get", "/grade/runs/{run}/flag/0"),
        ("get", "/grade/runs/{run}/stop"),
        ("post", "/grade/runs/{run}"),
    ],
)
def test_wrong_methods_are_405(client, workspace, method, url):
    _, run_id = _graded(client, workspace)
    assert getattr(client, method)(url.format(run=run_id)).status_code == 405


@pytest.mark.parametrize(
    "url",
    [
        "/grade/runs/run-000000000000000000000000",
        "/grade/runs/not-an-id",
        "/grade/runs/run-000000000000000000000000.json",
        "/grade?session=session-000000000000000000000000",
    ],
)
def test_unknown_ids_are_404(client, workspace, url):
    assert client.get(url).status_code == 404


def test_a_chat_run_id_is_not_a_grade_run(client, workspace):
    session = chat_session(workspace)
    run = Run.objects.create(
        session=session, kind="manual", params={"message": "hi"}, status="completed"
    )
    assert client.get(f"/grade/runs/{run.id}").status_code == 404


def test_posts_need_the_csrf_token(csrf_client, workspace):
    session = chat_session(workspace)
    response = csrf_client.post("/grade/run", {"session": session.id, "grader": TONE})
    assert response.status_code == 403


def test_grades_export_as_csv_and_jsonl_with_flags_and_ratings(client, workspace):
    import csv
    import io
    import json

    from decks_app.models import Feedback

    session, run_id = _graded(client, workspace)
    _execute(run_id)
    Feedback.objects.create(
        session=session, message_ref_id="msg-000000000000000000000003", score=-2
    )
    client.post(f"/grade/runs/{run_id}/flag/0", {"reason": "too generous"})
    rows = list(
        csv.DictReader(io.StringIO(client.get("/grade/export/grades.csv").content.decode()))
    )
    (row,) = rows
    assert (
        row["session"] == session.id
        and row["gradeRun"] == run_id
        and row["grader"].startswith("Tone")
    )
    assert (
        row["humanRating"] == "-2" and row["flag"] == "True" and row["flagReason"] == "too generous"
    )
    assert row["messageRefId"] == "msg-000000000000000000000003" and row["graderHash"]
    lines = client.get("/grade/export/grades.jsonl").content.decode().splitlines()
    assert json.loads(lines[0])["humanRating"] == -2
    assert (
        client.get("/grade/export/grades.csv?batch=run-000000000000000000000000").status_code == 404
    )
    assert client.post("/grade/export/grades.csv").status_code == 405


def test_the_csv_export_neutralises_formulas_the_jsonl_keeps_them(client, workspace, tmp_path):
    # A spreadsheet runs a cell starting with =, +, -, @, a tab or a carriage return (OWASP,
    # "CSV Injection": https://owasp.org/www-community/attacks/CSV_Injection). Before, a
    # grader's reason was written raw (docs/calibration.md, "Exports in spreadsheets").
    import csv
    import io

    from gambit.cli._calibrate import read_files

    key = (TONE, tone_hash(workspace))
    hostile = ["=cmd|' /C calc'!A0", "@SUM(A1:A9)", "\tplus a tab", "+1 and more", "plain"]
    turns = [Turn({key: [-2]}, reasons={key: reason}) for reason in hostile]
    graded_session(workspace, turns, index=7)
    body = client.get("/grade/export/grades.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [r["reason"] for r in rows] == [*("'" + r for r in hostile[:-1]), "plain"]
    assert {r["score"] for r in rows} == {"-2"}  # a number, not a formula: left as it is
    lines = client.get("/grade/export/grades.jsonl").content.decode().splitlines()
    assert [json.loads(line)["reason"] for line in lines] == hostile
    # gambit calibrate reads the CSV back as it was
    export = tmp_path / "grades.csv"
    export.write_text(body, encoding="utf-8", newline="")
    assert [row["reason"] for _, row in read_files([export])] == hostile


# ---------------------------------------------------------------- the session picker (issue 26)


def test_the_picker_reaches_every_session_page_by_page(client, workspace):
    made = {chat_session(workspace).id for _ in range(130)}  # the old picker showed 100
    seen, url = [], "/grade.json"
    data = client.get(url).json()
    assert len(data["sessions"]) == 20 and data["page"]["newer"] is None
    url = data["page"]["olderUrl"]
    seen += [s["id"] for s in data["sessions"]]
    while url:
        page = client.get(url).json()
        seen += [s["id"] for s in page["sessions"]]
        url = page["page"]["olderUrl"]
    assert len(seen) == len(set(seen)) == 130 and set(seen) == made


def test_the_picker_searches_the_conversations(client, workspace):
    wanted = chat_session(workspace, user="My complaint: order A1002 came <i>late</i>.")
    other = chat_session(workspace, user="Where is my parcel?")
    data = client.get("/grade/sessions.json?q=a1002").json()
    assert [s["id"] for s in data["sessions"]] == [wanted.id]
    line = data["sessions"][0]["match"]
    assert line["text"] == "My complaint: order A1002 came <i>late</i>."
    html = client.get(
        f"/grade/sessions?q=complaint&session={other.id}", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert html.lstrip().startswith('<div id="grade-session-choices"')
    assert "<mark>complaint</mark>: order A1002 came &lt;i&gt;late&lt;/i&gt;." in html
    assert f'data-session="{wanted.id}"' in html and f'data-session="{other.id}"' not in html
    assert f"/grade?session={wanted.id}&amp;q=complaint" in html
    # the whole page searched the same way, the chosen session kept beside the search
    page = client.get(f"/grade?q=parcel&session={other.id}").content.decode()
    assert 'class="selected"' in page and f'value="{other.id}"' in page
    assert client.get("/grade/sessions.json?q=nothing-like-it").json()["sessions"] == []


def test_the_picker_as_a_link_without_htmx_opens_the_grade_tab(client, workspace):
    response = client.get("/grade/sessions?q=x")
    assert response.status_code == 302 and response["Location"] == "/grade?q=x"


def test_a_broken_picker_cursor_is_a_400(client, workspace):
    assert client.get("/grade.json?before=%%%").status_code == 400
    assert client.get("/grade/sessions.json?after=zzz").status_code == 400
