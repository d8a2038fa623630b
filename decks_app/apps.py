from django.apps import AppConfig


class DecksAppConfig(AppConfig):
    name = "decks_app"
    verbose_name = "Gambit simulator"
    default_auto_field = "django.db.models.BigAutoField"
