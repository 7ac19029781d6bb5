from django.apps import AppConfig


class AccessAppConfig(AppConfig):
    """Who may call, and the record of every call: agent keys, the guards, the rate limit,
    failure streaks, the audit trail. Every other app sits on it; it knows none of them."""

    name = "access_app"
    verbose_name = "Access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from access_app import lockouts

        lockouts.connect()
