from django.apps import AppConfig


class EventsAppConfig(AppConfig):
    """Events and webhooks: an outbox row written in the transaction of the change
    it reports, and a worker that delivers it, signed, to each subscription. Runs and flows
    record events through ``events_app.services.event_record``; it knows neither."""

    name = "events_app"
    verbose_name = "Events"
    default_auto_field = "django.db.models.BigAutoField"
