"""Drafts: flows submitted for human review. Nothing here reaches agents until approved."""

from __future__ import annotations

import secrets

from django.db import models


def new_draft_id() -> str:
    return "d_" + secrets.token_urlsafe(12)


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
