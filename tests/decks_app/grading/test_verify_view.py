"""Verify in the browser: start a batch, run it through the run executor, read its metrics,
scenario sessions and grades; compare batches; the 405/403/404 matrix and htmx."""

from __future__ import annotations

import asyncio

import pytest

from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import executor, queue

pytestmark = pytest.mark.django_db(transaction=True)

FORM = {
    "deck": "support/PROMPT.md",
    "scenario": "support/scenarios/late_delivery/PROMPT.md",
    "grader": "support/graders/tone/PROMPT.md",
    "runs": "2",
    "repeats": "2",
    "concurrency": "2",
    "maxTurns": "1",
    "threshold": "0",
}


def _start(client, **changes) -> str:
    response = client.post("/grade/verify/run", {**FORM, **changes})
    assert response.status_code == 302, response.content
    return response["Location"].rstrip("/").split("/")[-1]


def _execute(run_id: str) -> str:
    assert queue.claim_next_run("test-worker") == run_id
    return asyncio.run(asyncio.wait_for(executor.execute_run(run_id), 60))


def test_the_form_offers_the_decks_scenarios_and_graders(client, workspace):
    data = client.get("/grade/verify.json").json()
    assert data["deck"] == "support/PROMPT.md"
    assert [s["path"] for s in data["scenarios"]] == [FORM["scenario"]]
    assert [g["path"] for g in data["graders"]] == [FORM["grader"]]
    html = client.get("/grade/verify").content.decode()
    assert 'name="scenario"' in html and 'id="run-verify"' in html


def test_a_batch_runs_grades_and_reports(client, workspace):
    run_id = _start(client)
    assert client.get(f"/grade/verify/{run_id}.json").json()["status"] == "queued"
    assert _execute(run_id) == "completed"
    batch = client.get(f"/grade/verify/{run_id}.json").json()
    assert batch["progress"]["run"] == {
        "total": 2, "queued": 0, "running": 0, "completed": 2, "failed": 0,
    }  # fmt: skip
    assert batch["progress"]["grade"]["completed"] == 4
    (summary,) = batch["summaries"].values()
    assert summary["samples"] == 4 and summary["consistency"]["pairs"] == 2
    sessions = [r["session"] for r in batch["runs"]]
    assert all(sessions)
    scenario = Session.objects.get(pk=sessions[0])
    assert scenario.origin == "scenario" and scenario.source.runs.first().id == run_id
    assert len(scenario.meta["gradingRuns"]) == 2  # two repeats, recorded like gambit grade
    assert scenario.meta["gradingRuns"][0]["graderHash"]
    assert TraceEvent.objects.filter(session=scenario).exists()  # its own trace
    # scenario sessions are conversations in the Test tab and gradable in the Grade tab
    listed = [s["id"] for s in client.get("/test.json").json()["sessions"]]
    assert sessions[0] in listed and Run.objects.get(pk=run_id).session_id not in listed
    html = client.get(f"/grade/verify/{run_id}").content.decode()
    assert 'id="chart-scores"' in html and 'id="verify-chart-data"' in html
    assert "vendor/chart.js/chart.umd.min.js" in html
    assert f"/test/{sessions[0]}" in html
    # outliers link to their session's grades, which link back to the batch
    assert 'class="outliers"' in html
    assert any(
        f'href="/grade?session={sid}#imported-grades">its grades</a>' in html for sid in sessions
    )
    assert scenario.meta["gradingRuns"][0]["verifyBatchRunId"] == run_id
    grades = client.get(f"/grade?session={sessions[0]}").content.decode()
    assert f'href="/grade/verify/{run_id}">Verify batch, repeat ' in grades
    assert f'id="grading-{scenario.meta["gradingRuns"][0]["id"]}"' in grades
    history = client.get("/grade/verify.json").json()["batches"]
    assert [b["id"] for b in history] == [run_id]


def test_two_batches_compare(client, workspace):
    first, second = _start(client), _start(client)
    _execute(first)
    _execute(second)
    data = client.get(f"/grade/verify/compare.json?before={first}&after={second}").json()
    (grader,) = data["graders"].values()
    assert grader["mean"]["delta"] == 0 and grader["passRate"]["delta"] == 0
    html = client.get(f"/grade/verify/compare?before={first}&after={second}").content.decode()
    assert "Before and after" in html


def test_a_batch_that_has_not_finished_cannot_be_compared(client, workspace):
    first, second = _start(client), _start(client)
    response = client.get(f"/grade/verify/compare.json?before={first}&after={second}")
    assert response.status_code == 400 and "must have completed" in response.json()["error"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"runs": "0"}, "runs must be from 1 to 100"),
        ({"runs": "many"}, "runs must be a whole number"),
        ({"repeats": "21"}, "repeats must be from 1 to 20"),
        ({"threshold": "9"}, "threshold must be a number from -3 to 3"),
        ({"scenario": ""}, "pick at least one scenario"),
        ({"grader": "support/PROMPT.md"}, "not declared by support/PROMPT.md"),
    ],
)
def test_bad_settings_are_named(client, workspace, changes, message):
    response = client.post("/grade/verify/run?format=json", {**FORM, **changes})
    assert response.status_code == 400 and message in response.json()["error"]


def test_stopping_a_queued_batch(client, workspace):
    run_id = _start(client)
    assert client.post(f"/grade/verify/{run_id}/stop?format=json").json() == {"stopped": [run_id]}
    assert Run.objects.get(pk=run_id).status == "canceled"


def test_htmx_gets_the_batch_fragment_and_the_page_follows_its_socket(client, workspace):
    run_id = _start(client)
    html = client.get(f"/grade/verify/{run_id}", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="verify-batch"' in html and "<html" not in html and "every 1s" not in html
    page = client.get(f"/grade/verify/{run_id}").content.decode()
    assert 'data-live-view="verify_batch" data-live-key="' + run_id in page


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", "/grade/verify/run"), ("post", "/grade/verify"), ("get", "/grade/verify/{run}/stop")],
)
def test_wrong_methods_are_405(client, workspace, method, url):
    run_id = _start(client)
    assert getattr(client, method)(url.format(run=run_id)).status_code == 405


@pytest.mark.parametrize(
    "url",
    [
        "/grade/verify/run-000000000000000000000000",
        "/grade/verify/bad",
        "/grade/verify?deck=../../etc/passwd",
        "/grade/verify/compare?before=x&after=y",
    ],
)
def test_unknown_ids_are_404(client, workspace, url):
    assert client.get(url).status_code == 404


def test_posts_need_the_csrf_token(csrf_client, workspace):
    assert csrf_client.post("/grade/verify/run", FORM).status_code == 403
