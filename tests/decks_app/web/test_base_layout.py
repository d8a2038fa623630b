"""The base layout every page shares: its three style sheets in order (tokens, page rules,
components), the toast region, the current tab marked for assistive technology, and no
template syntax leaking into the page (a multi-line `{# #}` comment once printed the CSP
note at the top of every page)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/build", "/test", "/grade", "/grade/verify", "/nowhere"])
def test_no_template_syntax_reaches_the_page(client, url):
    html = client.get(url).content.decode()
    for token in ("{#", "#}", "{%", "%}"):
        assert token not in html, (url, token)


def test_sheets_load_in_order_and_the_current_tab_is_marked(client):
    html = client.get("/grade").content.decode()
    sheets = re.findall(r'href="/static/decks_app/(\w+)\.css"', html)
    # the shared sheets first, in order; a page's own sheet (lists, verify, ...) after them
    assert sheets[:3] == ["tokens", "app", "components"]
    assert "lists" in sheets[3:]
    assert re.search(r'<a href="/grade" class="active" aria-current="page">Grade</a>', html)
    assert 'aria-current="page">Test<' not in html


def test_the_top_bar_names_the_served_folder_on_every_page(client, settings):
    from pathlib import Path

    root = str(Path(settings.GAMBIT_WORKSPACE).resolve())
    session = client.post("/test/new", {"deck": "support/PROMPT.md"})
    assert session.status_code == 302, session.content
    for url in ("/build", "/test", "/grade", "/nowhere", session["Location"]):
        html = client.get(url).content.decode()
        assert f'<span class="workspace" title="Served folder: {root}">{root}</span>' in html, url
