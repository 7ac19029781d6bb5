"""Admin: agent keys (create: the secret is shown once; revoke) and the audit trail
(read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from access_app.keyring import CACHE_SECONDS
from access_app.models import AgentKey, AuditRecord
from access_app.selectors import key_name_taken
from access_app.services import key_issue, key_limits_save, keys_revoke


class ReadOnly[M: Model](admin.ModelAdmin[M]):
    """An admin of records no one adds, changes or deletes by hand (every app's)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The add view's request carries the new key's secret to the page that shows it once.
_SECRET = "_guidepost_new_key"


LIMIT_FIELDS = ("rate_burst", "rate_per_second", "runs_per_day")


class AgentKeyForm(forms.ModelForm[AgentKey]):
    class Meta:
        model = AgentKey
        fields = ("name", *LIMIT_FIELDS)

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
    action), change a key's own limits. A key is never deleted, nor its name changed: the
    audit trail names it."""

    list_display = ("name", "display", "active", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name",)
    actions = ("revoke",)
    readonly_fields = ("display", "created_at", "revoked_at")
    form = AgentKeyForm

    def get_fields(self, request: HttpRequest, obj: AgentKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", *LIMIT_FIELDS)
        return ("name", *LIMIT_FIELDS, *self.readonly_fields)

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
        else:
            key_limits_save(obj)

    def response_add(
        self, request: HttpRequest, obj: AgentKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(request, _SECRET, None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        response = TemplateResponse(
            request,
            "admin/access_app/agentkey/created.html",
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
class AuditRecordAdmin(ReadOnly[AuditRecord]):
    list_display = (
        "at",
        "key_name",
        "client",
        "peer",
        "tool",
        "run_id",
        "outcome",
        "status",
        "count",
        "duration_ms",
    )
    list_filter = ("key_name", "tool", "outcome", "status")
    search_fields = ("run_id", "key_name", "peer")
    date_hierarchy = "at"
    show_full_result_count = False
