"""Flow versions (what runs are pinned to) and drafts (flows waiting for review).

Nothing in a draft reaches agents until a person approves it.
"""

from __future__ import annotations

import secrets

from django.db import models


def new_draft_id() -> str:
    return "d_" + secrets.token_urlsafe(12)


class FlowVersion(models.Model):
    """One exact flow text, stored once by its SHA-256; runs are pinned to it."""

    content_hash = models.CharField(max_length=64, unique=True)
    flow_id = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=500)
    version = models.CharField(max_length=100, blank=True, default="")
    source = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        # Created by runs_app before flow versions moved here; the table kept its name.
        db_table = "runs_app_flowversion"

    def __str__(self) -> str:
        return f"{self.flow_id}@{self.content_hash[:12]}"


class Draft(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DISCARDED = "discarded"

    public_id = models.CharField(max_length=32, unique=True, default=new_draft_id, editable=False)
    flow_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    yaml = models.TextField()
    content_hash = models.CharField(max_length=64)
    ok = models.BooleanField()
    findings = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    submitted_by = models.CharField(max_length=200)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.flow_id or 'no id'})"
