"""A server restart marks the runs it left in flight as interrupted (embedded profile), and
the interrupted turn is not lost: the user's message and the partial reply stay in the
conversation, and Retry runs the turn again."""

from __future__ import annotations

import os
import signal
import time

import httpx

from tests.support.fake_model_server import Reply

from .conftest import _free_port, serve_simulator


def test_a_restart_marks_in_flight_runs_interrupted(fake_server, tmp_path):
    fake_server.queue(Reply(deltas=[f"w{i} " for i in range(400)], delay=0.02))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({**fake_server.env(), "GAMBIT_SIM_DB": str(tmp_path / "sim.sqlite3")})
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "serve.log").open("w") as log:
        proc = serve_simulator(env, port, log)
        try:
            client = httpx.Client(base_url=url, timeout=10, headers={"Origin": url})
            client.get("/test")
            headers = {"X-CSRFToken": client.cookies["csrftoken"]}
            r = client.post(
                "/test/new?format=json",
                data={"deck": "support/PROMPT.md", "model": "openresponses/fake"},
                headers=headers,
            )
            session = r.json()["id"]
            r = client.post(
                f"/test/{session}/send?format=json", data={"message": "go"}, headers=headers
            )
            assert r.status_code == 202
            deadline = time.monotonic() + 10
            # Past the run's opening events (about eight) and a dozen deltas.
            while client.get(f"/test/{session}.json").json()["cursor"] < 20:
                assert time.monotonic() < deadline, "the run did not start streaming"
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGKILL)  # a crash: nothing gets to clean up
            proc.wait(timeout=10)
        proc = serve_simulator(env, port, log)
        try:
            data = httpx.get(f"{url}/test/{session}.json", timeout=10).json()
            assert data["status"] == "interrupted"
            assert "interrupted" in data["runs"][0]["error"]
            assert data["activeRunId"] is None
            banner = (tmp_path / "serve.log").read_text()
            assert f"Gambit simulator: http://127.0.0.1:{port}/" in banner
            assert "profile: embedded" in banner and "[x] offline" in banner
            assert "1 run(s) left running by a previous server: marked interrupted" in banner
            # The turn survived the crash: the message and the reply as far as it streamed.
            said = [c for c in data["conversation"] if c["kind"] in ("user", "assistant")]
            assert said[0]["kind"] == "user" and said[0]["text"] == "go"
            assert said[1]["kind"] == "assistant" and said[1]["status"] == "interrupted"
            assert said[1]["text"].startswith("w0 w1 w2")
            assert data["trace"][0]["status"] == "interrupted"
            assert data["retry"]["runId"] == data["runs"][0]["id"]
            # Retry: the same message again, from where the turn started.
            fake_server.queue(Reply(text="Here it is."))
            client = httpx.Client(base_url=url, timeout=10, headers={"Origin": url})
            client.get("/test")
            r = client.post(
                f"/test/{session}/retry?format=json",
                data={"runId": data["retry"]["runId"]},
                headers={"X-CSRFToken": client.cookies["csrftoken"]},
            )
            assert r.status_code == 202, r.text
            deadline = time.monotonic() + 20
            while (data := client.get(f"/test/{session}.json").json())["status"] != "completed":
                assert time.monotonic() < deadline, data["status"]
                time.sleep(0.1)
            said = [
                (c["kind"], c["text"])
                for c in data["conversation"]
                if c["kind"] in ("user", "assistant")
            ]
            assert said == [("user", "go"), ("assistant", "Here it is.")]
            sent = fake_server.requests[-1].body["input"]
            assert [m for m in sent if m.get("role") == "user" and "go" in str(m)]
            assert "w0 w1" not in str(sent)  # the cut-off reply went with the retried turn
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_sigterm_stops_the_server_within_10_s_saving_what_streamed(fake_server, tmp_path):
    fake_server.queue(Reply(deltas=[f"s{i} " for i in range(400)], delay=0.02))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({**fake_server.env(), "GAMBIT_SIM_DB": str(tmp_path / "sim.sqlite3")})
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "serve.log").open("w") as log:
        proc = serve_simulator(env, port, log)
        client = httpx.Client(base_url=url, timeout=10, headers={"Origin": url})
        client.get("/test")
        headers = {"X-CSRFToken": client.cookies["csrftoken"]}
        session = client.post(
            "/test/new?format=json",
            data={"deck": "support/PROMPT.md", "model": "openresponses/fake"},
            headers=headers,
        ).json()["id"]
        client.post(f"/test/{session}/send?format=json", data={"message": "bye"}, headers=headers)
        deadline = time.monotonic() + 10
        while (
            sum(
                e["type"] == "response.output_text.delta"
                for e in client.get(f"/test/{session}.json").json()["events"]
            )
            < 3
        ):
            assert time.monotonic() < deadline, "the run did not start streaming"
            time.sleep(0.1)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        assert time.monotonic() - started < 10
        proc = serve_simulator(env, port, log)
        try:
            data = httpx.get(f"{url}/test/{session}.json", timeout=10).json()
            assert data["status"] == "interrupted"
            said = [c for c in data["conversation"] if c["kind"] in ("user", "assistant")]
            assert said[0]["text"] == "bye" and said[1]["text"].startswith("s0 s1")
            assert said[1]["status"] == "interrupted" and data["retry"] is not None
        finally:
            proc.terminate()
            proc.wait(timeout=10)
