"""Context forms generated from a deck's contextSchema, validated when a session is created."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from decks_app.models import Session

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Who is asking"},
        "age": {"type": "integer"},
        "vip": {"type": "boolean"},
        "plan": {"type": "string", "enum": ["free", "pro"], "default": "free"},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
}


@pytest.fixture
def ws(tmp_path, settings):
    root = tmp_path / "ws"
    shutil.copytree(Path(settings.GAMBIT_WORKSPACE), root, ignore=shutil.ignore_patterns(".gambit"))
    (root / "form").mkdir()
    (root / "form/schema.json").write_text(json.dumps(SCHEMA))
    (root / "form/PROMPT.md").write_text(
        '+++\nstartMode = "user"\ncontextSchema = "./schema.json"\nmodelParams.model = "offline/echo"\n+++\nHi.\n'
    )
    with override_settings(GAMBIT_WORKSPACE=str(root)):
        yield root


def test_fields_come_from_the_schema(client, ws):
    html = client.get("/test/context-form?deck=form/PROMPT.md").content.decode()
    assert 'name="ctx.name"' in html and "required" in html
    assert 'type="number" step="1" name="ctx.age"' in html
    assert 'type="checkbox" name="ctx.vip"' in html
    assert "<option selected>free</option>" in html  # the default is pre-filled
    assert "<legend>address" in html and 'name="ctx.address.city"' in html
    assert 'name="ctx.tags"' in html and "(JSON)" in html
    assert "Who is asking" in html
    scenario = client.get("/test/context-form?prefix=scenario_ctx&deck=form/PROMPT.md").content
    # in a scenario the persona fills missing fields, so none is required by the browser
    assert not re.search(rb"<(input|select|textarea)[^>]*\brequired\b", scenario)
    assert re.search(
        rb"<input[^>]*\brequired\b", client.get("/test/context-form?deck=form/PROMPT.md").content
    )


def test_a_session_gets_the_typed_context(client, ws):
    response = client.post(
        "/test/new?format=json",
        {
            "deck": "form/PROMPT.md",
            "ctx.name": "Sam",
            "ctx.age": "41",
            "ctx.vip": "on",
            "ctx.plan": "pro",
            "ctx.address.city": "Lyon",
            "ctx.tags": '["a", "b"]',
        },
    )
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["id"])
    assert session.context == {
        "name": "Sam",
        "age": 41,
        "vip": True,
        "plan": "pro",
        "address": {"city": "Lyon"},
        "tags": ["a", "b"],
    }


def test_missing_required_fields_are_named_before_anything_runs(client, ws):
    response = client.post("/test/new?format=json", {"deck": "form/PROMPT.md", "ctx.age": "3"})
    assert response.status_code == 400
    assert "fill the required fields: name" in response.json()["error"]
    assert not Session.objects.exists()


def test_an_invalid_context_is_refused_at_creation(client, ws):
    response = client.post(
        "/test/new?format=json",
        {"deck": "form/PROMPT.md", "ctx__json": '{"name": "Sam", "age": "old"}'},
    )
    assert response.status_code == 400 and "contextSchema" in response.json()["error"]
    assert not Session.objects.exists()
    ok = client.post(
        "/test/new?format=json",
        {"deck": "form/PROMPT.md", "ctx__json": '{"name": "Sam", "age": 7}'},
    )
    assert ok.status_code == 201
    assert Session.objects.get().context == {"name": "Sam", "age": 7, "plan": "free"}  # default


def test_the_examples_deck_gets_its_enum_as_a_select(client, ws):
    html = client.get("/test/context-form?deck=support/PROMPT.md").content.decode()
    assert '<select name="ctx.tier"' in html and "<option selected>standard</option>" in html
