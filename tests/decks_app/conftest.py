"""Fixtures for the simulator's view, consumer and worker tests."""

from __future__ import annotations

import pytest
from django.test import Client

from decks_app.models import Session
from decks_app.sessions.actions import create_session
from decks_app.workspaces.served import current_workspace


@pytest.fixture
def workspace(db):
    return current_workspace()


@pytest.fixture
def client() -> Client:
    return Client(HTTP_HOST="127.0.0.1")


@pytest.fixture
def csrf_client() -> Client:
    return Client(HTTP_HOST="127.0.0.1", enforce_csrf_checks=True)


@pytest.fixture
def support_session(workspace) -> Session:
    return create_session(workspace, "support/PROMPT.md", model="offline/echo")


@pytest.fixture
def hello_session(workspace) -> Session:
    return create_session(workspace, "hello/deck.py")


def chat_session(workspace, *, reply: str = "Hi <b>there</b>", user: str = "hello") -> Session:
    """A session with one finished exchange, written directly (no worker)."""
    session = create_session(workspace, "support/PROMPT.md", model="offline/echo")
    session.messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": user},
        {"role": "assistant", "content": reply},
    ]
    session.message_refs = [
        {"id": "msg-000000000000000000000001", "role": "system"},
        {"id": "msg-000000000000000000000002", "role": "user"},
        {"id": "msg-000000000000000000000003", "role": "assistant"},
    ]
    session.state_version = 1
    session.save()
    return session
