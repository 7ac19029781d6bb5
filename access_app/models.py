"""Who may call and the record of every call: agent keys, audit records, the rate
limit's buckets, failure streaks.

These models were runs_app's: their tables keep their names (``runs_app_agentkey`` ...),
so moving them moved no row (access_app migration 0001).
"""

from __future__ import annotations

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from access_app.agent_keys import KEY_NAME, KEY_NAME_HELP


class FailureStreak(models.Model):
    """One conversation's current run of failed calls of a caller, which the error
    object's ``attempt`` counts.

    A streak is on one run (``scope``, its public id), or, for calls with no run, on a
    ``ref`` ("ref:" and its digest) or a connection ("conn:ADDRESS:PORT"); the caller's
    own streak across them all has the scope "*". An accepted call of the caller ends
    it: one on the same run for a run, any for the others.
    """

    caller = models.CharField(max_length=200)
    scope = models.CharField(max_length=64, blank=True, default="")
    failures = models.PositiveIntegerField(default=0)
    # How many calls of the streak failed with each error ("invalid arguments": 2).
    by_error = models.JSONField(default=dict)
    # The signature of the streak's last failed call (tool and arguments), for `repeated`.
    last_failure = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "runs_app_failurestreak"
        constraints = [
            models.UniqueConstraint(fields=["caller", "scope"], name="failure_streak_per_scope")
        ]

    def __str__(self) -> str:
        return f"{self.caller}: {self.failures}"


class AgentKey(models.Model):
    """A key an agent presents as ``Authorization: Bearer <key>``.

    Only the key's SHA-256 is stored. A name holds at most one active key; a revoked key
    stays, for the audit trail. The name is the agent's identity: runs started with any of
    its keys belong to it.
    """

    name = models.CharField(
        max_length=64,
        validators=[RegexValidator(KEY_NAME, f"A key name has {KEY_NAME_HELP}.")],
        help_text=f"Who uses the key, e.g. support-bot: {KEY_NAME_HELP}.",
    )
    display = models.CharField(
        "key starts with", max_length=16, editable=False, help_text="not secret"
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The key's own limits; empty: the server's settings.
    rate_burst = models.PositiveIntegerField(
        "calls at once",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The burst of this key's rate limit. Empty: GUIDEPOST_RATE_BURST.",
    )
    rate_per_second = models.FloatField(
        "calls a second",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.001)],
        help_text="How fast the burst refills. Empty: GUIDEPOST_RATE_PER_SECOND.",
    )
    runs_per_day = models.PositiveIntegerField(
        "runs a day",
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Runs this key may start per day (UTC). Empty: no cap.",
    )

    class Meta:
        db_table = "runs_app_agentkey"
        ordering = ["name", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(revoked_at__isnull=True),
                name="agentkey_one_active_key_per_name",
                violation_error_message="This name already has an active key; revoke it first.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.display}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class AuditRecord(models.Model):
    """One tool call or API request, accepted or refused.

    Never a key, a token, an argument's value or a draft's text: only who, from where,
    what was called on which run, how it ended and how long it took.
    """

    at = models.DateTimeField(db_index=True)
    # The agent key's name, when a key was accepted; "" otherwise.
    key_name = models.CharField(max_length=64, blank=True, default="")
    # The caller as the guards saw it ("key:NAME", "staff:NAME", "anon:ADDRESS:CLIENT");
    # "" when the request was refused before it had one.
    caller = models.CharField(max_length=200, blank=True, default="")
    # The client's name/version as it announced itself (MCP clientInfo, else User-Agent).
    client = models.CharField(max_length=200, blank=True, default="")
    peer = models.CharField(max_length=64, blank=True, default="")
    # The tool called, the API route ("GET /api/runs/<run_id>"), or the HTTP request
    # refused before a tool was known ("POST /mcp").
    tool = models.CharField(max_length=100)
    run_id = models.CharField(max_length=64, blank=True, default="")
    # "ok", or the error's few words ("run not found", "key required").
    outcome = models.CharField(max_length=64)
    # The HTTP status of the response (a tool's error is still a 200 response).
    status = models.PositiveSmallIntegerField()
    duration_ms = models.FloatField()
    # How many requests this record stands for: 1, or a second's refusals from one address
    # summed (a flood of bad keys); ``at`` is then the second's start and
    # ``duration_ms`` the longest of them.
    count = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "runs_app_auditrecord"
        ordering = ["-at", "-id"]
        # A failure looks for the caller's accepted calls since its streak's last failure
        # (access_app.failures).
        # Plain indexes for key_name and run_id: nothing searches them by prefix, so not the
        # LIKE copies Django adds beside an indexed CharField on PostgreSQL.
        indexes = [
            models.Index(fields=["caller", "at"], name="audit_caller_at"),
            models.Index(fields=["key_name"], name="audit_key_name"),
            models.Index(fields=["run_id"], name="audit_run_id"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.key_name or self.caller or '-'} {self.tool}"


class RateBucket(models.Model):
    """One caller's token bucket (``access_app.ratelimit``), when the buckets live in the
    database. Written by one upsert per call, never through the ORM."""

    caller = models.CharField(max_length=200, primary_key=True)
    tokens = models.FloatField()  # calls the caller may make now (fractions refill)
    stamp = models.FloatField()  # when ``tokens`` was last computed (seconds since the epoch)
    allowed = models.BooleanField()  # whether the last call took a token

    class Meta:
        db_table = "runs_app_ratebucket"

    def __str__(self) -> str:
        return f"{self.caller}: {self.tokens:.1f}"
