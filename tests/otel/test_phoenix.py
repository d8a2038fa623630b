"""Arize Phoenix, started by the test on 127.0.0.1, receives a scenario batch's spans from
`gambit scenario --runs 2` and gives them back through its client with their GenAI
attributes; a screenshot of the trace in Phoenix's UI (Playwright, the machine's Chromium)
is what docs/observability.md shows.

Phoenix is the `phoenix` extra (`pip install -e '.[phoenix]'`), not part of `dev`
(docs/decisions.md, "OpenTelemetry export"): without it the test is skipped, saying so.
GAMBIT_DOCS_SCREENSHOTS=1 writes the screenshot to docs/images/ (else to a temporary folder).
"""

from __future__ import annotations

import collections
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "phoenix.server",
    reason="arize-phoenix is not installed: pip install -e '.[phoenix]' (the phoenix extra)",
)
from phoenix.client import Client

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "examples" / "support"
GAMBIT = str(Path(sys.executable).parent / "gambit")
PHOENIX = str(Path(sys.executable).parent / "phoenix")
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = ROOT / "docs" / "images" / "phoenix-trace.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = open(work / "phoenix.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # its first start migrates its database
    try:
        while True:
            assert proc.poll() is None, (work / "phoenix.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not start in 300 s"
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_phoenix_receives_a_scenario_batch_and_gives_back_its_genai_spans(
    phoenix: str, tmp_path: Path
):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("OTEL_")
    }
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        GAMBIT_DEMO_DELAY_MS="0",
    )
    done = subprocess.run(
        [
            GAMBIT,
            "scenario",
            str(SUPPORT / "PROMPT.md"),
            "--scenario",
            str(SUPPORT / "scenarios" / "late_delivery" / "PROMPT.md"),
            "--grade",
            str(SUPPORT / "graders" / "tone" / "PROMPT.md"),
            "--runs",
            "2",
            "--max-turns",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "OpenTelemetry" not in done.stderr

    client = Client(base_url=phoenix)
    spans: list = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # Phoenix writes what it receives in batches
        seen = len(spans)
        spans = client.spans.get_spans(project_identifier="default", limit=1000)
        if len(spans) == seen and sum(s["name"].startswith("grade ") for s in spans) >= 4:
            break
        time.sleep(1)
    kinds = collections.Counter(s["name"].split(" ")[0] for s in spans)
    # Two scenario runs of two persona turns: four graded assistant turns.
    assert kinds["grade"] == 4, kinds
    assert kinds["invoke_agent"] > 0 and kinds["chat"] > 0 and kinds["execute_tool"] > 0

    by_id = {s["context"]["span_id"]: s for s in spans}
    for span in spans:
        if span["name"].startswith("grade "):
            a = span["attributes"]
            assert span["span_kind"] == "EVALUATOR" and span["parent_id"] is None
            assert a["gen_ai.evaluation.name"] == "Tone: kind, concrete, short"
            assert a["gen_ai.evaluation.score.label"] in ("pass", "fail")
            assert isinstance(a["gen_ai.evaluation.score.value"], int | float)
            assert a["gen_ai.evaluation.explanation"]  # content was opted in
        if span["name"] == "chat offline/demo":
            a = span["attributes"]
            assert span["span_kind"] == "LLM"
            assert a["gen_ai.provider.name"] == "offline"
            assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "offline/demo"
            assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.response.finish_reasons"]
            # nested: every model call sits under a deck's invoke_agent span
            assert by_id[span["parent_id"]]["name"].startswith("invoke_agent ")
    # The persona, the deck and the grader runs of each conversation share its id.
    conversations = {s["attributes"].get("gen_ai.conversation.id") for s in spans}
    assert None not in conversations

    shot = screenshot(phoenix, client, spans, tmp_path)
    assert shot.stat().st_size > 10_000


def screenshot(phoenix: str, client: Client, spans: list, tmp_path: Path) -> Path:
    """A turn of the deck in Phoenix's trace view, its first model call's attributes open."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (./dev test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    project = client.projects.get(project_name="default")
    root = next(s for s in spans if s["name"] == "invoke_agent support" and not s["parent_id"])
    trace_id = root["context"]["trace_id"]
    chat = next(
        s
        for s in spans
        if s["name"] == "chat offline/demo" and s["context"]["trace_id"] == trace_id
    )
    target = tmp_path / "phoenix-trace.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 900})
            page.set_default_timeout(180_000)  # Phoenix's first page load is slow
            page.goto(
                f"{phoenix}/projects/{project['id']}/traces/{trace_id}"
                f"?selectedSpanNodeId={chat['id']}"
            )
            page.get_by_text("chat offline/demo").first.wait_for()
            page.get_by_text("Attributes").first.click()
            page.get_by_text("llm.input_messages.0.message.role").wait_for()
            page.wait_for_timeout(1500)  # the panel settles
            page.screenshot(path=str(target))
        finally:
            browser.close()
    if os.environ.get("GAMBIT_DOCS_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, SCREENSHOT)
    return target
