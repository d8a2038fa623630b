from django.apps import AppConfig


class EndpointConfig(AppConfig):
    """The Open Responses endpoint (`/v1/*`): its keys, views, response store and schemas."""

    name = "endpoint"
    verbose_name = "Gambit Open Responses endpoint"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from endpoint import kinds  # noqa: F401  # registers the "api" run kind
