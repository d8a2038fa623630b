"""The rating queue (the Grade tab's "Rate"): what it serves first, what it hides until the
rater has rated, and that each rating moves calibration at once (docs/calibration.md, "The
rating queue")."""

from __future__ import annotations

import pytest

from decks_app.models import Feedback, Session
from tests.decks_app.grading.graded import TONE, Turn, graded_session, ref, tone_hash

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue_data(workspace):
    """One item of each tier, and one another rater (bob) already rated."""
    h = tone_hash(workspace)
    key = (TONE, h)
    disagreeing = graded_session(
        workspace,
        [
            Turn({key: [-2]}, {"bob": 3}, reasons={key: "curt and unhelpful"}),  # gap 5
            Turn({key: [1]}, {"bob": 0}),  # gap 1
            Turn({key: [2]}, {"bob": 2}),  # agrees: not served for disagreement
        ],
        index=1,
        scenario="late_delivery",
    )
    inconsistent = graded_session(workspace, [Turn({key: [-2, 2]})], index=2)
    fresh_scenario = graded_session(
        workspace, [Turn({key: [1]}), Turn()], index=3, scenario="refunds"
    )
    unrated = graded_session(workspace, [Turn({key: [0]})], index=4)
    return {
        "a": (disagreeing.id, ref(1, 0)),
        "b": (disagreeing.id, ref(1, 1)),
        "agreed": (disagreeing.id, ref(1, 2)),
        "c": (inconsistent.id, ref(2, 0)),
        "d": (fresh_scenario.id, ref(3, 0)),
        "d2": (fresh_scenario.id, ref(3, 1)),
        "e": (unrated.id, ref(4, 0)),
    }


def _as(client, rater):
    client.cookies["gambit_rater"] = rater
    return client


def test_the_queue_serves_disagreement_then_inconsistency_then_unrated_scenarios(
    client, queue_data
):
    page = _as(client, "alice").get("/grade/rate.json").json()
    served = [(q["session"], q["messageRefId"]) for q in page["queue"]]
    d = queue_data
    # "agreed" (grader and bob agree) is neither disagreeing nor unrated: not served
    assert served == [d["a"], d["b"], d["c"], d["d"], d["d2"], d["e"]]
    assert [q["tier"] for q in page["queue"]] == [
        "disagreement", "disagreement", "inconsistent", "unrated scenario", "unrated scenario",
        "unrated",
    ]  # fmt: skip
    assert page["queue"][0]["detail"] == "Tone scored -2, people rated +3"
    assert page["queue"][0]["why"] == "a grader and the people who rated it disagree"
    assert "from -2 to +2" in page["queue"][2]["detail"]
    assert "'refunds'" in page["queue"][3]["detail"]
    assert page["item"]["target"] == page["queue"][0]["target"]  # the first item is open
    # bob rated the disagreeing ones: his queue starts with the inconsistent one
    bob = _as(client, "bob").get("/grade/rate.json").json()
    assert (bob["queue"][0]["session"], bob["queue"][0]["messageRefId"]) == d["c"]


def test_an_item_shows_the_conversation_up_to_it_and_no_grader_before_rating(client, queue_data):
    session, msg = queue_data["b"]
    item = _as(client, "alice").get(f"/grade/rate/{session}/{msg}.json").json()
    texts = [b["text"] for b in item["conversation"]]
    assert texts == ["question 0", "answer 0", "question 1", "answer 1"]  # nothing after it
    assert [b["current"] for b in item["conversation"]] == [False, False, False, True]
    assert item["graders"] is None and item["gradersHidden"] is True and item["rating"] is None
    html = client.get(f"/grade/rate/{session}/{msg}").content.decode()
    assert "grader reason 1" not in html and "show once you have rated" in html
    assert (
        "people rated" not in html
        and "+1" not in html.split('id="rate-item"')[1].split('id="rate-form"')[0]
    )  # nor the grader's score or others' ratings, even in the reason it is served


def test_rating_reveals_the_graders_and_moves_calibration_at_once(client, queue_data, workspace):
    session, msg = queue_data["a"]
    before = client.get("/grade/calibration.json").json()
    (tone,) = [g for g in before["graders"] if g["current"]]
    answer = _as(client, "alice").post(
        f"/grade/rate/{session}/{msg}/rating",
        {"score": "-1", "reason": "too curt"},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["item"]["rating"] == {"score": -1, "reason": "too curt", "rater": "alice"}
    (grader,) = body["item"]["graders"]
    assert grader["score"] == -2 and grader["reason"] == "curt and unhelpful"
    assert Feedback.objects.get(session_id=session, message_ref_id=msg, rater="alice").score == -1
    assert Feedback.objects.get(session_id=session, message_ref_id=msg, rater="bob").score == 3
    after = client.get("/grade/calibration.json").json()
    (tone_after,) = [g for g in after["graders"] if g["current"]]
    # the item's human score is now the mean of bob's +3 and alice's -1
    pair = next(p for p in tone_after["pairsUsed"] if p["links"]["messageRefId"] == msg)
    assert pair["human"] == 1.0 and tone["pairs"] == tone_after["pairs"]
    assert after["inputsHash"] != before["inputsHash"]
    assert after["raters"]["raters"] == ["alice", "bob"] and after["raters"]["items"] == 1
    (progress,) = body["progress"]
    assert (
        progress["pairs"] == tone_after["pairs"] and progress["rateMore"] == tone_after["rateMore"]
    )
    # rating an unrated item adds a pair
    session_e, msg_e = queue_data["e"]
    body = client.post(
        f"/grade/rate/{session_e}/{msg_e}/rating", {"score": "2"}, HTTP_ACCEPT="application/json"
    ).json()
    assert body["progress"][0]["pairs"] == tone_after["pairs"] + 1
    html = client.get(f"/grade/rate/{session_e}/{msg_e}").content.decode()
    assert "grader reason 0" in html and "You rated this +2" in html


def test_a_conversation_can_be_rated_and_keeps_its_rater(client, queue_data):
    session, _ = queue_data["c"]
    answer = _as(client, "alice").post(
        f"/grade/rate/{session}/conversation/rating", {"score": "3", "reason": "fine"},
        HTTP_ACCEPT="application/json",
    )  # fmt: skip
    assert answer.json()["item"]["kind"] == "conversation"
    score = Session.objects.get(pk=session).conversation_score
    assert score["score"] == 3 and score["rater"] == "alice" and score["reason"] == "fine"


def test_no_rater_name_no_rating(client, queue_data):
    page = client.get("/grade/rate.json").json()
    assert page["rater"] is None and page["queue"] == [] and page["item"] is None
    assert "Give your name as a rater" in client.get("/grade/rate").content.decode()
    session, msg = queue_data["a"]
    answer = client.post(f"/grade/rate/{session}/{msg}/rating", {"score": "1"})
    assert answer.status_code == 400 and b"give your rater name first" in answer.content
    assert not Feedback.objects.filter(rater="").exists()


def test_the_name_form_sets_the_cookie_without_javascript(client, queue_data):
    answer = client.get("/grade/rate?rater=Ann%C3%A9e K")
    assert answer.status_code == 302 and answer["Location"] == "/grade/rate"
    assert client.get("/grade/rate.json").json()["rater"] == "Année K"
    assert client.get("/grade/rate?rater=a%01b").status_code == 400


def test_bad_scores_are_refused_and_nothing_is_saved(client, queue_data):
    session, msg = queue_data["e"]
    _as(client, "alice")
    for score in ("", "4", "1.5", "x"):
        answer = client.post(f"/grade/rate/{session}/{msg}/rating", {"score": score})
        assert answer.status_code == 400
    assert not Feedback.objects.filter(session_id=session).exists()


def test_the_key_map_is_in_the_twin(client, queue_data):
    keys = _as(client, "alice").get("/grade/rate.json").json()["keys"]
    assert keys["scores"] == {"1": -3, "2": -2, "3": -1, "4": 0, "5": 1, "6": 2, "7": 3}
    assert set(keys["moves"]) == {"r", "n or →", "p or ←", "s"}


# ---- the views' matrix: wrong method, CSRF, unknown ids, htmx ------------------------------


def test_wrong_methods_are_405(client, queue_data):
    session, msg = queue_data["a"]
    assert client.post("/grade/rate").status_code == 405
    assert client.post("/grade/rate.json").status_code == 405
    assert client.post(f"/grade/rate/{session}/{msg}").status_code == 405
    assert client.get(f"/grade/rate/{session}/{msg}/rating").status_code == 405
    assert client.post("/grade/calibration").status_code == 405
    assert client.post("/grade/calibration.json").status_code == 405


def test_a_rating_without_csrf_is_403(csrf_client, queue_data):
    session, msg = queue_data["a"]
    csrf_client.cookies["gambit_rater"] = "alice"
    answer = csrf_client.post(f"/grade/rate/{session}/{msg}/rating", {"score": "1"})
    assert answer.status_code == 403
    assert not Feedback.objects.filter(rater="alice").exists()


def test_unknown_or_unrateable_items_are_404(client, queue_data):
    session, msg = queue_data["a"]
    user_ref = f"msg-u{1:011d}{0:012d}"
    for path in (
        "/grade/rate/session-000000000000000000000000/conversation",
        "/grade/rate/not-a-session/conversation.json",
        f"/grade/rate/{session}/msg-000000000000000000000000",
        f"/grade/rate/{session}/{user_ref}",  # a user message is not rated
        f"/grade/rate?item={session}/{user_ref}",
    ):
        assert _as(client, "alice").get(path).status_code == 404, path
    answer = client.post(f"/grade/rate/{session}/{user_ref}/rating", {"score": "1"})
    assert answer.status_code == 404


def test_htmx_gets_the_item_fragment_and_the_progress_out_of_band(client, queue_data):
    session, msg = queue_data["e"]
    _as(client, "alice")
    fragment = client.get(f"/grade/rate/{session}/{msg}", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<article id="rate-item"') and "<html" not in fragment
    rated = client.post(
        f"/grade/rate/{session}/{msg}/rating", {"score": "0"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="rate-item"' in rated and "grader reason 0" in rated
    assert 'id="rate-progress" hx-swap-oob="true"' in rated
    # the queue's size follows the ratings (it said the same number however many were rated)
    left = _as(client, "alice").get("/grade/rate.json").json()["queueTotal"]
    assert f'<p class="meta" id="queue-size" hx-swap-oob="true">{left} item' in rated
    full = client.get(f"/grade/rate/{session}/{msg}").content.decode()
    assert "<html" in full and 'id="rate-progress"' in full
    # without htmx or JSON, a rating redirects back to the item
    answer = client.post(f"/grade/rate/{session}/{msg}/rating", {"score": "1"})
    assert answer.status_code == 302 and answer["Location"] == f"/grade/rate/{session}/{msg}"


def test_the_grades_export_carries_the_mean_of_the_raters(client, workspace):
    """Two raters on one message: the export's humanRating is their mean, the figure
    `gambit calibrate` then pairs, as the calibration page does."""
    import json

    key = (TONE, tone_hash(workspace))
    session = graded_session(workspace, [Turn({key: [1]}, {"ann": 2, "ben": -1})], index=9)
    rows = [
        json.loads(line) for line in client.get("/grade/export/grades.jsonl").content.splitlines()
    ]
    (row,) = [r for r in rows if r["session"] == session.id]
    assert row["humanRating"] == 0.5
    (tone,) = [g for g in client.get("/grade/calibration.json").json()["graders"] if g["current"]]
    assert tone["pairsUsed"][0]["human"] == 0.5


def test_raters_survive_an_export_and_import_and_the_test_tab_keeps_its_own(client, workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile

    key = (TONE, tone_hash(workspace))
    session = graded_session(workspace, [Turn({key: [1]}, {"ann": 2, "ben": -1})], index=5)
    msg = ref(5, 0)
    # the Test tab's rating is the unnamed one: it leaves the queue's ratings alone
    assert client.post(f"/test/{session.id}/feedback/{msg}", {"score": "3"}).status_code == 302
    assert sorted(session.feedback.values_list("rater", "score")) == [
        ("", 3), ("ann", 2), ("ben", -1)
    ]  # fmt: skip
    shown = client.get(f"/test/{session.id}.json").json()["conversation"]
    assert next(b for b in shown if b["messageRefId"] == msg)["feedback"]["score"] == 3
    state = client.get(f"/test/{session.id}/export/state.json").content
    answer = client.post(
        "/test/import?format=json",
        {"deck": "support/PROMPT.md", "state": SimpleUploadedFile("s.json", state)},
    )
    assert answer.status_code == 201, answer.content
    new = Session.objects.get(pk=answer.json()["id"])
    assert sorted(new.feedback.values_list("rater", "score")) == [("", 3), ("ann", 2), ("ben", -1)]


def test_the_page_says_how_many_items_are_queued_beyond_those_it_serves(
    client, queue_data, monkeypatch
):
    from decks_app.grading.views import rate

    monkeypatch.setattr(rate, "QUEUE_SHOWN", 2)
    page = _as(client, "alice").get("/grade/rate.json").json()
    assert len(page["queue"]) == 2 and page["queueTotal"] == 6
    html = client.get("/grade/rate").content.decode()
    assert "6 items left in your queue; the keys move through the first 2" in html


def test_a_step_that_only_calls_tools_is_not_served_nor_rateable(client, workspace):
    # Before, such steps (an assistant message with tool calls and no text) were queued: the
    # page said "rate the highlighted reply" and highlighted nothing.
    session = graded_session(workspace, [Turn({(TONE, tone_hash(workspace)): [1]})], index=5)
    call = "msg-000000000005000000000009"
    session.messages.insert(1, {"role": "assistant", "content": None, "tool_calls": [{}]})
    session.message_refs.insert(1, {"id": call, "role": "assistant"})
    session.save()
    served = [
        q["messageRefId"] for q in _as(client, "alice").get("/grade/rate.json").json()["queue"]
    ]
    assert call not in served and ref(5, 0) in served
    assert client.get(f"/grade/rate/{session.id}/{call}").status_code == 404
    answer = client.post(f"/grade/rate/{session.id}/{call}/rating", {"score": "1"})
    assert answer.status_code == 404 and not Feedback.objects.filter(message_ref_id=call).exists()


def test_a_scenario_is_unrated_only_while_none_of_its_conversations_is(client, workspace):
    # Before, every conversation not rated yet was queued as "no one has rated anything of
    # scenario 'late_delivery' yet", however many of that scenario's others had been rated.
    key = (TONE, tone_hash(workspace))
    graded_session(workspace, [Turn({key: [1]}, {"bob": 1})], index=6, scenario="late_delivery")
    other = graded_session(workspace, [Turn({key: [1]})], index=7, scenario="late_delivery")
    fresh = graded_session(workspace, [Turn({key: [1]})], index=8, scenario="refunds")
    queue = _as(client, "alice").get("/grade/rate.json").json()["queue"]
    tiers = {q["session"]: (q["tier"], q["detail"]) for q in queue}
    assert tiers[fresh.id] == (
        "unrated scenario",
        "no one has rated anything of scenario 'refunds' yet",
    )
    assert tiers[other.id] == ("unrated", "graded, not rated by anyone yet")
