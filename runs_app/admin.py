"""Read-only admin for runs: find a run by id, ref or flow, and read its steps."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs_app.models import Run, Step


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StepInline(admin.TabularInline[Step, Run]):
    model = Step
    fields = ("seq", "tool", "status", "node_before", "node_after", "input", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("seq",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "flow_id", "state", "node", "outcome", "ref", "updated_at")
    list_filter = ("state", "flow_id")
    search_fields = ("public_id", "ref", "flow_id")
    list_select_related = ("flow_version",)
    show_full_result_count = False
    inlines = (StepInline,)
