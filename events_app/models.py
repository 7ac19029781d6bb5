"""Subscriptions, the outbox of events, and each event's delivery to each subscription;
the endpoints lookups call."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from access_app.request_ids import current_request_id
from flowcore.common.limits import (
    LOOKUP_TIMEOUT,
    MAX_ID_LENGTH,
    MAX_LOOKUP_TIMEOUT,
    MIN_LOOKUP_TIMEOUT,
)
from flowcore.common.names import ID_HELP, ID_RE


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form: ``whsec_`` and 24 random bytes,
    base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def secret_fingerprint(secret: str) -> str:
    """What shows which secret a subscription has without showing it: the first 12 hex
    digits of the SHA-256 of the secret as printed (``whsec_…``)."""
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def new_message_id() -> str:
    """An event's ``webhook-id``: the same on every try, to every subscription."""
    return "msg_" + secrets.token_urlsafe(16)


class Subscription(models.Model):
    class Format(models.TextChoices):
        STANDARD = "standard"
        SLACK = "slack"

    url = models.URLField(max_length=2000)
    # The event kinds it receives, e.g. ["run.stalled", "run.completed"].
    events = models.JSONField(default=list)
    include_values = models.BooleanField(
        default=False,
        help_text="Send the run's values with run events (those marked personal masked).",
    )
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.STANDARD)
    secret = models.CharField(max_length=100, default=new_secret, editable=False)
    # After ``webhook rotate``: the secret before, which signs beside the new one until
    # previous_secret_until, then is cleared (the worker forgets it).
    previous_secret = models.CharField(max_length=100, blank=True, default="", editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ("pk",)

    def __str__(self) -> str:
        return f"#{self.pk} {self.url}"

    @property
    def fingerprint(self) -> str:
        return secret_fingerprint(self.secret)

    def signing_secrets(self, at: datetime) -> list[str]:
        """The secrets that sign a delivery made ``at``: the subscription's, and the one
        before it during a rotation's grace period."""
        until = self.previous_secret_until
        in_grace = bool(self.previous_secret) and until is not None and at < until
        return [self.secret, self.previous_secret] if in_grace else [self.secret]


class Event(models.Model):
    """The outbox: one row per event, written in the transaction of the change it reports
    (only when some subscription wants its kind). The worker fans it out into deliveries."""

    message_id = models.CharField(max_length=40, unique=True, default=new_message_id)
    kind = models.CharField(max_length=32)
    data = models.JSONField()
    # The run's values, apart: only subscriptions with include_values receive them.
    values = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    fanned_out = models.BooleanField(default=False)
    # The HTTP request that recorded it: its webhook tries are logged with that id.
    request_id = models.CharField(max_length=128, blank=True, default=current_request_id)

    class Meta:
        indexes = [
            models.Index(
                fields=["id"], name="events_unfanned", condition=models.Q(fanned_out=False)
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.message_id}"


class Delivery(models.Model):
    """One event to one subscription: its tries, the last answer, and when to try next."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # Tries go on for GUIDEPOST_WEBHOOK_RETRY_FOR seconds from here (redeliver sets it anew).
    retry_since = models.DateTimeField()
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_response_ms = models.FloatField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["event", "subscription"], name="one_delivery_each")
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="deliveries_due",
                condition=models.Q(state="pending"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} to #{self.subscription_id}"


class Endpoint(models.Model):
    """A system of record a lookup calls, by its name (issue 45). Flows name endpoints and
    operators register them: a draft can never make the server call an address of its
    choosing. Each call is signed with the secret, as a webhook is."""

    name = models.CharField(
        max_length=MAX_ID_LENGTH,
        unique=True,
        validators=[RegexValidator(rf"\A{ID_RE.pattern}\Z", ID_HELP)],
        help_text=f"What a flow's lookup calls it ({ID_HELP}).",
    )
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=100, default=new_secret, editable=False)
    timeout = models.FloatField(
        default=LOOKUP_TIMEOUT,
        validators=[MinValueValidator(MIN_LOOKUP_TIMEOUT), MaxValueValidator(MAX_LOOKUP_TIMEOUT)],
        help_text=f"Seconds a call may take in all, at most {MAX_LOOKUP_TIMEOUT:g}.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    @property
    def fingerprint(self) -> str:
        return secret_fingerprint(self.secret)
