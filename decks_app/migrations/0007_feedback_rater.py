"""Ratings carry a rater name: one rating per rater and message instead of one per message.
Rows written before have no name (""), shown as "unknown" (docs/calibration.md, "Raters")."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("decks_app", "0006_session_search")]

    operations = [
        migrations.AddField(
            model_name="feedback",
            name="rater",
            field=models.CharField(blank=True, default="", max_length=80),
        ),
        migrations.RemoveConstraint(model_name="feedback", name="feedback_one_per_message"),
        migrations.AddConstraint(
            model_name="feedback",
            constraint=models.UniqueConstraint(
                fields=("session", "message_ref_id", "rater"), name="feedback_one_per_rater"
            ),
        ),
    ]
