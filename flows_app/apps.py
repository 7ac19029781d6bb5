from django.apps import AppConfig


class FlowsAppConfig(AppConfig):
    name = "flows_app"
    verbose_name = "Flows"
    default_auto_field = "django.db.models.BigAutoField"
