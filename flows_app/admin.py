"""Read-only list of submitted drafts (review and approval come with their own workflow)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from flows_app.models import Draft


@admin.register(Draft)
class DraftAdmin(admin.ModelAdmin[Draft]):
    list_display = ("public_id", "flow_id", "ok", "status", "submitted_by", "created_at")
    list_filter = ("status", "ok")
    search_fields = ("public_id", "flow_id")
    readonly_fields = (
        "public_id",
        "flow_id",
        "yaml",
        "content_hash",
        "ok",
        "findings",
        "status",
        "submitted_by",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
