"""Every view of the session page and its replay, through the same checks: 405 for a wrong
method, 403 for a form posted without its CSRF token, 404 for an unknown or malformed
session id, and for htmx the named partial alone (never the whole page)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from decks_app.models import Run
from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db

UNKNOWN = "session-0123456789abcdef01234567"
MALFORMED = "not-a-session"
REF = "msg-000000000000000000000003"  # the assistant message of `chat_session`


@dataclass
class View:
    path: str  # `{id}` is the session's
    method: str  # the method it answers ("GET" or "POST")
    wrong: str  # a method it refuses with 405
    data: dict
    htmx_starts: str  # what the htmx answer begins with (a named partial)
    htmx_status: int = 200


VIEWS = [
    View("/test/{id}", "GET", "POST", {}, '<div id="conversation"'),
    View("/test/{id}/conversation", "GET", "POST", {"before": "1"}, ""),
    View("/test/{id}/events/recent", "GET", "POST", {}, '<ol class="events" id="raw-events"'),
    View("/test/{id}/send", "POST", "GET", {"message": "hi"}, '<span id="status"', 202),
    View("/test/{id}/stop", "POST", "GET", {}, '<span id="status"'),
    View(
        "/test/{id}/retry",
        "POST",
        "GET",
        {"runId": "run-x"},
        '<div class="callout error" id="error"',
        409,
    ),
    View("/test/{id}/notes", "POST", "GET", {"notes": "n"}, '<form id="notes"'),
    View(f"/test/{{id}}/feedback/{REF}", "POST", "GET", {"score": "2"}, '<div class="feedback"'),
    View("/test/{id}/replay", "GET", "POST", {"step": "1"}, '<div id="frame">'),
    View("/test/{id}/rerun", "GET", "PUT", {}, '<span id="rerun-slot"'),
]
IDS = [v.path.split("{id}")[1] or "/" for v in VIEWS]


def _call(client, view: View, session_id: str, method: str | None = None, **headers):
    method = (method or view.method).lower()
    url = view.path.format(id=session_id)
    if method == "get":
        return client.get(url, view.data, headers=headers)
    return getattr(client, method)(url, view.data, headers=headers)


@pytest.mark.parametrize("view", VIEWS, ids=IDS)
def test_a_wrong_method_is_405(client, workspace, view):
    session = chat_session(workspace)
    assert _call(client, view, session.id, view.wrong).status_code == 405


@pytest.mark.parametrize("view", [v for v in VIEWS if v.method == "POST"], ids=str)
def test_a_post_without_its_csrf_token_is_403(csrf_client, workspace, view):
    session = chat_session(workspace)
    assert _call(csrf_client, view, session.id).status_code == 403


@pytest.mark.parametrize("session_id", [UNKNOWN, MALFORMED])
@pytest.mark.parametrize("view", VIEWS, ids=IDS)
def test_an_unknown_or_malformed_session_is_404(client, workspace, view, session_id):
    assert _call(client, view, session_id).status_code == 404
    assert _call(client, view, session_id, HX_Request="true").status_code == 404


@pytest.mark.parametrize("view", VIEWS, ids=IDS)
def test_htmx_gets_the_named_partial(client, workspace, view):
    session = chat_session(workspace)
    response = _call(client, view, session.id, HX_Request="true")
    html = response.content.decode()
    assert response.status_code == view.htmx_status, html[:300]
    assert "<html" not in html and "<nav" not in html.split(">", 1)[0]
    assert html.lstrip().startswith(view.htmx_starts), html[:300]


def test_deleting_from_htmx_sends_the_browser_to_the_list(client, csrf_client, workspace):
    session = chat_session(workspace)
    url = f"/test/{session.id}/delete"
    assert client.get(url).status_code == 405
    assert csrf_client.post(url, {"confirm": session.id}).status_code == 403
    response = client.post(url, {"confirm": session.id}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and response["HX-Redirect"] == "/test"
    assert client.post(f"/test/{UNKNOWN}/delete", {"confirm": UNKNOWN}).status_code == 404
    assert client.post(f"/test/{MALFORMED}/delete", {"confirm": "x"}).status_code == 404
    busy = chat_session(workspace)
    Run.objects.create(session=busy, status="running")
    refused = client.post(f"/test/{busy.id}/delete", {"confirm": busy.id}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 409


def test_the_session_page_and_its_twin_come_from_one_object(client, workspace):
    session = chat_session(workspace)
    data = client.get(f"/test/{session.id}.json").json()
    html = client.get(f"/test/{session.id}").content.decode()
    assert data["id"] == session.id and data["live"] == [] and data["rerun"]["available"] is False
    assert [b["kind"] for b in data["blocks"]] == ["user", "assistant"]
    assert (
        f'data-after="{data["cursor"]}"' in html
        and f'data-version="{data["stateVersion"]}"' in html
    )
