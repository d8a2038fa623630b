"""ApiKey moves to the endpoint app (endpoint/migrations/0001_initial.py takes it over).

The table is renamed, never recreated, so an existing database keeps its keys: this app
forgets the model's state, the endpoint app adopts it with a state-only CreateModel.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("decks_app", "0003_run_turn_base_one_active"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable(name="apikey", table="endpoint_apikey"),
            ],
            state_operations=[
                migrations.DeleteModel(name="ApiKey"),
            ],
        ),
    ]
