"""Admin: runs and their steps (read-only; a run can be saved as a scenario)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from access_app.admin import ReadOnly
from flows_app.admin_review import APPROVE_PERMISSION
from flows_app.domain.errors import Refusal
from runs_app.capture import run_capture
from runs_app.models import Run, Step
from runs_app.services import runs_move


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
class RunAdmin(ReadOnly[Run]):
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
