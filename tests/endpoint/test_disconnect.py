"""A client that leaves mid-stream stops the run itself, not only its record: the deck makes
no further model call after the call was recorded canceled (docs/decisions.md, "The endpoint
app")."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.endpoint.serving import KEY, serve, write


def test_a_client_that_leaves_stops_the_decks_run(tmp_path):
    marker = tmp_path / "finished"
    # A compute deck that takes a second and a half, then leaves a mark; a run that went on
    # after its client left would leave it.
    write(
        tmp_path,
        "decks/slow/deck.py",
        f"""
        import asyncio
        from pathlib import Path

        import gambit


        async def run(ctx):
            await asyncio.sleep(1.5)
            Path({str(marker)!r}).write_text("the run went on")
            return "done"


        deck = gambit.define_deck(run=run)
        """,
    )
    proc, url, log = serve(tmp_path)
    try:
        with httpx.stream(
            "POST",
            url + "/v1/responses",
            json={"model": "deck/slow", "input": "go", "stream": True},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=30,
        ) as response:
            for line in response.iter_lines():
                if "response.in_progress" in line:
                    break  # leave before the deck is done
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            sessions = httpx.get(url + "/test.json").json()["sessions"]
            if any(s["origin"] == "api" and s["status"] == "canceled" for s in sessions):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the call was not recorded as canceled")
        time.sleep(3)  # longer than the deck would have taken to end
        assert not marker.exists(), "the run went on after the client left"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
