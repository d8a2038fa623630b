"""The Open Responses compliance suite's cases (tests/endpoint/compliance.py) against a real
`gambit serve`: all seven on a proxied provider model (the fake model server on 127.0.0.1
answers as a model would: a function call when it is given tools, text otherwise), and the
four text cases on a deck whose model is that upstream."""

from __future__ import annotations

import pytest

from tests.endpoint.compliance import CASES, TEXT_CASES, run_suite
from tests.endpoint.serving import KEY, serve, write
from tests.support.fake_model_server import FakeModelServer, FunctionCall, RecordedRequest, Reply


def _as_a_model(request: RecordedRequest) -> Reply:
    if request.body.get("tools"):
        return Reply(
            function_calls=[FunctionCall("get_weather", {"location": "San Francisco, CA"})]
        )
    return Reply(deltas=["Ahoy, ", "hello ", "there."])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    upstream = FakeModelServer().start()
    folder = tmp_path_factory.mktemp("compliance")
    write(
        folder,
        "decks/support/PROMPT.md",
        '+++\nlabel = "Support"\nmodelParams.model = "openresponses/fake"\n+++\nHelp briefly.\n',
    )
    proc, url, log = serve(folder, env_extra=upstream.env())
    yield url, upstream
    proc.terminate()
    proc.wait(timeout=10)
    log.close()
    upstream.stop()


@pytest.mark.parametrize(
    ("model", "cases"),
    [("openresponses/fake", tuple(c.id for c in CASES)), ("deck/support", TEXT_CASES)],
)
def test_the_compliance_cases_pass(server, model, cases):
    url, upstream = server
    upstream.reset()
    upstream.queue_many([_as_a_model] * len(cases))
    results = run_suite(url + "/v1", KEY, model, cases)
    failures = {r.id: r.errors for r in results if not r.passed}
    assert not failures
    assert len(results) == len(cases) == (7 if model.startswith("openresponses/") else 4)
