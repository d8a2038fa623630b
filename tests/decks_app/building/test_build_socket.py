"""The Build page's live path: changes on disk reach the open page as htmx out-of-band
fragments rendered from the Build templates (never JSON the page turns into markup), and
saving or checking a draft answers htmx with the same problems partial."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from decks_app.building.filewatch import GROUP
from simulator.asgi import application

ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
DECK = "support/PROMPT.md"


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


@pytest.mark.django_db(transaction=True)
async def test_a_change_on_disk_arrives_as_fragments_of_the_build_templates(ws):
    comm = WebsocketCommunicator(application, "/ws/build/", headers=ORIGIN)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    await comm.send_json_to({"view": "build_file", "key": "support/INTENT.md", "deck": DECK})
    await comm.receive_nothing(timeout=0.2)  # the hello is processed
    prompt = ws / "support" / "PROMPT.md"
    await sync_to_async(prompt.write_text)(
        prompt.read_text().replace('startMode = "user"', 'startMode = "sideways"')
    )
    (ws / "support" / "INTENT.md").write_text("# Intent\n\n<b>new</b> text\n")
    layer = get_channel_layer()
    await layer.group_send(
        GROUP, {"type": "files.changed", "paths": ["support/PROMPT.md", "support/INTENT.md"]}
    )
    html = await comm.receive_from(timeout=5)
    assert html.lstrip().startswith('<div id="problems"') and 'hx-swap-oob="true"' in html
    assert '<li class="error" data-file="support/PROMPT.md"' in html and "startMode" in html
    assert '<div id="disk-file" hidden hx-swap-oob="true" data-version="' in html
    assert "&lt;b&gt;new&lt;/b&gt; text" in html  # the open file's new text, escaped
    # a change to another file: the problems again, no text for the editor
    await layer.group_send(GROUP, {"type": "files.changed", "paths": ["support/PROMPT.md"]})
    html = await comm.receive_from(timeout=5)
    assert 'id="problems"' in html and 'data-version=""' in html and "<textarea" not in html
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_page_that_said_nothing_gets_nothing(ws):
    comm = WebsocketCommunicator(application, "/ws/build/", headers=ORIGIN)
    assert (await comm.connect(timeout=5))[0]
    await comm.send_to(text_data="not json")
    await get_channel_layer().group_send(GROUP, {"type": "files.changed", "paths": [DECK]})
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


@pytest.mark.django_db
def test_htmx_saves_answer_with_the_problems_partial_and_a_stale_save_with_the_disk_text(
    client, ws
):
    opened = client.get(f"/build/file.json?path={DECK}&deck={DECK}").json()
    broken = opened["text"].replace('startMode = "user"', 'startMode = "sideways"')
    fields = {"path": DECK, "deck": DECK, "text": broken, "version": opened["version"]}
    saved = client.post("/build/save", fields, HTTP_HX_REQUEST="true")
    html = saved.content.decode()
    assert saved.status_code == 200 and "<html" not in html
    assert 'id="save-status"' in html and "Saved, with 1 error in the deck." in html
    assert '<li class="error" data-file="support/PROMPT.md"' in html
    assert 'id="conflict" hidden hx-swap-oob="true"' in html
    (ws / DECK).write_text(opened["text"] + "\n<i>edited elsewhere</i>\n")
    stale = client.post("/build/save", fields, HTTP_HX_REQUEST="true")
    html = stale.content.decode()
    assert stale.status_code == 409 and "Not saved: the file changed on disk." in html
    assert "&lt;i&gt;edited elsewhere&lt;/i&gt;" in html and 'id="problems"' not in html
    draft = client.post(
        "/build/validate", {"path": DECK, "deck": DECK, "text": broken}, HTTP_HX_REQUEST="true"
    )
    assert draft.content.decode().lstrip().startswith('<div id="problems"')
    assert "startMode" in draft.content.decode()


@pytest.mark.django_db
def test_the_assistant_panel_is_rendered_by_the_server_for_htmx(client, ws):
    html = client.get(f"/build/file?path={DECK}&deck={DECK}&ask=fix+%3Cit%3E").content.decode()
    assert '<section class="panel assistant" id="assistant"' in html
    assert (
        "fix &lt;it&gt;</textarea>" in html
        and "ws-connect" not in html.split('id="assistant"')[1].split(">")[0]
    )
    refused = client.post(
        "/build/assistant/send", {"deck": DECK, "message": " "}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert (
        refused.lstrip().startswith("<section") and "write a message for the assistant" in refused
    )
    assert client.get(f"/build/assistant.json?deck={DECK}").json()["session"] is None
