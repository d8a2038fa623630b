"""A deck called through `/v1/responses` of a real `gambit serve` exports its spans when
`OTEL_EXPORTER_OTLP_ENDPOINT` is set, as the simulator's own runs do (docs/observability.md):
they reach a real OTLP/HTTP receiver on 127.0.0.1 with the call's session as the
conversation."""

from __future__ import annotations

import httpx

from tests.endpoint.serving import KEY, serve, write
from tests.otel.receiver import Receiver


def test_a_deck_called_over_the_endpoint_exports_its_run(tmp_path):
    write(
        tmp_path,
        "decks/greeter/deck.py",
        """
        import gambit
        deck = gambit.define_deck(run=lambda ctx: f"Hello, {ctx.input}!", label="Greeter")
        """,
    )
    receiver = Receiver().start()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # the SDK's batch sends within a tenth of a second
    }
    proc, url, log = serve(tmp_path, env_extra=env)
    try:
        response = httpx.post(
            url + "/v1/responses",
            json={"model": "deck/greeter", "input": "Ada"},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        session = response.headers["Gambit-Session-Id"]
        spans = receiver.wait_for(1)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        receiver.stop()
    assert spans, (tmp_path / "serve.log").read_text()[-2000:]
    [agent] = [s for s in spans if s.name.startswith("invoke_agent")]
    assert agent.name == "invoke_agent greeter"  # a folder's deck.py is named by its folder
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {session}
