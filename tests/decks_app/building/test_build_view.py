"""The Build tab: decks, files, atomic saves that refuse stale overwrites, validation of
drafts at their line, new decks that load cleanly, deletion with confirmation, and every
path escape refused. JSON twins, 405/403/404."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from gambit.core import check_deck_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    (tmp_path / "outside.txt").write_text("secret\n")
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def test_the_tab_lists_decks(client, ws):
    data = client.get("/build.json").json()
    assert {d["path"] for d in data["decks"]} == {"hello/deck.py", "support/PROMPT.md"}
    assert 'id="create-deck"' in client.get("/build").content.decode()


def test_a_deck_as_the_loader_sees_it_beside_its_files(client, ws):
    data = client.get("/build/deck.json?path=support/PROMPT.md").json()
    roles = {(e["path"], e["role"]) for e in data["entries"]}
    assert ("support/graders/tone/PROMPT.md", "grader") in roles
    assert ("support/actions/order_status.py", "action") in roles
    assert "support/schemas/customer.json" in [f["path"] for f in data["files"]]
    assert data["problems"] == []


def test_open_edit_save_and_a_stale_save_is_refused(client, ws):
    opened = client.get("/build/file.json?path=support/PROMPT.md&deck=support/PROMPT.md").json()
    assert opened["text"].startswith("+++") and opened["version"]
    broken = opened["text"].replace('startMode = "user"', 'startMode = "sometimes"')
    saved = client.post(
        "/build/save",
        {
            "path": "support/PROMPT.md",
            "deck": "support/PROMPT.md",
            "text": broken,
            "version": opened["version"],
        },
    ).json()
    assert saved["saved"] is True  # a broken deck is always saved
    (error,) = [p for p in saved["problems"] if p["severity"] == "error"]
    assert error["file"] == "support/PROMPT.md" and error["key"] == "startMode"
    assert (ws / "support/PROMPT.md").read_text() == broken
    (ws / "support/PROMPT.md").write_text(opened["text"])  # someone else edits it on disk
    stale = client.post(
        "/build/save",
        {"path": "support/PROMPT.md", "text": "mine", "version": saved["version"]},
    )
    assert stale.status_code == 409
    assert stale.json()["conflict"]["diskText"] == opened["text"]
    assert (ws / "support/PROMPT.md").read_text() == opened["text"]


def test_a_draft_is_validated_at_its_line_without_saving(client, ws):
    text = (ws / "support/PROMPT.md").read_text()
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("startMode"))
    lines[index] = "startMode = = nope"
    problems = client.post(
        "/build/validate",
        {"path": "support/PROMPT.md", "deck": "support/PROMPT.md", "text": "\n".join(lines)},
    ).json()["problems"]
    (error,) = problems
    assert error["file"] == "support/PROMPT.md" and error["line"] == index + 1
    assert (ws / "support/PROMPT.md").read_text() == text  # nothing written


def _draft_problems(client, ws, deck: str, front: str) -> list[str]:
    text = (ws / deck).read_text().replace("+++\n", "+++\n" + front + "\n", 1)
    return [
        p["text"]
        for p in client.post("/build/validate", {"path": deck, "deck": deck, "text": text}).json()[
            "problems"
        ]
    ]


def _saved_problems(client, ws, deck: str, front: str) -> list[str]:
    text = (ws / deck).read_text().replace("+++\n", "+++\n" + front + "\n", 1)
    opened = client.get(f"/build/file.json?path={deck}&deck={deck}").json()
    saved = client.post(
        "/build/save", {"path": deck, "deck": deck, "text": text, "version": opened["version"]}
    ).json()
    return [p["text"] for p in saved["problems"]]


def test_a_draft_says_what_saving_will_say_of_paths_outside_its_folder(client, ws, tmp_path):
    # Before, the draft was checked in a lone scratch copy of its folder: a schema beside
    # the deck's folder "did not exist (/tmp/gambit-draft-.../support/schemas/...)" while
    # typing, and loaded once saved; a path leaving the workspace named the wrong place.
    (ws / "mydeck").mkdir()
    (ws / "mydeck/PROMPT.md").write_text('+++\nlabel = "Mine"\n+++\nHello.\n')
    deck = "mydeck/PROMPT.md"
    beside = 'contextSchema = "../support/schemas/customer.json"'
    assert _draft_problems(client, ws, deck, beside) == []
    for front in (
        'contextSchema = "../support/schemas/nope.json"',  # missing, inside the workspace
        'contextSchema = "../../outside.txt"',  # leaves the workspace
    ):
        drafted = _draft_problems(client, ws, deck, front)
        assert drafted and not any("gambit-draft" in t for t in drafted), drafted
        assert drafted == _saved_problems(client, ws, deck, front)
        (ws / deck).write_text('+++\nlabel = "Mine"\n+++\nHello.\n')
    assert any(str(tmp_path / "outside.txt") in t for t in drafted), drafted


def test_a_new_deck_loads_cleanly_and_can_be_deleted(client, ws):
    created = client.post("/build/new?format=json", {"name": "Front desk"})
    assert created.status_code == 201 and created.json()["deck"] == "front_desk/PROMPT.md"
    tree, diag = check_deck_tree(ws / "front_desk/PROMPT.md")
    assert not diag.errors and not diag.warnings
    assert {e.role for e in tree.entries} == {"root", "scenario", "grader"}
    assert (ws / "front_desk/INTENT.md").is_file() and (ws / "front_desk/policy").is_dir()
    assert client.post("/build/new", {"name": "front_desk"}).status_code == 400  # exists
    refused = client.post(
        "/build/delete?format=json", {"path": "front_desk/PROMPT.md", "confirm": "x"}
    )
    assert refused.status_code == 400 and (ws / "front_desk").exists()
    gone = client.post(
        "/build/delete?format=json", {"path": "front_desk/PROMPT.md", "confirm": "front_desk"}
    )
    assert gone.json() == {"deleted": "front_desk/PROMPT.md"} and not (ws / "front_desk").exists()


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "/etc/passwd",
        "support/../../outside.txt",
        "link/outside.txt",
        "support/\x00x",
    ],
)
def test_every_escape_is_refused(client, ws, path):
    os.symlink(ws.parent, ws / "link")
    read = client.get("/build/file.json", {"path": path})
    assert read.status_code in (400, 404)
    write = client.post("/build/save", {"path": path, "text": "pwned"})
    assert write.status_code == 400
    assert (ws.parent / "outside.txt").read_text() == "secret\n"


@pytest.mark.parametrize(
    "path", [".gambit/secret_key", "./.gambit/secret_key", "state/secret_key", "support/.gambit/x"]
)
def test_the_simulators_state_is_neither_shown_nor_edited(client, ws, path):
    # Before: /build/file?path=.gambit/secret_key answered 200 with Django's secret key,
    # while the file tree hid the folder (docs/simulator.md, "Build tab").
    (ws / ".gambit").mkdir()
    (ws / ".gambit" / "secret_key").write_text("do-not-show\n")
    (ws / "support" / ".gambit").mkdir()
    (ws / "support" / ".gambit" / "x").write_text("do-not-show\n")
    os.symlink(ws / ".gambit", ws / "state")
    read = client.get("/build/file.json", {"path": path})
    assert read.status_code == 400 and "do-not-show" not in read.content.decode()
    assert "where the simulator keeps its state" in read.json()["error"]
    write = client.post("/build/save", {"path": path, "text": "chosen"})
    assert write.status_code == 400
    assert (ws / ".gambit" / "secret_key").read_text() == "do-not-show\n"
    assert (ws / "support" / ".gambit" / "x").read_text() == "do-not-show\n"


def test_binary_files_are_shown_as_such(client, ws):
    (ws / "support/logo.png").write_bytes(b"\x89PNG\x00\x01")
    data = client.get("/build/file.json?path=support/logo.png").json()
    assert data["binary"] is True and data["text"] is None


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/build"),
        ("get", "/build/save"),
        ("get", "/build/new"),
        ("get", "/build/validate"),
    ],
)
def test_wrong_methods_are_405(client, ws, method, url):
    assert getattr(client, method)(url).status_code == 405


def test_unknown_decks_and_files_are_404(client, ws):
    assert client.get("/build/deck.json?path=nope/PROMPT.md").status_code == 404
    assert client.get("/build/file.json?path=support/nope.md").status_code == 404


def test_writes_need_the_csrf_token(csrf_client, ws):
    assert csrf_client.post("/build/new", {"name": "x"}).status_code == 403


@pytest.mark.parametrize(
    ("kind", "role", "file"),
    [
        ("scenario", "scenario", "support/scenarios/angry_customer/PROMPT.md"),
        ("grader_turns", "grader", "support/graders/angry_customer/PROMPT.md"),
        ("grader_conversation", "grader", "support/graders/angry_customer/PROMPT.md"),
        ("action", "action", "support/actions/angry_customer/PROMPT.md"),
        ("compute_action", "action", "support/actions/angry_customer.py"),
        ("snippet", None, "support/snippets/angry_customer.md"),
    ],
)
def test_scaffolding_adds_files_and_the_entry_keeping_the_front_matter(
    client, ws, kind, role, file
):
    before = (ws / "support/PROMPT.md").read_text()
    response = client.post(
        "/build/scaffold?format=json",
        {"deck": "support/PROMPT.md", "kind": kind, "name": "Angry customer"},
    )
    assert response.status_code == 201, response.content
    assert file in response.json()["created"]
    assert [p for p in response.json()["problems"] if p["severity"] == "error"] == []
    after = (ws / "support/PROMPT.md").read_text()
    # every line that was there is still there, in the same order (comments and layout kept)
    remaining = iter(after.splitlines())
    assert all(line in remaining for line in before.splitlines() if not line.startswith("![]"))
    tree, diag = check_deck_tree(ws / "support/PROMPT.md")
    assert not diag.errors
    if role is not None:
        assert (str(ws / file), role) in {(e.path, e.role) for e in tree.entries}
    else:
        assert "angry_customer" in tree.root.body or "write the shared guidance" in tree.root.body
    again = client.post(
        "/build/scaffold?format=json",
        {"deck": "support/PROMPT.md", "kind": kind, "name": "Angry customer"},
    )
    assert again.status_code == 400  # never overwrites


def test_scaffolding_refuses_bad_names_and_kinds(client, ws):
    bad = client.post(
        "/build/scaffold?format=json",
        {"deck": "support/PROMPT.md", "kind": "scenario", "name": "../x"},
    )
    assert bad.status_code == 400
    kind = client.post(
        "/build/scaffold?format=json", {"deck": "support/PROMPT.md", "kind": "virus", "name": "x"}
    )
    assert kind.status_code == 400


# ---------------------------------------------------------------- issue 26


def test_a_refused_name_keeps_the_form_with_the_reason(client, ws):
    fragment = client.post("/build/new", {"name": "support"}, HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert fragment.status_code == 200  # htmx swaps it in place of the form
    assert html.lstrip().startswith('<form method="post"') and "<html" not in html
    assert 'value="support"' in html and 'aria-invalid="true"' in html
    assert "A folder named support already exists." in html
    page = client.post("/build/new", {"name": "bad/name"})
    assert page.status_code == 400
    body = page.content.decode()
    assert 'id="new-deck-form"' in body and 'value="bad/name"' in body
    assert "A deck name uses letters, digits, - and _ (at most 60)." in body
    refused = client.post("/build/new?format=json", {"name": "bad/name"})
    assert refused.status_code == 400 and "letters, digits" in refused.json()["error"]


def test_a_created_deck_and_an_added_file_are_confirmed_with_links(client, ws):
    created = client.post("/build/new", {"name": "front_desk"}, HTTP_HX_REQUEST="true")
    assert (
        created["HX-Redirect"] == "/build/file?path=front_desk/PROMPT.md&deck=front_desk/PROMPT.md"
    )
    editor = client.get(created["HX-Redirect"]).content.decode()
    assert "Created the deck front_desk." in editor
    assert 'href="/build/deck?path=front_desk/PROMPT.md"' in editor
    added = client.post(
        "/build/scaffold",
        {"deck": "front_desk/PROMPT.md", "kind": "scenario", "name": "angry_customer"},
        follow=True,
    )
    html = added.content.decode()
    assert "Added <a" in html and "front_desk/scenarios/angry_customer/PROMPT.md</a>." in html
    assert "Added" not in client.get("/build/deck?path=front_desk/PROMPT.md").content.decode()


def test_the_folder_name_pattern_compiles_with_the_v_flag(client, ws):
    import re as re_

    html = client.get("/build").content.decode()
    pattern = re_.search(r'id="new-deck-name"[^>]*pattern="([^"]+)"', html).group(1)
    # Chromium compiles `pattern` with the v flag, where a bare `-` ends no class: escaped
    assert pattern == r"[A-Za-z0-9_ \-]+"


def test_the_delete_button_is_a_danger_button_and_the_title_can_be_long(client, ws):
    html = client.get("/build/deck?path=support/PROMPT.md").content.decode()
    assert '<button type="submit" class="danger" id="delete-deck">Delete deck</button>' in html
    assert '<h1 class="deck-title" title="support/PROMPT.md">' in html
