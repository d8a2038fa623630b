"""The endpoint app's ApiKey: the table `decks_app` created and renamed to endpoint_apikey
(decks_app/migrations/0004_apikey_moves_to_endpoint.py), adopted here without touching it."""

from django.db import migrations, models

import endpoint.models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("decks_app", "0004_apikey_moves_to_endpoint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiKey",
                    fields=[
                        (
                            "id",
                            models.CharField(
                                default=endpoint.models.new_api_key_id,
                                max_length=40,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        (
                            "digest",
                            models.CharField(
                                help_text="sha256 of the key", max_length=64, unique=True
                            ),
                        ),
                        (
                            "prefix",
                            models.CharField(
                                help_text="the key's first characters, to tell keys apart",
                                max_length=16,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked", models.BooleanField(default=False)),
                    ],
                ),
            ],
            database_operations=[],
        ),
    ]
