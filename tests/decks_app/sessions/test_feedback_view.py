import pytest

from decks_app.models import Feedback
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db
REF = "msg-000000000000000000000003"


def test_it_rates_a_message_and_keeps_the_reason(client, workspace):
    s = chat_session(workspace)
    url = f"/test/{s.id}/feedback/{REF}?format=json"
    r = client.post(url, {"score": "2"})
    assert r.status_code == 200 and r.json()["feedback"]["score"] == 2
    client.post(url, {"reason": "clear <answer>"})
    r = client.post(url, {"score": "9"})  # refused, never clamped
    assert r.status_code == 400 and "from -3 to 3, not 9" in r.json()["error"]
    client.post(url, {"score": "3"})
    fb = Feedback.objects.get()
    assert (fb.score, fb.reason) == (3, "clear <answer>")
    page = client.get(f"/test/{s.id}").content.decode()
    assert 'aria-pressed="true"' in page and "clear &lt;answer&gt;" in page
    listing = client.get("/test?format=json").json()["sessions"][0]
    assert (listing["ratings"], listing["averageRating"]) == (1, 3.0)


def test_clicking_the_active_score_clears_it(client, workspace):
    s = chat_session(workspace)
    client.post(f"/test/{s.id}/feedback/{REF}", {"score": "1"})
    client.post(f"/test/{s.id}/feedback/{REF}", {"score": ""})
    assert not Feedback.objects.exists()


def test_it_returns_the_feedback_fragment_for_htmx(client, workspace):
    s = chat_session(workspace)
    html = client.post(
        f"/test/{s.id}/feedback/{REF}", {"score": "-2"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert html.lstrip().startswith(f'<div class="feedback" id="fb-{REF}">')
    assert "Saved" in html


def test_it_refuses_non_assistant_or_unknown_messages(client, workspace):
    s = chat_session(workspace)
    for ref in ["msg-000000000000000000000002", "msg-ffffffffffffffffffffffff"]:
        r = client.post(f"/test/{s.id}/feedback/{ref}?format=json", {"score": "1"})
        assert r.status_code == 400
    assert (
        client.post(f"/test/{s.id}/feedback/{REF}?format=json", {"score": "abc"}).status_code == 400
    )
    assert client.get(f"/test/{s.id}/feedback/{REF}").status_code == 405


@pytest.mark.parametrize(
    "score", ["inf", "-inf", "1e999", "nan", "2.5", "4", "-4", "9" * 400, "2\x00"]
)
def test_hostile_scores_are_refused_with_a_sentence(client, workspace, score):
    s = chat_session(workspace)
    for url in (f"/test/{s.id}/feedback/{REF}?format=json", f"/test/{s.id}/notes?format=json"):
        r = client.post(url, {"score": score})
        assert r.status_code == 400, (url, score)
        assert r.json()["error"].startswith("score must be a whole number from -3 to 3")
    assert not Feedback.objects.exists()


def test_over_long_or_nul_reasons_and_notes_are_refused_not_cut(client, workspace):
    s = chat_session(workspace)
    url = f"/test/{s.id}/feedback/{REF}?format=json"
    assert client.post(url, {"score": "1"}).status_code == 200
    r = client.post(url, {"reason": "r" * 10_001})
    assert r.status_code == 400 and "reason is longer than 10,000 characters" in r.json()["error"]
    r = client.post(url, {"reason": "a\x00b"})
    assert r.status_code == 400 and "NUL" in r.json()["error"]
    assert Feedback.objects.get().reason == ""
    notes = f"/test/{s.id}/notes?format=json"
    r = client.post(notes, {"notes": "n" * 100_001})
    assert r.status_code == 400 and "notes are" not in r.json()["error"]
    assert "longer than 100,000 characters" in r.json()["error"]
    assert client.post(notes, {"notes": "a\x00b"}).status_code == 400
    s.refresh_from_db()
    assert s.notes is None


def test_a_form_that_is_not_utf8_is_a_400(client, workspace):
    s = chat_session(workspace)
    r = client.post(
        f"/test/{s.id}/send?format=json",
        data=b"message=caf%E9",
        content_type="application/x-www-form-urlencoded; charset=latin-1",
    )
    assert r.status_code == 400 and "UTF-8" in r.json()["error"]


def test_a_rating_names_the_run_that_said_the_message(client, workspace):
    # Before, every rating named the session's latest run: a rating of the first reply of a
    # four-turn chat carried the fourth turn's run.
    from decks_app.models import Run

    s = chat_session(workspace)  # system, user, assistant (REF)
    first = Run.objects.create(session=s, status="completed", turn_base={"refs": 1})
    s.messages += [{"role": "user", "content": "more"}, {"role": "assistant", "content": "yes"}]
    later_ref = "msg-000000000000000000000005"
    s.message_refs += [
        {"id": "msg-000000000000000000000004", "role": "user"},
        {"id": later_ref, "role": "assistant"},
    ]
    s.save()
    second = Run.objects.create(session=s, status="completed", turn_base={"refs": 3})
    for ref, run in ((REF, first), (later_ref, second)):
        client.post(f"/test/{s.id}/feedback/{ref}", {"score": "1"})
        assert Feedback.objects.get(message_ref_id=ref).run_id == run.id
