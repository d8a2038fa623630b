"""Calibration page: grader scores against the human ratings of the same messages, per rubric
version, with figures checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from decks_app.models import Feedback, Session
from gambit.core import load_deck_tree
from gambit.core._verify_run import deck_files_hash

pytestmark = pytest.mark.django_db

TONE = "support/graders/tone/PROMPT.md"


def _tone_hash(workspace) -> str:
    return deck_files_hash(load_deck_tree(Path(workspace.root) / TONE))


def _rated_session(workspace, pairs, *, grader_hash, grader_path=TONE, run_id="grade-a"):
    """A session whose assistant messages were rated `human` and graded `grader`."""
    session = Session.objects.create(workspace=workspace, deck_path="support/PROMPT.md")
    messages, refs, results = [], [], []
    for i, (human, grader) in enumerate(pairs):
        ref = f"msg-{i:024d}"
        messages += [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"a{i}"},
        ]
        refs += [{"id": f"msg-u{i:023d}", "role": "user"}, {"id": ref, "role": "assistant"}]
        results.append(
            {"score": grader, "reason": "r", "messageIndex": 2 * i + 1, "messageRefId": ref}
        )
        if human is not None:
            Feedback.objects.create(session=session, message_ref_id=ref, score=human)
    session.messages, session.message_refs = messages, refs
    session.meta = {
        "gradingRuns": [
            {
                "id": run_id,
                "graderPath": grader_path,
                "graderLabel": "Tone",
                "graderHash": grader_hash,
                "mode": "turns",
                "status": "completed",
                "runAt": "2026-11-24T10:00:00+00:00",
                "results": results,
            }
        ]
    }
    session.save()
    return session


def test_figures_against_hand_computed_values(client, workspace):
    current = _tone_hash(workspace)
    # human vs grader: (2, 2) agree, (-1, 1) off by 2, (0, 0) agree, (3, 2) off by 1; one unrated
    session = _rated_session(
        workspace, [(2, 2), (-1, 1), (0, 0), (3, 2), (None, 1)], grader_hash=current
    )
    (grader,) = client.get("/grade/calibration.json").json()["graders"]
    assert (
        grader["grader"] == TONE and grader["current"] is True and grader["graderHash"] == current
    )
    assert grader["pairs"] == 4 and grader["graded"] == 5 and grader["rated"] == 4
    assert grader["coverage"] == {"ofGraded": 0.8, "ofRated": 1.0}
    assert grader["exact"] == 0.5 and grader["withinOne"] == 0.75
    assert grader["bias"] == 0.25  # (0 + 2 + 0 - 1) / 4
    assert grader["confusion"][-1 + 3][1 + 3] == 1  # human -1 row, grader +1 column
    assert [d["difference"] for d in grader["disagreements"]] == [2, -1]
    assert grader["disagreements"][0]["session"] == session.id
    html = client.get("/grade/calibration").content.decode()
    # four pairs prove nothing: the page says so first, the figures wait in a closed section
    assert "too few ratings to judge: rate 66 more" in html
    assert grader["rateMore"] == 66 and grader["enoughEvidence"] is False
    assert "Provisional figures" in html
    # one conversation: nothing to resample, so no interval, and the page says why
    assert 'data-figure="exact">50% (no interval: fewer than two conversations)' in html
    assert "rubric " + current in html
    assert f"/test/{session.id}#msg-{1:024d}" in html


def test_a_changed_rubric_starts_fresh_and_keeps_history(client, workspace):
    _rated_session(workspace, [(2, 2)], grader_hash="old0000000000000", run_id="grade-old")
    _rated_session(workspace, [(1, -3)], grader_hash=_tone_hash(workspace), run_id="grade-new")
    graders = client.get("/grade/calibration.json").json()["graders"]
    assert [(g["current"], g["exact"]) for g in graders] == [(True, 0.0), (False, 1.0)]
    assert (
        "Earlier versions of the graders (1)" in client.get("/grade/calibration").content.decode()
    )


def test_cli_paths_are_matched_to_the_workspace_grader(client, workspace):
    absolute = str(Path(workspace.root).resolve() / TONE)
    _rated_session(workspace, [(1, 1)], grader_hash=_tone_hash(workspace), grader_path=absolute)
    (grader,) = client.get("/grade/calibration.json").json()["graders"]
    assert grader["grader"] == TONE and grader["current"] is True


def test_nothing_to_calibrate_says_how(client, workspace):
    report = client.get("/grade/calibration.json").json()
    assert report["graders"] == [] and report["ratings"]["total"] == 0
    assert "Nothing to calibrate yet" in client.get("/grade/calibration").content.decode()


def test_graded_but_unrated_shows_no_made_up_figures(client, workspace):
    _rated_session(workspace, [(None, 2)], grader_hash=_tone_hash(workspace))
    (grader,) = client.get("/grade/calibration.json").json()["graders"]
    assert grader["pairs"] == 0 and grader["exact"] is None and grader["kappa"] is None
    assert "No paired ratings yet" in client.get("/grade/calibration").content.decode()


def test_post_is_405_and_htmx_gets_the_page(client, workspace):
    assert client.post("/grade/calibration").status_code == 405
    assert client.get("/grade/calibration", HTTP_HX_REQUEST="true").status_code == 200


def test_a_version_whose_graded_items_are_all_rated_is_sent_to_grade_more(client, workspace):
    # Before, it said "rate 61 more" and linked to a queue that held none of its items.
    _rated_session(workspace, [(1, 1), (-2, -1), (0, 0)], grader_hash=_tone_hash(workspace))
    data = client.get("/grade/calibration.json").json()
    tone = next(g for g in data["graders"] if g["grader"] == TONE and g["current"])
    assert tone["verdict"]["gradeMore"] is True
    assert "every item it graded is rated" in tone["verdict"]["nextStep"]
    html = client.get("/grade/calibration").content.decode()
    assert '<a href="/grade/verify">run a Verify batch</a>' in html


def test_a_link_to_a_rated_message_lands_on_that_message(client, workspace):
    # The disagreement links ended in #msg-..., which no element of the session page had.
    from decks_app.grading.calibration import conversation_url

    from ..conftest import chat_session

    session = chat_session(workspace)
    url = conversation_url(session.id, "msg-000000000000000000000003")
    page, _, fragment = url.partition("#")
    html = client.get(page).content.decode()
    assert fragment == "msg-000000000000000000000003"
    assert f'id="{fragment}"' in html
