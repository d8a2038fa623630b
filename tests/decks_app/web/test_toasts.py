"""Toasts (decks_app/web/toasts.py): a view's Django message shows once, on the next full
page after a redirect, or appended out of band to an htmx response; escaped; never on a
JSON twin, never eaten by an htmx redirect."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def _toasts(html: str) -> str:
    return html.split('id="toasts"', 1)[1].split("</div>\n", 1)[0] if 'id="toasts"' in html else ""


def test_every_page_has_an_empty_toast_region(client, ws):
    html = client.get("/build").content.decode()
    assert 'id="toasts" class="toasts" role="status" aria-live="polite"' in html
    assert "data-toast" not in html


def test_a_deletion_is_confirmed_once_on_the_page_it_redirects_to(client, ws):
    refused = client.post("/build/delete", {"path": "hello/deck.py", "confirm": "nope"})
    assert refused.status_code == 400  # not confirmed: no toast, the error says why
    deleted = client.post("/build/delete", {"path": "hello/deck.py", "confirm": "hello"})
    assert deleted.status_code == 302
    page = client.get(deleted["Location"]).content.decode()
    assert (
        'class="toast success" data-toast><span class="toast-text">Deleted deck hello/deck.py.'
        in _toasts(page)
    )
    again = client.get(deleted["Location"]).content.decode()
    assert "data-toast" not in again  # consumed


def test_a_page_that_shows_its_messages_itself_gets_no_toast_for_them(client, rf):
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.template import Context, Template

    request = rf.get("/")
    request.session = client.session
    storage = FallbackStorage(request)
    storage.add(25, "Added a grader")
    inline = Template(
        "<p>{% for m in messages %}{{ m.message }}{% endfor %}</p>"
        '{% include "web/toasts.html#items" %}'
    ).render(Context({"messages": storage}))
    assert inline == "<p>Added a grader</p>"
    fresh = FallbackStorage(request)
    fresh.add(25, "Saved.")
    shown = Template('{% include "web/toasts.html#items" %}').render(Context({"messages": fresh}))
    assert '<span class="toast-text">Saved.</span>' in shown


def test_an_htmx_save_gets_its_toast_out_of_band(client, ws):
    opened = client.get("/build/file.json?path=support/PROMPT.md&deck=support/PROMPT.md").json()
    form = {
        "path": "support/PROMPT.md",
        "deck": "support/PROMPT.md",
        "text": opened["text"],
        "version": opened["version"],
    }
    saved = client.post("/build/save", form, **HTMX)
    html = saved.content.decode()
    assert saved.status_code == 200
    assert (
        '<div id="toasts" hx-swap-oob="beforeend"><div class="toast success" data-toast><span class="toast-text">Saved.'
        in html
    )
    if saved.has_header("Content-Length"):
        assert int(saved["Content-Length"]) == len(saved.content)
    assert "data-toast" not in client.get("/build").content.decode()  # shown once
    broken = opened["text"].replace('startMode = "user"', 'startMode = "sometimes"')
    form.update(text=broken, version=client.get(
        "/build/file.json?path=support/PROMPT.md&deck=support/PROMPT.md"
    ).json()["version"])  # fmt: skip
    warned = client.post("/build/save", form, **HTMX).content.decode()
    assert (
        'class="toast warning" data-toast><span class="toast-text">Saved, with 1 error in the deck.'
        in warned
    )


def test_json_answers_carry_no_toast_and_leave_it_for_a_page(client, ws):
    opened = client.get("/build/file.json?path=support/PROMPT.md&deck=support/PROMPT.md").json()
    form = {"path": "support/PROMPT.md", "text": opened["text"], "version": opened["version"]}
    assert client.post("/build/save", form).json()["saved"] is True  # JSON: no message made
    assert "data-toast" not in client.get("/build").content.decode()


def test_a_message_text_is_escaped(client, ws, rf):
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.template.loader import render_to_string

    request = rf.get("/")
    request.session = client.session
    storage = FallbackStorage(request)
    storage.add(25, "<script>alert(1)</script>")
    html = render_to_string("web/toasts.html#oob", {"messages": storage})
    assert "<script>" not in html and "&lt;script&gt;" in html
