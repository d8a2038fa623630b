"""The run loop's shared provider routers (decks_app.runs.providers.SharedRouters): the runs of
a workspace reuse one router and its HTTP connections; a changed gambit.toml or environment
gives the next run a new router, and the old one is closed once no run uses it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from decks_app.runs import executor, queue
from decks_app.runs.providers import SharedRouters
from decks_app.sessions.actions import create_session, send_message
from decks_app.workspaces.served import current_workspace
from tests.support.fake_model_server import FakeModelServer, Reply


def _client_of(router):
    """The HTTP client the router's openresponses provider holds (opened on first use)."""
    return router.provider("openresponses").http._client()


async def test_a_workspaces_runs_share_one_router_until_its_config_changes(
    tmp_path: Path, fake_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
):
    for key, value in fake_server.env().items():
        monkeypatch.setenv(key, value)
    routers = SharedRouters()
    first = await routers.acquire(tmp_path)
    assert await routers.acquire(tmp_path) is first  # a second run meanwhile: the same router
    client = _client_of(first)
    await routers.release(first)
    await routers.release(first)
    assert not client.is_closed  # still the current one: kept for the next run
    assert await routers.acquire(tmp_path) is first
    await routers.release(first)

    (tmp_path / "gambit.toml").write_text("[providers.openresponses]\n")  # a config appears
    second = await routers.acquire(tmp_path)
    assert second is not first
    assert client.is_closed  # the old router was idle: closed at once

    second_client = _client_of(second)
    os.utime(tmp_path / "gambit.toml", ns=(1, 1))  # the config changes while `second` runs
    third = await routers.acquire(tmp_path)
    assert third is not second
    assert not second_client.is_closed  # a run still uses it
    await routers.release(second)
    assert second_client.is_closed  # its last run is done: closed

    monkeypatch.setenv("GAMBIT_SHARED_ROUTER_PROBE", "1")  # a changed environment
    fourth = await routers.acquire(tmp_path)
    assert fourth is not third
    await routers.release(third)
    await routers.release(fourth)
    newest = _client_of(fourth)
    await routers.aclose()
    assert newest.is_closed


@pytest.mark.django_db(transaction=True)
async def test_two_runs_on_the_run_loop_reuse_one_connection(
    fake_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
):
    # Each run built its own router before, so each turn opened a new connection (for an
    # https provider, a CA bundle load and a TLS handshake too).
    for key, value in fake_server.env().items():
        monkeypatch.setenv(key, value)
    fake_server.queue(Reply(text="one"), Reply(text="two"))
    routers = SharedRouters()

    def queued(message: str) -> str:
        session = create_session(current_workspace(), "support/PROMPT.md", model="openresponses/m")
        run = send_message(session, message)
        assert queue.claim_next_run("w1") == run.id
        return run.id

    try:
        for message in ("hello", "again"):
            run_id = await sync_to_async(queued)(message)
            status = await asyncio.wait_for(executor.execute_run(run_id, routers=routers), 20)
            assert status == "completed"
    finally:
        await routers.aclose()
    peers = [r.peer for r in fake_server.requests if r.path.endswith("/responses")]
    assert len(peers) == 2 and peers[0] == peers[1]
