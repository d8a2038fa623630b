import pytest

from decks_app.models import Feedback

from .conftest import chat_session

pytestmark = pytest.mark.django_db
REF = "msg-000000000000000000000003"


def test_it_rates_a_message_and_keeps_the_reason(client, workspace):
    s = chat_session(workspace)
    url = f"/test/{s.id}/feedback/{REF}?format=json"
    r = client.post(url, {"score": "2"})
    assert r.status_code == 200 and r.json()["feedback"]["score"] == 2
    client.post(url, {"reason": "clear <answer>"})
    client.post(url, {"score": "9"})  # clamped
    fb = Feedback.objects.get()
    assert (fb.score, fb.reason) == (3, "clear <answer>")
    page = client.get(f"/test/{s.id}/").content.decode()
    assert 'aria-pressed="true"' in page and "clear &lt;answer&gt;" in page
    listing = client.get("/test/?format=json").json()["sessions"][0]
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
