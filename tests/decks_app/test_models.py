import pytest
from django.core.management import call_command
from django.db import IntegrityError

from decks_app.models import Feedback, Run, TraceEvent

from .conftest import chat_session


@pytest.mark.django_db
def test_the_migrations_match_the_models():
    call_command("makemigrations", "decks_app", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_trace_events_are_unique_per_run_and_seq(workspace):
    s = chat_session(workspace)
    run = Run.objects.create(session=s)
    TraceEvent.objects.create(run=run, session=s, seq=1, type="log", payload={}, ts=0)
    with pytest.raises(IntegrityError):
        TraceEvent.objects.create(run=run, session=s, seq=1, type="log", payload={}, ts=0)


@pytest.mark.django_db
def test_feedback_scores_stay_in_range(workspace):
    s = chat_session(workspace)
    with pytest.raises(IntegrityError):
        Feedback.objects.create(session=s, message_ref_id="msg-x", score=4)
