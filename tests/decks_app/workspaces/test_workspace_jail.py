"""The served workspace is every deck's project root (docs/simulator.md, docs/decks.md "Trust
and limits"): a file a deck references outside it is an error in the listing, the Build tab
and a run, and nothing from it reaches the model; decks in one server process keep their own
modules and write no bytecode; the Build assistant never writes Python."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from decks_app.models import Run
from decks_app.runs.executor import execute_run
from decks_app.runs.queue import claim_next_run
from decks_app.sessions.actions import InvalidInput, create_session, send_message
from decks_app.workspaces.served import current_workspace, list_decks
from tests.support.fake_model_server import FakeModelServer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc"),
]
SECRET = "sk-must-never-leave-4242"
MODEL = "openresponses/fake"


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    leaky = root / "leaky"
    leaky.mkdir()
    (leaky / "PROMPT.md").write_text(
        f'+++\nlabel = "Leaky"\n[modelParams]\nmodel = "{MODEL}"\n+++\nHi ![](./env.md)\n'
    )
    (leaky / "env.md").symlink_to("/proc/self/environ")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "tone.md").write_text("Be brief.\n")
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def _listed(path: str):
    return next(d for d in list_decks(current_workspace()) if d.path == path)


def test_a_link_out_of_the_workspace_is_an_error_in_the_listing_and_the_build_tab(client, ws):
    error = _listed("leaky/PROMPT.md").error or ""
    assert "'./env.md' resolves to /proc/" in error
    assert f"outside the project root {ws.resolve()}" in error
    problems = client.get("/build/deck.json?path=leaky/PROMPT.md").json()["problems"]
    assert any("which Gambit never reads" in p["message"] for p in problems), problems


async def test_a_run_of_it_fails_and_nothing_reaches_the_model(
    ws, fake_server: FakeModelServer, monkeypatch
):
    for name, value in fake_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GAMBIT_TEST_SECRET", SECRET)
    fake_server.queue("hello")

    def start():
        with pytest.raises(InvalidInput, match="never reads"):  # no session for it
            create_session(current_workspace(), "leaky/PROMPT.md", model=MODEL)
        # A session started before the link appeared on disk: its next run fails.
        link = ws / "leaky" / "env.md"
        link.unlink()
        link.write_text("Nothing here.\n")
        session = create_session(current_workspace(), "leaky/PROMPT.md", model=MODEL)
        link.unlink()
        link.symlink_to("/proc/self/environ")
        return send_message(session, "hi")

    run = await sync_to_async(start)()
    await sync_to_async(claim_next_run)("w1")
    assert await asyncio.wait_for(execute_run(run.id), 20) == "failed"
    saved = await Run.objects.aget(pk=run.id)
    assert "never reads" in saved.error
    assert fake_server.requests == []


def test_gambit_allow_paths_widens_the_workspace(client, ws, monkeypatch):
    (ws / "support" / "tone.md").write_text("![](../../outside/tone.md)\n")
    prompt = ws / "support" / "PROMPT.md"
    prompt.write_text(prompt.read_text() + "\n![](./tone.md)\n")
    problems = client.get("/build/deck.json?path=support/PROMPT.md").json()["problems"]
    assert any("outside the project root" in p["message"] for p in problems), problems
    monkeypatch.setenv("GAMBIT_ALLOW_PATHS", str(ws.parent / "outside"))
    assert client.get("/build/deck.json?path=support/PROMPT.md").json()["problems"] == []


def test_decks_in_one_server_process_each_get_their_own_helper(client, ws):
    for name in ("one", "two"):
        (ws / name).mkdir()
        (ws / name / "helper.py").write_text(f"LABEL = 'helper of {name}'\n")
        (ws / name / "deck.py").write_text(
            "import gambit, helper\n"
            "deck = gambit.define_deck(run=lambda ctx: helper.LABEL, label=helper.LABEL)\n"
        )
    # The Build tab checks in this (the server's) process; the listing in child processes.
    for name in ("one", "two"):
        data = client.get(f"/build/deck.json?path={name}/deck.py").json()
        assert [e["label"] for e in data["entries"]] == [f"helper of {name}"]
        assert _listed(f"{name}/deck.py").label == f"helper of {name}"
    assert list(ws.rglob("__pycache__")) == []


def _assistant_turn(client, message: str) -> Run:
    sent = client.post(
        "/build/assistant/send",
        {"deck": "support/PROMPT.md", "message": message, "grant": "write"},
    )
    assert sent.status_code == 202, sent.content
    run_id = sent.json()["run"]
    assert claim_next_run("test") == run_id
    asyncio.run(asyncio.wait_for(execute_run(run_id), 60))
    return Run.objects.get(pk=run_id)


def _tool_results(run: Run) -> str:
    return " ".join(str(e.payload.get("result")) for e in run.events.filter(type="tool.result"))


def test_the_build_assistant_never_writes_python_so_the_live_check_never_runs_its_code(client, ws):
    module = ws / "support" / "actions" / "order_status.py"
    before = module.read_text()
    marker = ws.parent / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    run = _assistant_turn(
        client, f'replace "import gambit" with "import gambit; {code}" in actions/order_status.py'
    )
    assert run.status == "completed"
    assert '"status":403' in _tool_results(run) and "Python code" in _tool_results(run)
    assert module.read_text() == before
    # Nor through a link with another name, nor a new module.
    (ws / "support" / "notes.md").symlink_to(module)
    run = _assistant_turn(client, f'replace "import gambit" with "{code}" in notes.md')
    assert '"status":403' in _tool_results(run)
    assert module.read_text() == before
    # Nor the project's settings, where [project] allow_paths would widen the root.
    (ws / "support" / "gambit.toml").write_text("[project]\nallow_paths = []\n")
    run = _assistant_turn(client, 'replace "[]" with "[\'/\']" in gambit.toml')
    assert '"status":403' in _tool_results(run) and "settings" in _tool_results(run)
    assert "[]" in (ws / "support" / "gambit.toml").read_text()
    # The live checks the Build page runs when files change import the deck's Python.
    assert client.get("/build/deck.json?path=support/PROMPT.md").status_code == 200
    validated = client.post(
        "/build/validate",
        {"deck": "support/PROMPT.md", "path": "support/INTENT.md", "text": "# Intent\n"},
    )
    assert validated.status_code == 200
    assert not marker.exists()


def test_the_build_assistant_still_edits_other_files(client, ws):
    run = _assistant_turn(
        client, 'replace "Keep answers short" with "Keep answers brief" in PROMPT.md'
    )
    assert '"status":200' in _tool_results(run)
    assert "Keep answers brief" in (ws / "support" / "PROMPT.md").read_text()
