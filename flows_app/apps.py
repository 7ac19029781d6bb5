from django.apps import AppConfig


class FlowsAppConfig(AppConfig):
    name = "flows_app"
    verbose_name = "Flows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connects the catalog's setting_changed receiver.
        from flows_app import catalog  # noqa: F401
