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
        "scores": {"type": "array", "items": {"type": "integer"}},
        "orders": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "examples": ["A1"]},
                    "qty": {"type": "integer", "default": 1},
                },
            },
        },
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
    # lists of plain values are one per line; a list of objects is JSON shaped like one item
    assert re.search(r'\(one item per line\) <textarea name="ctx.tags"', html)
    assert re.search(r'\(one number per line\) <textarea name="ctx.scores"', html)
    assert (
        '(JSON) <textarea name="ctx.orders" rows="2" >[{&quot;id&quot;: &quot;A1&quot;, &quot;qty&quot;: 1}]'
        in html
    )
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
            "ctx.tags": "a\n b \n\n",
            "ctx.scores": "3\n-1",
            "ctx.orders": '[{"id": "A9"}]',
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
        "scores": [3, -1],
        "orders": [{"id": "A9", "qty": 1}],  # the item default is applied
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


def test_a_list_of_numbers_must_hold_numbers(client, ws):
    response = client.post(
        "/test/new?format=json",
        {"deck": "form/PROMPT.md", "ctx.name": "Sam", "ctx.age": "4", "ctx.scores": "1\nlots"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "ctx.scores[1]: 'lots' is not a number"


PERSONA_SCHEMA = {
    "type": "object",
    "properties": {
        "mood": {"type": "string", "enum": ["calm", "upset"], "default": "calm"},
        "orderId": {"type": "string", "description": "The order the customer asks about"},
    },
    "required": ["orderId"],
}


@pytest.fixture
def with_persona(ws):
    """form/ declares a scenario whose deck has a contextSchema of its own."""
    folder = ws / "form" / "scenarios" / "asker"
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps(PERSONA_SCHEMA))
    (folder / "PROMPT.md").write_text(
        '+++\nlabel = "Asker"\ncontextSchema = "./input.json"\n'
        'modelParams.model = "offline/echo"\n+++\nYou ask about your order.\n'
    )
    prompt = ws / "form" / "PROMPT.md"
    prompt.write_text(
        prompt.read_text().replace(
            "+++\nHi.",
            '[[scenarios]]\npath = "./scenarios/asker/PROMPT.md"\nlabel = "Asker"\n+++\nHi.',
        )
    )
    return ws


def test_the_scenario_deck_gets_a_form_from_its_own_schema(client, with_persona):
    html = client.get("/test").content.decode()
    assert 'id="persona-context"' in html
    assert "<b>Asker</b> <code>form/scenarios/asker/PROMPT.md</code>" in html
    assert 'name="persona.orderId"' in html and "The order the customer asks about" in html
    # Choosing the scenario brings the root deck's form and, out of band, the scenario's.
    swapped = client.get(
        "/test/context-form?prefix=scenario_ctx&scenario=form/PROMPT.md|form/scenarios/asker/PROMPT.md"
    ).content.decode()
    assert 'id="scenario-context"' in swapped
    assert '<div id="persona-context" class="context-form" hx-swap-oob="true">' in swapped
    assert "<option selected>calm</option>" in swapped


def test_a_scenario_input_missing_a_required_field_is_named_before_the_run(client, with_persona):
    choice = "form/PROMPT.md|form/scenarios/asker/PROMPT.md"
    response = client.post(
        "/test/scenario?format=json", {"scenario": choice, "persona.mood": "upset"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "fill the required fields: orderId"
    assert not Session.objects.exists()


def test_the_scenario_input_reaches_the_run_and_a_batch(client, with_persona):
    choice = "form/PROMPT.md|form/scenarios/asker/PROMPT.md"
    response = client.post(
        "/test/scenario?format=json",
        {
            "scenario": choice,
            "persona.orderId": "A7",
            "persona.mood": "upset",
            "scenario_ctx.name": "Ann",
        },
    )
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["id"])
    assert session.meta["scenarioInput"] == {"orderId": "A7", "mood": "upset"}
    assert session.runs.get().params["scenarioInput"] == {"orderId": "A7", "mood": "upset"}
    assert session.context == {"name": "Ann", "plan": "free"}
    batch = client.post(
        "/test/scenario?format=json",
        {
            "scenario": choice,
            "runs": "3",
            "persona__json": '{"orderId": "B2"}',
            "scenario_ctx.name": "Bo",
        },
    )
    assert batch.status_code == 201, batch.content
    batch_session = Session.objects.get(origin="verify")
    settings = batch_session.runs.get().params  # the verify run's params are its settings
    assert settings["scenarioInput"] == {"orderId": "B2", "mood": "calm"}
    assert settings["context"] == {"name": "Bo", "plan": "free"}
    assert batch_session.context == {"name": "Bo", "plan": "free"}  # the deck's context only
