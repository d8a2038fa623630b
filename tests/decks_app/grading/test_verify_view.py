"""Verify in the browser: start a batch, run it through the run executor, read its metrics,
scenario sessions and grades; compare batches; the 405/403/404 matrix and htmx."""

from __future__ import annotations

import asyncio

import pytest

from decks_app.grading import verify as verify_service
from decks_app.grading import verify_records
from decks_app.grading.views.verify import live_batch
from decks_app.models import Run, Session, TraceEvent
from decks_app.runs import executor, queue
from decks_app.sessions import scenarios
from gambit.core._grading import Grade, GradingRun
from gambit.core._statistics import wilson
from gambit.core.verify import GradeRecord, ScenarioRunRecord

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


def test_outliers_link_to_their_sessions_grades(client, workspace):
    run_id = _start(client, threshold="3")  # the demo grader's grades all fall below it
    assert _execute(run_id) == "completed"
    batch = client.get(f"/grade/verify/{run_id}.json").json()
    (summary,) = batch["summaries"].values()
    assert summary["outliers"] and all(o["failures"] for o in summary["outliers"])
    sessions = [r["session"] for r in batch["runs"]]
    html = client.get(f"/grade/verify/{run_id}").content.decode()
    # outliers link to their session's grades, which link back to the batch
    assert 'class="outliers"' in html
    assert any(
        f'href="/grade?session={sid}#imported-grades">its grades</a>' in html for sid in sessions
    )


def test_a_batch_runs_grades_and_reports(client, workspace):
    run_id = _start(client)
    assert client.get(f"/grade/verify/{run_id}.json").json()["status"] == "queued"
    assert _execute(run_id) == "completed"
    batch = client.get(f"/grade/verify/{run_id}.json").json()
    assert batch["progress"]["run"] == {
        "total": 2, "done": 2, "queued": 0, "running": 0, "completed": 2, "failed": 0,
    }  # fmt: skip
    assert (batch["progress"]["work"], batch["progress"]["done"]) == (6, 6)
    assert batch["progress"]["percent"] == 100 and batch["progress"]["graded"] is True
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
    # the model that answered it (the header said "no model answered", the list nothing)
    twin = client.get(f"/test/{scenario.id}.json").json()
    assert (twin["runs"][-1]["model"], twin["runs"][-1]["offline"]) == ("offline/demo", True)
    # it started its duration before it finished (the two were the same instant)
    recorded_run = scenario.runs.get()
    spent = (recorded_run.finished_at - recorded_run.started_at).total_seconds() * 1000
    assert recorded_run.duration_ms and abs(spent - recorded_run.duration_ms) < 5
    # scenario sessions are conversations in the Test tab and gradable in the Grade tab
    listed = [s["id"] for s in client.get("/test.json").json()["sessions"]]
    assert sessions[0] in listed and Run.objects.get(pk=run_id).session_id not in listed
    html = client.get(f"/grade/verify/{run_id}").content.decode()
    assert 'id="chart-scores"' in html and 'id="verify-chart-data"' in html
    # grades below the threshold are the grader's reasons, not "failures" of it
    assert "Grading failures" not in html and "Grading Failures" not in html
    assert "vendor/chart.js/chart.umd.min.js" in html
    assert f"/test/{sessions[0]}" in html
    # every run passed alike: none stands out, so no outliers are listed
    assert summary["passRate"] == 1 and len({o["mean"] for o in summary["outliers"]}) <= 1
    assert summary["outliers"] == [] and 'class="outliers"' not in html
    assert scenario.meta["gradingRuns"][0]["verifyBatchRunId"] == run_id
    grades = client.get(f"/grade?session={sessions[0]}").content.decode()
    # two repeats are repeats 1 and 2, as the twin counts them (the page said 2 and 3)
    for n in (1, 2):
        assert f'href="/grade/verify/{run_id}">Verify batch, repeat {n}</a>' in grades
    assert "repeat 3" not in grades
    assert f'id="grading-{scenario.meta["gradingRuns"][0]["id"]}"' in grades
    history = client.get("/grade/verify.json").json()["batches"]
    assert [b["id"] for b in history] == [run_id]
    # each pass rate in the list is named by its grader (the name was on hover only)
    listed = client.get("/grade/verify").content.decode()
    label = history[0]["graderLabels"][FORM["grader"]]
    assert f'<span title="{FORM["grader"]}">{label} ' in listed


def test_two_batches_compare(client, workspace):
    first, second = _start(client), _start(client)
    _execute(first)
    _execute(second)
    data = client.get(f"/grade/verify/compare.json?before={first}&after={second}").json()
    (grader,) = data["graders"].values()
    assert grader["mean"]["delta"] == 0 and grader["passRate"]["delta"] == 0
    # its rates count runs, not grades, and say so (the batch page's count grades)
    assert (grader["passRate"]["beforeRuns"], grader["passRate"]["afterRuns"]) == (2, 2)
    html = client.get(f"/grade/verify/compare?before={first}&after={second}").content.decode()
    assert "Before and after" in html and "] of 2 runs</span>" in html


def test_a_batch_that_has_not_finished_cannot_be_compared(client, workspace):
    first, second = _start(client), _start(client)
    response = client.get(f"/grade/verify/compare.json?before={first}&after={second}")
    assert response.status_code == 400 and "must have completed" in response.json()["error"]


def test_a_compare_without_two_different_batches_says_so(client, workspace):
    # Before: no `after` was a 404 "No such Verify batch", and one batch on both sides a
    # full page of "no clear change".
    first = _start(client)
    for query, said in (
        (f"before={first}", "choose two batches to compare (after is missing)"),
        ("", "(before and after are missing)"),
        (f"before={first}&after={first}", "that is the same batch twice"),
    ):
        answer = client.get(f"/grade/verify/compare.json?{query}")
        assert answer.status_code == 400 and said in answer.json()["error"], query
    page = client.get(f"/grade/verify/compare?before={first}").content.decode()
    assert 'href="/grade/verify"' in page


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


def test_a_refused_form_comes_back_with_the_error_and_everything_as_sent(client, workspace):
    # Before, a refused form was an error page with a link back to a fresh form: the runs,
    # repeats and ticks the user had set were gone.
    sent = {**FORM, "grader": "", "runs": "7", "repeats": "3", "threshold": "1.5"}
    response = client.post("/grade/verify/run", sent)
    html = response.content.decode()
    assert response.status_code == 400 and Run.objects.count() == 0
    assert (
        '<p class="callout error" id="verify-error" role="alert">pick at least one grader</p>'
        in html
    )
    assert 'name="runs" min="1" max="100" value="7"' in html
    assert 'name="repeats" min="1" max="20" value="3"' in html
    assert 'name="threshold" min="-3" max="3" step="0.5" value="1.5"' in html
    assert f'value="{SCENARIO}" checked>' in html  # ticked as sent
    assert f'value="{TONE_PATH}">' in html  # unticked as sent
    # Sent again with a grader ticked, it starts.
    assert client.post("/grade/verify/run", {**sent, "grader": TONE_PATH}).status_code == 302


def test_a_deck_without_graders_says_what_to_do_instead_of_offering_a_run_that_fails(
    client, settings, tmp_path
):
    for folder, front in [
        ("bot", '[[scenarios]]\npath = "../persona/PROMPT.md"\nlabel = "Asks"\n'),
        ("persona", ""),
    ]:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "PROMPT.md").write_text(f"+++\n{front}+++\nSay hello.\n")
    settings.GAMBIT_WORKSPACE = str(tmp_path)
    html = client.get("/grade/verify?deck=bot/PROMPT.md").content.decode()
    assert (
        '<button type="submit" id="run-verify" disabled aria-describedby="verify-no-graders">'
        in html
    )
    assert "<code>bot/PROMPT.md</code> declares no grader" in html
    assert 'href="/build/deck?path=bot/PROMPT.md"' in html and 'href="/test#scenario-form"' in html
    assert client.get("/grade/verify.json?deck=bot/PROMPT.md").json()["graders"] == []


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
    [
        ("get", "/grade/verify/run"),
        ("post", "/grade/verify"),
        ("get", "/grade/verify/{run}/stop"),
        ("post", "/grade/verify/{run}"),
        ("post", "/grade/verify/compare"),
    ],
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
        "/grade/verify/compare.json?before=run-000000000000000000000000&after=x",
        "/grade/verify/run-000000000000000000000000.json",
    ],
)
def test_unknown_ids_are_404(client, workspace, url):
    assert client.get(url).status_code == 404


def test_posts_need_the_csrf_token(csrf_client, client, workspace):
    assert csrf_client.post("/grade/verify/run", FORM).status_code == 403
    run_id = _start(client)
    assert csrf_client.post(f"/grade/verify/{run_id}/stop").status_code == 403


def test_htmx_gets_the_batch_with_its_progress_and_table(client, workspace):
    run_id = _start(client)
    _execute(run_id)
    html = client.get(f"/grade/verify/{run_id}", HTTP_HX_REQUEST="true").content.decode()
    assert html.startswith('\n  <div id="verify-batch"') or html.lstrip().startswith(
        '<div id="verify-batch"'
    )
    assert 'id="batch-progress"' in html and 'id="verify-matrix"' in html
    assert 'id="only-failures"' not in html  # the filter stays outside the swapped part


SCENARIO = FORM["scenario"]
TONE_PATH = "support/graders/tone/PROMPT.md"


def test_a_batch_without_graders_shows_real_progress_and_finishes(client, workspace):
    # issue 26: a batch started from the Test tab read "Grades: 0 completed ... of ?" and
    # "0/?" forever: it has no grader, so there is no grade to count
    batch = scenarios.start_batch(
        workspace, "support/PROMPT.md", SCENARIO, runs=3, concurrency=2, max_turns=1
    )
    queued = client.get(f"/grade/verify/{batch.id}.json").json()["progress"]
    assert (queued["work"], queued["done"], queued["graded"]) == (3, 0, False)
    html = client.get(f"/grade/verify/{batch.id}").content.decode()
    assert '<progress id="batch-progress" max="3" value="0"' in html
    assert "no grader" in html and "of ?" not in html and "estimating the time left" in html
    assert _execute(batch.id) == "completed"
    data = client.get(f"/grade/verify/{batch.id}.json").json()
    assert data["progress"]["done"] == 3 and data["progress"]["percent"] == 100
    assert data["progress"]["run"]["completed"] == 3 and data["grades"] == []
    html = client.get(f"/grade/verify/{batch.id}").content.decode()
    assert '<progress id="batch-progress" max="3" value="3"' in html
    assert html.count("<tr data-run=") == 3 and "of ?" not in html
    assert html.count('data-verdict="done"') == 3  # run, not graded: not a "pass"
    # nothing about passing where nothing is graded, and the way back is the Test tab
    assert "pass at score" not in html and 'id="only-failures"' not in html
    assert "A cell is one run graded" not in html and "3 runs × 1 scenario," in html
    assert '<a href="/test">← Test</a>' in html
    listed = client.get("/grade/verify").content.decode()
    row = listed[listed.index(f'data-batch="{batch.id}"') :].split("</tr>")[0]
    assert "3/3" in row and "?" not in row


def test_the_runs_table_fills_in_while_the_batch_runs(client, workspace):
    # each scenario run is saved as it finishes; the page lists it before the batch ends
    batch = scenarios.start_batch(
        workspace, "support/PROMPT.md", SCENARIO, runs=2, concurrency=1, max_turns=1
    )
    record = ScenarioRunRecord(
        id="r1", scenario=SCENARIO, scenario_label="Late", index=1, status="completed", turns=1
    )
    verify_records.save_scenario_run(batch.session, batch.id, record, [])
    data = client.get(f"/grade/verify/{batch.id}.json").json()
    assert data["status"] == "queued" and [r["id"] for r in data["runs"]] == ["r1"]
    assert data["runs"][0]["scenarioLabel"] == "Late" and data["runs"][0]["session"]
    # its grade, saved as it finishes, fills its cell (the lowest-scored turn's reason)
    turns = [Grade(2, "kind"), Grade(-1, "never gives a date")]
    grading = GradingRun("g1", TONE_PATH, "Tone", "turns", turns, "completed", "now")
    grade = GradeRecord("g1", "r1", TONE_PATH, "Tone", "hash", 1, "completed", grading)
    verify_records.save_grade(data["runs"][0]["session"], grade, batch.id)
    data = client.get(f"/grade/verify/{batch.id}.json").json()
    (cell,) = data["matrix"]["scenarios"][0]["rows"][0]["cells"].values()
    assert cell["verdict"] == "pass" and cell["reasons"] == ["never gives a date"]
    assert data["progress"]["run"]["done"] == 1  # the bar counts what the table shows
    live = live_batch(batch.session_id, batch.id)
    assert 'hx-swap-oob="true"' in live and '<tr data-run="r1"' in live
    assert "never gives a date" in live
    assert live_batch("session-000000000000000000000000", batch.id) == ""


def test_the_matrix_opens_each_cell_on_its_reasons_and_the_conversation(client, workspace):
    run_id = _start(client)
    _execute(run_id)
    data = client.get(f"/grade/verify/{run_id}.json").json()
    (scenario,) = data["matrix"]["scenarios"]
    assert data["matrix"]["graders"] == [FORM["grader"]]
    assert len(scenario["rows"]) == 2
    cell = scenario["rows"][0]["cells"][FORM["grader"]]
    assert cell["verdict"] in ("pass", "fail", "error") and len(cell["scores"]) == 2
    tally = scenario["graders"][FORM["grader"]]
    assert tally["passed"] + tally["failed"] + tally["errors"] == 4
    (summary,) = data["summaries"].values()
    assert summary["passRateInterval"]["method"] == "wilson"
    assert summary["verdicts"]["passed"] == summary["passed"]
    html = client.get(f"/grade/verify/{run_id}").content.decode()
    assert 'id="verify-matrix"' in html and 'id="only-failures"' in html
    assert html.count('<details><summary><span class="verdict') == 2
    assert 'data-figure="passRateInterval">[' in html
    assert "pairs of repeats over 2 runs" in html
    # the pass rate's interval counts the 2 runs, each once with its repeats' share of passes,
    # not the 4 grades (docs/calibration.md), on the page as in the CLI
    shares = [sum(v == "pass" for v in row_verdicts(r)) / 2 for r in scenario["rows"]]
    expected = wilson(sum(shares), 2)
    assert summary["passRateRuns"] == 2 and tally["runs"] == 2
    assert summary["passRateInterval"]["low"] == round(expected.low, 4)
    assert summary["passRateInterval"]["high"] == round(expected.high, 4)
    assert tally["passRateInterval"] == summary["passRateInterval"]
    assert 'data-figure="passRateRuns">n=2 runs' in html


def row_verdicts(row):
    (cell,) = row["cells"].values()
    return ["pass" if s is not None and s >= 0 else "fail" for s in cell["scores"]]


def test_a_batch_saved_with_grade_counted_intervals_reads_as_runs(client, workspace):
    # A report saved before the pass rate's interval counted runs carries the interval over
    # grades; the page recomputes it from the batch's grades, as the CLI would.
    run_id = _start(client)
    _execute(run_id)
    fresh = client.get(f"/grade/verify/{run_id}.json").json()
    run = Run.objects.get(pk=run_id)
    result = run.read_result(verify_service.VerifyResult)
    for summary in result.report["summaries"].values():
        summary["passRateInterval"] = {"low": 0.99, "high": 1.0, "level": 0.95, "method": "wilson"}
        summary.pop("passRateRuns", None)
    run.result = result
    run.save(update_fields=["result"])
    old = client.get(f"/grade/verify/{run_id}.json").json()
    (before,), (after,) = fresh["summaries"].values(), old["summaries"].values()
    assert after["passRateInterval"] == before["passRateInterval"]
    assert after["passRateRuns"] == 2


def test_the_compare_page_names_the_change_and_the_rule(client, workspace):
    first, second = _start(client), _start(client)
    _execute(first)
    _execute(second)
    data = client.get(f"/grade/verify/compare.json?before={first}&after={second}").json()
    (grader,) = data["graders"].values()
    assert grader["passRate"]["direction"] == "no clear change"
    assert grader["passRate"]["beforeInterval"]["method"] == "wilson"
    html = client.get(f"/grade/verify/compare?before={first}&after={second}").content.decode()
    assert "two-proportion" in html and "no clear change" in html
    assert data["changes"] == ["The files of the deck, its scenarios and its graders are the same."]
    (scenario,) = data["scenarios"]
    assert scenario["graders"][FORM["grader"]]["before"]["graded"] >= 0


def test_the_compare_page_names_a_changed_setting_and_deck(client, workspace):
    first, second = _start(client), _start(client, runs="3")
    _execute(first)
    Session.objects.filter(runs__id=second).update(meta={"deckHash": "0123456789abcdef"})
    _execute(second)
    data = client.get(f"/grade/verify/compare.json?before={first}&after={second}").json()
    assert "The runs per scenario changed: 2 → 3." in data["changes"]
    assert any(
        c.startswith("The files of the deck, its scenarios and its graders changed (")
        for c in data["changes"]
    )


def test_batches_of_another_deck_are_not_offered_and_a_compare_of_them_says_so_first(
    client, workspace
):
    first, second = _start(client), _start(client)
    Run.objects.filter(pk__in=[first, second]).update(status="completed")
    # the first batch is made another deck's (as a batch of my_bot would be)
    Session.objects.filter(runs__id=first).update(deck_path="my_bot/PROMPT.md")
    html = client.get(f"/grade/verify/{second}").content.decode()
    assert f'<option value="{first}">' not in html
    compared = client.get(f"/grade/verify/compare.json?before={first}&after={second}")
    changes = compared.json()["changes"]
    assert changes[0] == (
        "The deck under test changed: my_bot/PROMPT.md → support/PROMPT.md; these batches "
        "test different agents."
    )


def test_pass_rates_are_corrected_for_the_graders_errors_when_it_was_rated(client, workspace):
    # issue 28 §2: beside the raw pass rate, the Rogan-Gladen rate from the ratings of the
    # grader's grades (here: of this batch's own conversations, rated in the Test tab)
    first = _start(client)
    _execute(first)
    before = client.get(f"/grade/verify/{first}.json").json()
    (summary,) = before["summaries"].values()
    assert summary["correctedPassRate"] is None  # nothing rated yet: no column
    assert "Corrected for the grader" not in client.get(f"/grade/verify/{first}").content.decode()
    sessions = [Session.objects.get(pk=r["session"]) for r in before["runs"]]
    for session, score in zip(sessions, (2, -2), strict=True):
        # the graded message (the grader's results name it)
        ref = session.meta["gradingRuns"][0]["results"][0]["messageRefId"]
        rated = client.post(f"/test/{session.id}/feedback/{ref}", {"score": str(score)})
        assert rated.status_code in (200, 204, 302), rated.content
    data = client.get(f"/grade/verify/{first}.json").json()
    (summary,) = data["summaries"].values()
    corrected = summary["correctedPassRate"]
    assert corrected["pairs"] == 2 and corrected["raw"]["value"] == summary["passRate"]
    # two pairs: either a figure with its interval, or why the correction is undefined
    assert corrected["corrected"]["value"] is not None or corrected["undefined"]
    assert summary["evidence"]["enoughEvidence"] is False
    html = client.get(f"/grade/verify/{first}").content.decode()
    assert "Corrected for the grader" in html and 'data-figure="correctedPassRate"' in html
    assert "too few ratings to judge" in html


def test_the_batches_list_pages_back_to_the_first_and_a_new_batch_shifts_nothing(
    client, workspace, monkeypatch
):
    monkeypatch.setattr(verify_service, "BATCHES_PER_PAGE", 3)
    started = [_start(client) for _ in range(5)]
    first = client.get("/grade/verify.json").json()
    assert len(first["batches"]) == 3 and first["page"]["newerUrl"] is None
    _start(client)  # a batch started while the reader looks at the first page
    second = client.get(first["page"]["olderUrl"]).json()
    seen = [b["id"] for b in first["batches"] + second["batches"]]
    assert sorted(seen) == sorted(started)  # each batch once, the new one on no old page
    assert second["page"]["olderUrl"] is None and second["page"]["newerUrl"]
    html = client.get("/grade/verify").content.decode()
    assert 'class="pager-older"' in html and "Older →" in html
    bad = client.get("/grade/verify?before=not-a-cursor")
    assert bad.status_code == 400 and "start again from the newest" in bad.content.decode()


def test_the_compare_picker_offers_the_newest_batches_and_takes_any_id(
    client, workspace, monkeypatch
):
    monkeypatch.setattr(verify_service, "BATCHES_PER_PAGE", 2)
    started = [_start(client) for _ in range(4)]
    Run.objects.filter(pk__in=started).update(status="completed")
    html = client.get(f"/grade/verify/{started[-1]}").content.decode()
    offered = [b for b in started[:-1] if f'<option value="{b}">' in html]
    assert len(offered) == 2
    assert "The newest 2 of 3 completed batches of this deck are offered" in html
    assert 'name="before" list="comparable-batches"' in html
