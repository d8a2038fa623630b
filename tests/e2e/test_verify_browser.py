"""Verify in Chromium against `gambit serve`: the batch page fills in while it runs, its
matrix opens on reasons and conversations, the failures filter, and the histogram's bins.

The model is a fake server on 127.0.0.1. Once it has answered the first grader, it holds
every later reply until the test opens its gate, so the batch is certainly still running
with a row filled in when the test looks (timing alone made that a race on a loaded
machine). A grader's score is -1 or +2, drawn from the conversation (the same for the same
input).
"""

from __future__ import annotations

import json
import os
import re
import threading
import zlib

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import _free_port, serve_simulator, stop
from tests.support.fake_model_server import FakeModelServer, FunctionCall, Reply


class GatedGradingModel(FakeModelServer):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self._graded_once = threading.Event()

    def _next_reply(self, request):
        if self._graded_once.is_set():
            # a request thread of the threading server: waiting here holds only this reply
            self.gate.wait(timeout=120)
        body = request.body if isinstance(request.body, dict) else {}
        tools = json.dumps(body.get("tools") or [])
        if (
            "gambit_respond" in tools
            and "function_call_output" not in json.dumps(body.get("input", ""))[-400:]
        ):
            score = 2 if zlib.crc32(json.dumps(body.get("input")).encode()) % 2 else -1
            reason = "kind and exact" if score > 0 else "never says when the parcel arrives"
            payload = {"score": score, "reason": reason, "evidence": []}
            self._graded_once.set()
            return Reply(function_calls=[FunctionCall("gambit_respond", {"payload": payload})])
        return Reply(deltas=["Your parcel ", "is on its way."], delay=0.05)


@pytest.fixture(scope="module")
def verify_server(tmp_path_factory):
    model = GatedGradingModel().start()
    folder = tmp_path_factory.mktemp("verify-sim")
    log = (folder / "serve.log").open("w")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(model.env())
    env.update({"GAMBIT_SIM_DB": str(folder / "sim.sqlite3")})
    port = _free_port()
    proc = serve_simulator(env, port, log)
    yield f"http://127.0.0.1:{port}", model
    model.gate.set()
    stop(proc)
    log.close()
    model.stop()


RUNNING_ROWS = """() => {
  const status = document.querySelector('#verify-batch [data-status]');
  const rows = document.querySelectorAll('#verify-matrix tr[data-run]').length;
  return status && status.dataset.status === 'running' && rows >= 1;
}"""


def test_a_batch_fills_in_as_it_runs_and_its_matrix_opens(page, verify_server):
    verify_url, model = verify_server
    page.goto(verify_url + "/grade/verify")
    page.fill("input[name=runs]", "4")
    page.fill("input[name=repeats]", "1")
    page.fill("input[name=concurrency]", "1")
    page.fill("input[name=maxTurns]", "1")
    page.click("#run-verify")
    page.wait_for_url(re.compile(r".*/grade/verify/run-[0-9a-f]{24}$"))
    progress = page.locator("progress#batch-progress")
    expect(progress).to_have_attribute("max", "8")  # 4 runs and 4 grades
    # the table of runs fills in while the batch still runs (the session socket's partials)
    try:
        page.wait_for_function(RUNNING_ROWS, timeout=60_000)
        assert 0 < int(progress.get_attribute("value") or 0) < 8
        expect(page.locator("[data-progress=eta]")).to_contain_text(
            re.compile(r"left|almost|estim")
        )
    finally:
        model.gate.set()
    expect(page.locator("#verify-batch [data-status]")).to_have_text("completed", timeout=90_000)
    expect(progress).to_have_attribute("value", "8")
    expect(page.locator("#verify-matrix tr[data-run]")).to_have_count(4)

    # one definition of pass and fail: cells, the scenario's tally and the metrics agree
    batch = page.request.get(page.url + ".json").json()
    (summary,) = batch["summaries"].values()
    cells = [
        row["cells"][grader]
        for s in batch["matrix"]["scenarios"]
        for row in s["rows"]
        for grader in row["cells"]
    ]
    failed = sum(1 for c in cells if c["verdict"] == "fail")
    assert summary["verdicts"]["failed"] == failed == 4 - summary["passed"]
    expect(page.locator("#verify-matrix td.cell.fail")).to_have_count(failed)
    expect(page.locator("[data-figure=notPassed]")).to_contain_text(
        re.compile(rf"{failed} grades? below the threshold")
    )
    expect(page.locator("[data-figure=passRateInterval]")).to_have_text(
        re.compile(r"^\[\d+%–\d+%\]$")
    )

    # a failing cell opens on its reason and its conversation
    if failed:
        cell = page.locator("#verify-matrix td.cell.fail").first
        cell.locator("summary").click()
        expect(cell.locator("ul.reasons")).to_contain_text("never says when the parcel arrives")
        expect(cell.get_by_role("link", name="Open the conversation")).to_be_visible()
    # the filter hides the runs that passed, and only those
    passing = page.locator('#verify-matrix tr[data-run][data-verdict="pass"]')
    page.check("#only-failures")
    for i in range(passing.count()):
        expect(passing.nth(i)).to_be_hidden()
    if failed:
        expect(page.locator('#verify-matrix tr[data-verdict="fail"]').first).to_be_visible()
        expect(page.locator("#only-failures-none")).to_be_hidden()
    else:  # an empty table said nothing; now a sentence says why
        expect(page.locator("#only-failures-none")).to_be_visible()
    page.uncheck("#only-failures")
    expect(page.locator("#only-failures-none")).to_be_hidden()

    # the histogram's bins are the core's: the threshold is an edge, failing bins say so
    page.wait_for_function("() => window.Chart && Chart.getChart('chart-scores')")
    labels = page.evaluate("Chart.getChart('chart-scores').data.labels")
    assert "−1 ≤ s < 0 (fail)" in labels and "0 ≤ s < +1 (pass)" in labels
    counts = page.evaluate("Chart.getChart('chart-scores').data.datasets[0].data")
    assert counts[labels.index("−1 ≤ s < 0 (fail)")] == failed
