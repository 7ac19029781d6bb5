from django.apps import AppConfig


class RunsAppConfig(AppConfig):
    name = "runs_app"
    verbose_name = "Runs"
    default_auto_field = "django.db.models.BigAutoField"
