"""Error pages say one sentence and offer the tabs, never internals (issue 26: an unknown URL
printed Django's route list, `admin/` included), with DEBUG on or off."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.test import Client, override_settings
from django.urls import path

import simulator.urls

pytestmark = pytest.mark.django_db

INTERNALS = ("admin/", "URLconf", "simulator.urls", "Traceback", "tried", "DEBUG", "<URL")


def _boom(request):
    raise RuntimeError("secret internal detail")


def _forbidden(request):
    raise PermissionDenied("secret reason")


def _suspicious(request):
    raise SuspiciousOperation("secret suspicious detail")


urlpatterns = [
    path("boom", _boom),
    path("forbidden", _forbidden),
    path("suspicious", _suspicious),
    *simulator.urls.urlpatterns,
]
handler400 = simulator.urls.handler400
handler403 = simulator.urls.handler403
handler404 = simulator.urls.handler404
handler500 = simulator.urls.handler500


def _assert_plain(body: str) -> None:
    for word in INTERNALS:
        assert word not in body, word
    assert "secret" not in body


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_url_is_one_sentence_and_the_tabs(client, debug):
    with override_settings(DEBUG=debug):
        response = client.get("/no/such/page")
    body = response.content.decode()
    assert response.status_code == 404
    _assert_plain(body)
    assert "There is no page at this address." in body
    for href in ('href="/test"', 'href="/build"', 'href="/grade"'):
        assert href in body


@pytest.mark.parametrize("debug", [False, True])
def test_a_missing_session_says_what_is_missing(client, debug):
    with override_settings(DEBUG=debug):
        response = client.get("/test/session-0123456789abcdef01234567")
    body = response.content.decode()
    assert response.status_code == 404
    _assert_plain(body)
    assert "No such session." in body


def test_json_twins_and_v1_get_json_errors(client):
    twin = client.get("/nothing/here.json")
    assert twin.status_code == 404 and twin.json() == {"error": "There is no page at this address."}
    assert client.get("/test/nope.json").json() == {"error": "no such session"}
    v1 = client.get("/v1/nothing")
    assert v1.status_code == 404
    assert v1.json()["error"]["type"] == "not_found"


@pytest.mark.parametrize("debug", [False, True])
@override_settings(ROOT_URLCONF=__name__)
def test_403_400_and_500_are_our_pages(debug):
    client = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
    with override_settings(DEBUG=debug):
        forbidden = client.get("/forbidden")
        suspicious = client.get("/suspicious")
    assert forbidden.status_code == 403 and "This action is not allowed." in forbidden.text
    assert suspicious.status_code == 400 and "could not be read" in suspicious.text
    _assert_plain(forbidden.text)
    _assert_plain(suspicious.text)
    boom = client.get("/boom")  # DEBUG off: a developer who sets GAMBIT_DEBUG=1 asks for more
    assert boom.status_code == 500 and "Something went wrong on our side" in boom.text
    _assert_plain(boom.text)


@pytest.mark.parametrize("debug", [False, True])
def test_a_form_without_its_csrf_token_says_to_reload(debug):
    client = Client(HTTP_HOST="127.0.0.1", enforce_csrf_checks=True)
    with override_settings(DEBUG=debug):
        response = client.post("/test/new", {"deck": "hello/deck.py"})
    assert response.status_code == 403
    assert "reload the page" in response.text
    assert "CSRF_" not in response.text and "csrf_token" not in response.text.split("<main>")[1]


def test_an_old_slash_url_of_an_unknown_page_is_a_404_not_a_redirect(client):
    response = client.get("/test/no/such/")
    assert response.status_code == 404
