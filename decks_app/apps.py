from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_save


def _enqueue_new_run(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    from decks_app.runs.worker import on_run_created

    on_run_created(sender, instance, created)


class DecksAppConfig(AppConfig):
    name = "decks_app"
    verbose_name = "Gambit simulator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The simulator's own run kinds and session origins, registered as a third-party
        # app's would be (decks_app.runs.registry, docs/simulator.md "Jobs").
        from decks_app.building import kinds as building_kinds  # noqa: F401

        # The live views: page parts the session socket keeps up to date, registered where
        # they are defined (decks_app.web.live, docs/simulator.md "Live updates").
        from decks_app.building import views as building_views  # noqa: F401
        from decks_app.grading import kinds as grading_kinds  # noqa: F401
        from decks_app.grading.views import grade as grade_views  # noqa: F401
        from decks_app.grading.views import verify as verify_views  # noqa: F401
        from decks_app.models import Run
        from decks_app.sessions import kinds as session_kinds  # noqa: F401
        from decks_app.sessions.views import compare as compare_views  # noqa: F401

        # Every queued run becomes a django.tasks task, whichever code path created it.
        post_save.connect(_enqueue_new_run, sender=Run, dispatch_uid="gambit-enqueue-run")
