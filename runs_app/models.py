"""Runs and their append-only steps; agent keys; the audit trail.

A run is pinned to the exact flow content it started on (``flows_app.FlowVersion``),
so it can be continued and rendered on that version after the flow file changes.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.core.validators import RegexValidator
from django.db import models

from flows_app.domain.access import KEY_NAME, KEY_NAME_HELP

GENESIS_HASH = "0" * 64  # what the first step of a run chains to


def new_run_id() -> str:
    """An opaque run handle with 128 random bits (spec §4: run ids like ``r_<random>``)."""
    return "r_" + secrets.token_urlsafe(16)


class Run(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active"
        COMPLETED = "completed"
        STALLED = "stalled"
        CLOSED = "closed"

    public_id = models.CharField(max_length=32, unique=True, default=new_run_id, editable=False)
    flow_version = models.ForeignKey(
        "flows_app.FlowVersion", on_delete=models.PROTECT, related_name="runs"
    )
    flow_id = models.CharField(max_length=64, db_index=True)
    state = models.CharField(max_length=16, choices=State.choices, db_index=True)
    node = models.CharField(max_length=64, blank=True, default="")
    outcome = models.CharField(max_length=64, blank=True, default="")
    # The engine's whole RunState (values, path, counts), as RunState.to_dict() gives it.
    engine_state = models.JSONField()
    ref = models.CharField(max_length=200, blank=True, default="", db_index=True)
    # Who started the run (the caller's key: "key:NAME" for an agent key, "anon:..." for
    # a caller without one). Another key's caller cannot see the run (selectors.run_get).
    owner = models.CharField(max_length=200, db_index=True)
    # guide_start's request_id: a retry with the same owner and request_id returns this run.
    request_id = models.CharField(max_length=64, blank=True, default="")
    close_reason = models.CharField(max_length=500, blank=True, default="")
    # Bumped by every transition: a call that saw an older version lost a race.
    revision = models.PositiveIntegerField(default=0)
    # The hash of the run's last step, which the next step chains to.
    head_hash = models.CharField(max_length=64, default=GENESIS_HASH)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["state", "-updated_at"])]
        permissions = [("capture_run", "Can save a run as a scenario in the flows' tests")]
        constraints = [
            # Two starts racing with the same request_id: one run, the other gets it back.
            models.UniqueConstraint(
                fields=["owner", "request_id"],
                condition=~models.Q(request_id=""),
                name="run_unique_request_id",
            )
        ]

    def __str__(self) -> str:
        return self.public_id


class Step(models.Model):
    """One accepted call on a run. Append-only; each step hashes its content and the
    previous step's hash, so a run's history is tamper-evident."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    tool = models.CharField(max_length=32)
    input = models.JSONField()
    # The result exactly as the agent received it, as JSON text: PostgreSQL's jsonb
    # would reorder its keys, and a retry with `at` must return the same result.
    result_json = models.TextField()
    status = models.CharField(max_length=16)
    node_before = models.CharField(max_length=64, blank=True, default="")
    node_after = models.CharField(max_length=64, blank=True, default="")
    # Who made the call (the caller's key, as Run.owner); "" on steps older than keys.
    caller = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="step_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.tool}"

    @property
    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.result_json)
        return result


class FailureStreak(models.Model):
    """One caller's current run of failed calls (spec §7 ``attempt``; ADR 0020).

    A streak is on one run (``scope``, its public id) or on no run (``""``); a failed
    call elsewhere starts a new one, and any accepted call of the caller ends it.
    """

    caller = models.CharField(max_length=200, unique=True)
    scope = models.CharField(max_length=64, blank=True, default="")
    failures = models.PositiveIntegerField(default=0)
    # How many calls of the streak failed with each error ("invalid arguments": 2).
    by_error = models.JSONField(default=dict)
    # The signature of the streak's last failed call (tool and arguments), for `repeated`.
    last_failure = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.caller}: {self.failures}"


class AgentKey(models.Model):
    """A key an agent presents as ``Authorization: Bearer <key>`` (ADR 0032).

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

    class Meta:
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
    """One tool call or API request, accepted or refused (ADR 0033).

    Never a key, a token, an argument's value or a draft's text: only who, from where,
    what was called on which run, how it ended and how long it took.
    """

    at = models.DateTimeField(db_index=True)
    # The agent key's name, when a key was accepted; "" otherwise.
    key_name = models.CharField(max_length=64, blank=True, default="", db_index=True)
    # The caller as the guards saw it ("key:NAME", "staff:NAME", "anon:ADDRESS:CLIENT");
    # "" when the request was refused before it had one.
    caller = models.CharField(max_length=200, blank=True, default="")
    # The client's name/version as it announced itself (MCP clientInfo, else User-Agent).
    client = models.CharField(max_length=200, blank=True, default="")
    peer = models.CharField(max_length=64, blank=True, default="")
    # The tool called, the API route ("GET /api/runs/<run_id>"), or the HTTP request
    # refused before a tool was known ("POST /mcp").
    tool = models.CharField(max_length=100)
    run_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    # "ok", or the error (spec §7's few words: "run not found", "key required").
    outcome = models.CharField(max_length=64)
    # The HTTP status of the response (a tool's error is still a 200 response).
    status = models.PositiveSmallIntegerField()
    duration_ms = models.FloatField()

    class Meta:
        ordering = ["-at", "-id"]
        # A failure looks for the caller's accepted calls since its streak's last failure
        # (runs_app.failures, ADR 0039).
        indexes = [models.Index(fields=["caller", "at"], name="audit_caller_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.key_name or self.caller or '-'} {self.tool}"


class RateBucket(models.Model):
    """One caller's token bucket (``runs_app.ratelimit``; ADR 0034), when the buckets live
    in the database. Written by one upsert per call, never through the ORM."""

    caller = models.CharField(max_length=200, primary_key=True)
    tokens = models.FloatField()  # calls the caller may make now (fractions refill)
    stamp = models.FloatField()  # when ``tokens`` was last computed (seconds since the epoch)
    allowed = models.BooleanField()  # whether the last call took a token

    def __str__(self) -> str:
        return f"{self.caller}: {self.tokens:.1f}"
