"""Admin: runs and their steps (read-only; a run can be saved as a scenario), agent keys
(create, revoke), the audit trail (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from flows_app.domain.errors import Refusal
from runs_app.keyring import CACHE_SECONDS
from runs_app.models import AgentKey, AuditRecord, Run, Step
from runs_app.selectors import key_name_taken
from runs_app.services import key_issue, keys_revoke, run_capture


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StepInline(admin.TabularInline[Step, Run]):
    model = Step
    fields = (
        "seq",
        "tool",
        "status",
        "node_before",
        "node_after",
        "input",
        "caller",
        "created_at",
    )
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
    actions = ("save_as_scenario",)

    def has_capture_permission(self, request: HttpRequest) -> bool:
        """Saving a run as a scenario writes into the flows directory: a custom permission."""
        return request.user.has_perm("runs_app.capture_run")

    @admin.action(description="Save as a scenario", permissions=["capture"])
    def save_as_scenario(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run in queryset.order_by("started_at"):
            try:
                captured = run_capture(run_id=run.public_id)
            except Refusal as refusal:
                self.message_user(
                    request, f"{run.public_id}: {refusal.error}: {refusal.reason}", messages.ERROR
                )
                continue
            notes = []
            if captured.stale:
                notes.append("it ran on an older version of the flow")
            if captured.replay.failure is not None:
                notes.append(f"on the live flow it fails at {captured.replay.failure.where}")
            note = f" (note: {'; '.join(notes)})" if notes else ""
            self.message_user(
                request,
                f"{run.public_id}: saved as scenario {captured.name!r} in {captured.path}{note}",
                messages.WARNING if notes else messages.SUCCESS,
            )


# The add view's request carries the new key's secret to the page that shows it once.
_SECRET = "_guidepost_new_key"


class AgentKeyForm(forms.ModelForm[AgentKey]):
    class Meta:
        model = AgentKey
        fields = ("name",)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if self.instance.pk is None and key_name_taken(name):
            raise forms.ValidationError(
                f"{name} already has an active key: revoke it first, or choose another name."
            )
        return name


@admin.register(AgentKey)
class AgentKeyAdmin(admin.ModelAdmin[AgentKey]):
    """Create a key (its secret is shown once, on the page after "Save"), revoke keys (an
    action). A key is never deleted or edited: the audit trail names it."""

    list_display = ("name", "display", "active", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name",)
    actions = ("revoke",)
    readonly_fields = ("display", "created_at", "revoked_at")
    form = AgentKeyForm

    def get_fields(self, request: HttpRequest, obj: AgentKey | None = None) -> tuple[str, ...]:
        return ("name",) if obj is None else ("name", *self.readonly_fields)

    def get_readonly_fields(
        self, request: HttpRequest, obj: AgentKey | None = None
    ) -> tuple[str, ...]:
        return self.readonly_fields if obj is None else ("name", *self.readonly_fields)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(boolean=True)
    def active(self, key: AgentKey) -> bool:
        return key.active

    def save_model(self, request: HttpRequest, obj: AgentKey, form: Any, change: bool) -> None:
        if not change:
            # The form checked the name; only a race with another admin can still fail here.
            setattr(request, _SECRET, key_issue(obj))

    def response_add(
        self, request: HttpRequest, obj: AgentKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(request, _SECRET, None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        response = TemplateResponse(
            request,
            "admin/runs_app/agentkey/created.html",
            {**self.admin_site.each_context(request), "key": obj, "secret": secret},
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentKey]) -> None:
        count = keys_revoke(list(queryset))
        self.message_user(
            request,
            f"{count} key(s) revoked; running servers refuse them within {CACHE_SECONDS:g} s.",
            messages.SUCCESS,
        )


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "at",
        "key_name",
        "client",
        "peer",
        "tool",
        "run_id",
        "outcome",
        "status",
        "duration_ms",
    )
    list_filter = ("key_name", "tool", "outcome", "status")
    search_fields = ("run_id", "key_name", "peer")
    date_hierarchy = "at"
    show_full_result_count = False
