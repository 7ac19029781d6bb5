"""Admin: runs and their steps (read-only; a run can be saved as a scenario, and ended
runs erased by people with the "erase runs" permission: the "Support lead" group)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from access_app.admin import ReadOnly
from access_app.guards import SEE_PERSONAL_VALUES
from flowcore.common.errors import Refusal
from flowcore.common.limits import MAX_ERASE_REASON_LENGTH
from flows_app.admin_review import APPROVE_PERMISSION
from runs_app.capture import run_capture
from runs_app.erasure import ENDED, run_erase
from runs_app.models import Run, Step
from runs_app.moves import runs_move


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

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A step's input holds the values given: only for people who may see personal ones.
        fields = super().get_fields(request, obj)
        if request.user.has_perm(SEE_PERSONAL_VALUES):
            return fields
        return [f for f in fields if f != "input"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.get_fields(request, obj)


@admin.register(Run)
class RunAdmin(ReadOnly[Run]):
    list_display = ("public_id", "flow_id", "state", "node", "outcome", "ref", "updated_at")
    list_filter = ("state", "flow_id")
    search_fields = ("public_id", "ref", "flow_id")
    list_select_related = ("flow_version",)
    show_full_result_count = False
    inlines = (StepInline,)
    actions = ("save_as_scenario", "erase_selected")
    # Values are shown on the run page, masked as the person may see them (ADR 0087).
    exclude = ("packed_state",)

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
            note = (
                " (note: it ran on an older revision of the flow, and replays the same on the "
                "live one)"
                if captured.stale
                else ""
            )
            self.message_user(
                request,
                f"{run.public_id}: saved as scenario {captured.name!r} in {captured.path}{note}",
                messages.SUCCESS,
            )

    # --- moving runs onto the live version (spec §4, ADR 0083) ----------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "migrate/<str:flow_id>/",
                self.admin_site.admin_view(self.migrate_view),
                name="runs_app_run_migrate",
            ),
            *super().get_urls(),
        ]

    def migrate_view(self, request: HttpRequest, flow_id: str) -> HttpResponse:
        """GET: the dry run, one line per run; POST: move the runs ticked (those the dry run
        said move), each decided again under its lock. Support lead only (the permission
        that approves drafts); every move is recorded in the run's chain and audited."""
        if not request.user.has_perm(APPROVE_PERMISSION):
            raise PermissionDenied
        by = "staff:" + request.user.get_username()
        done = None
        try:
            if request.method == "POST":
                chosen = request.POST.getlist("run")
                if not chosen:
                    self.message_user(request, "Tick the runs to move.", messages.WARNING)
                else:
                    done = runs_move(flow_id=flow_id, by=by, run_ids=chosen)
                    level = messages.SUCCESS if done.moving else messages.WARNING
                    self.message_user(request, done.summary(), level)
            report = runs_move(flow_id=flow_id, by=by, dry_run=True)
        except Refusal as refusal:
            self.message_user(request, f"{refusal.error}: {refusal.reason}", messages.ERROR)
            report = None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Move runs of {flow_id} to the live version",
            "subtitle": None,
            "flow_id": flow_id,
            "report": report,
            "done": done,
        }
        return TemplateResponse(request, "admin/runs_app/run/migrate.html", context)

    def has_erase_permission(self, request: HttpRequest) -> bool:
        """Erasing removes what people said in a run for good: a custom permission, as
        approving a draft is (ADR 0086)."""
        return request.user.has_perm("runs_app.erase_run")

    @admin.action(description="Erase the values of the selected ended runs…", permissions=["erase"])
    def erase_selected(
        self, request: HttpRequest, queryset: QuerySet[Run]
    ) -> TemplateResponse | None:
        ended = queryset.filter(state__in=ENDED, erased_at__isnull=True)
        if request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Erase runs",
                "action": "erase_selected",
                "chosen": ended,
                "left": queryset.exclude(pk__in=ended.values("pk")),
                "max_reason": MAX_ERASE_REASON_LENGTH,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/runs_app/run/erase_selected.html", context)
        reason = request.POST.get("reason", "")
        keep_ref = request.POST.get("keep_ref") == "yes"
        by = f"staff:{request.user.get_username()}"
        for run in queryset.order_by("started_at"):
            try:
                erased = run_erase(run_id=run.public_id, reason=reason, by=by, keep_ref=keep_ref)
            except Refusal as refusal:
                self.message_user(
                    request, f"Not erased {run.public_id}: {refusal.reason}.", messages.ERROR
                )
                continue
            self.message_user(
                request,
                f"Erased {run.public_id}." if erased else f"Left {run.public_id}: erased already.",
                messages.SUCCESS if erased else messages.WARNING,
            )
        return None
