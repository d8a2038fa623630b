from django.db import migrations, models


def interrupt_extra_active_runs(apps, schema_editor):
    """Before the constraint: a session left with several queued/running runs (possible
    before it existed) keeps its oldest; the others are marked interrupted."""
    Run = apps.get_model("decks_app", "Run")
    seen: set[str] = set()
    for run in Run.objects.filter(status__in=["queued", "running"]).order_by("created_at"):
        if run.session_id in seen:
            Run.objects.filter(pk=run.pk).update(
                status="interrupted",
                error="interrupted: another run of this session was already in progress",
            )
        seen.add(run.session_id)


class Migration(migrations.Migration):
    dependencies = [
        ("decks_app", "0002_grades_verify_api_assistant"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="turn_base",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(interrupt_extra_active_runs, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ["queued", "running"])),
                fields=("session",),
                name="one_active_run_per_session",
            ),
        ),
    ]
