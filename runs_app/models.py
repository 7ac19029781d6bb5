"""Runs and their append-only steps.

A run is pinned to the exact flow content it started on (``flows_app.FlowVersion``),
so it can be continued and rendered on that version after the flow file changes.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.db import models

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
