"""One route per page (docs/decisions.md, "Pages and URLs"): a page and its JSON twin share
a name and reverse without a trailing slash; the old slash URLs redirect; every query value
a view or a template puts in a URL is encoded."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.template import Context, Template
from django.test import RequestFactory, override_settings
from django.urls import resolve, reverse

from tests.decks_app.conftest import chat_session

pytestmark = pytest.mark.django_db

# Every page of the app, with the arguments its route takes.
PAGES = [
    ("sessions:sessions", []),
    ("sessions:session", ["session-0123456789abcdef01234567"]),
    ("sessions:trace", ["session-0123456789abcdef01234567"]),
    ("sessions:trace_call", ["session-0123456789abcdef01234567", 7]),
    ("sessions:trace_run", ["session-0123456789abcdef01234567", 7]),
    ("sessions:trace_node", ["session-0123456789abcdef01234567", 7]),
    ("sessions:trace_node", ["session-0123456789abcdef01234567", "7-run"]),
    ("sessions:replay", ["session-0123456789abcdef01234567"]),
    ("sessions:replay_rerun", ["session-0123456789abcdef01234567"]),
    ("sessions:compare", ["session-0123456789abcdef01234567"]),
    ("grading:grade", []),
    ("grading:grade_run", ["run-0123456789abcdef01234567"]),
    ("grading:calibration", []),
    ("grading:rate", []),
    ("grading:rate_item", ["session-0123456789abcdef01234567", "conversation"]),
    ("grading:verify", []),
    ("grading:verify_batch", ["run-0123456789abcdef01234567"]),
    ("grading:verify_compare", []),
    ("building:build", []),
    ("building:build_deck", []),
    ("building:build_file", []),
    ("building:assistant", []),
]


@pytest.mark.parametrize("name,args", PAGES, ids=[p[0] for p in PAGES])
def test_each_page_has_one_route_for_itself_and_its_twin(name, args):
    page = reverse(name, args=args)
    twin = reverse(name, args=[*args, "json"])
    assert not page.endswith("/") and twin == page + ".json"
    assert resolve(page).func is resolve(twin).func
    assert resolve(page).url_name == resolve(twin).url_name == name.split(":")[1]
    assert resolve(twin).kwargs["fmt"] == "json" and "fmt" not in resolve(page).kwargs


@pytest.mark.parametrize(
    "old,new",
    [
        ("/test/", "/test"),
        ("/test/?deck=a%20b&q=x", "/test?deck=a%20b&q=x"),
        ("/grade/verify/", "/grade/verify"),
        ("/grade/calibration/", "/grade/calibration"),
        ("/build/", "/build"),
        ("/test/session-0123456789abcdef01234567/", "/test/session-0123456789abcdef01234567"),
        (
            "/test/session-0123456789abcdef01234567/trace/runs/5/",
            "/test/session-0123456789abcdef01234567/trace/runs/5",
        ),
    ],
)
def test_the_old_slash_urls_redirect_to_the_canonical_ones(client, old, new):
    response = client.get(old)
    assert response.status_code == 301 and response["Location"] == new


def test_a_slash_url_with_no_page_behind_it_is_a_404_not_a_redirect(client):
    assert client.get("/test/new/").status_code == 301  # test/new exists (POST only)
    assert client.get("/build/nothing-here/").status_code == 404
    assert client.get("/grade/verify/x/y/z/").status_code == 404
    assert client.get("/build/nothing-here").status_code == 404  # and no slash is appended


def test_a_post_to_an_old_slash_url_keeps_its_method(client):
    response = client.post("/test/session-0123456789abcdef01234567/rerun/")
    assert response.status_code == 308
    assert response["Location"] == "/test/session-0123456789abcdef01234567/rerun"


def test_pages_link_their_twin_in_the_head(client, workspace):
    session = chat_session(workspace)
    html = client.get(f"/test/{session.id}?x=1").content.decode()
    assert (
        f'<link rel="alternate" type="application/json" href="/test/{session.id}.json?x=1">' in html
    )
    trace = client.get(f"/test/{session.id}/trace").content.decode()
    assert f'href="/test/{session.id}/trace.json">JSON</a>' in trace


def test_the_twin_tag_is_empty_where_a_route_has_no_twin(rf_request=None):
    request = RequestFactory().get("/test/new")
    request.resolver_match = resolve("/test/new")
    out = Template("{% load gambit_ui %}[{% twin_url %}]").render(Context({"request": request}))
    assert out == "[]"


AWKWARD = "ça & co #1/PROMPT.md"  # a space, &, #, a non-ASCII letter


@pytest.fixture
def awkward_ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    shutil.copytree(root / "support", root / "ça & co #1")
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def _query(location: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(location).query)


def test_redirects_encode_the_deck_path(client, awkward_ws):
    response = client.post("/build/scaffold", {"deck": AWKWARD, "kind": "snippet", "name": "x"})
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == "/build/deck"
    assert _query(response["Location"]) == {"path": [AWKWARD]}
    new = client.post("/build/new", {"name": "my new deck"})  # named my_new_deck
    assert _query(new["Location"]) == {
        "path": ["my_new_deck/PROMPT.md"],
        "deck": ["my_new_deck/PROMPT.md"],
    }
    twin = client.post("/build/new?format=json", {"name": "other"}).json()
    assert twin["url"] == "/build/deck?path=other/PROMPT.md"


def test_links_to_a_deck_survive_awkward_paths(client, awkward_ws):
    html = client.get("/build").content.decode()
    assert "/build/deck?path=%C3%A7a%20%26%20co%20%231/PROMPT.md" in html
    deck = client.get("/build/deck", {"path": AWKWARD})
    assert deck.status_code == 200
    assert "/build/file?path=%C3%A7a%20%26%20co%20%231/PROMPT.md&amp;deck=" in deck.content.decode()


def test_add_to_chat_carries_the_text_once_encoded_never_html_escaped():
    out = Template(
        "{% load gambit_ui %}{% filter ask_url:deck %}Rated {{ text }}{% endfilter %}"
    ).render(Context({"deck": AWKWARD, "text": 'a <b> & "c" #d é'}))
    query = _query(out.replace("&amp;", "&"))
    assert query == {"path": [AWKWARD], "deck": [AWKWARD], "ask": ['Rated a <b> & "c" #d é']}


def _page_urls(session_id: str) -> list[str]:
    return [
        "/test",
        f"/test/{session_id}",
        f"/test/{session_id}/trace",
        f"/test/{session_id}/replay?step=1",
        f"/test/{session_id}/rerun",
        "/grade",
        "/grade/calibration",
        "/grade/verify",
        "/build",
        "/build/deck?path=support/PROMPT.md",
        "/build/file?path=support/PROMPT.md&deck=support/PROMPT.md",
        "/build/assistant?deck=support/PROMPT.md",
    ]


def test_every_page_and_its_twin_answer_and_the_page_names_its_twin(client, workspace):
    session = chat_session(workspace)
    for url in _page_urls(session.id):
        path, _, query = url.partition("?")
        twin_url = f"{path}.json" + (f"?{query}" if query else "")
        page = client.get(url)
        twin = client.get(twin_url)
        assert page.status_code == 200 and twin.status_code == 200, url
        assert twin["Content-Type"].startswith("application/json"), url
        assert isinstance(twin.json(), dict), url
        html = page.content.decode()
        if "<html" in html:  # the assistant's panel is a fragment of the editor page
            escaped = twin_url.replace("&", "&amp;")
            assert f'<link rel="alternate" type="application/json" href="{escaped}">' in html, url
