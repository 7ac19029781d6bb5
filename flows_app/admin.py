"""The admin of flows: the drafts list (its review is ``admin_review``), every recorded
revision of every flow, and the live flows with their history. Content is read-only
everywhere; every page reads through ``flows_app.selectors``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, F, IntegerField, QuerySet, When
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from access_app.admin import ReadOnly
from flows_app import selectors
from flows_app.admin_review import DraftReview
from flows_app.catalog import current_catalog
from flows_app.domain.drafts import lint_status, source_lines
from flows_app.domain.limits import USAGE_DAYS
from flows_app.models import Draft, FlowVersion, LiveFlow
from flows_app.runs_port import flow_runs

# The window of "runs in the last 30 days" on the live flows page.
RECENT_RUNS_DAYS = USAGE_DAYS  # the same window as the flow pages


@admin.register(Draft)
class DraftAdmin(DraftReview, ReadOnly[Draft]):
    """The drafts list; the review itself (submit, the draft page, approve, discard) is
    ``admin_review.DraftReview``."""

    list_display = ("flow_link", "title", "kind", "lint", "tests", "submitter", "age", "status")
    list_display_links = None
    list_filter = ("status", "flow_id")
    search_fields = ("public_id", "flow_id", "title")
    actions = ("approve_selected", "discard_selected")
    show_full_result_count = False
    list_per_page = 50

    # --- the list -------------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Draft]:
        pending_first = Case(
            When(status=Draft.Status.PENDING, then=0), default=1, output_field=IntegerField()
        )
        # Annotated before ordering: super() would order by the annotation before it exists.
        # ``live_hash``: what a decided draft's "new or change" compares with, in this query.
        drafts = Draft.objects.annotate(
            pending_first=pending_first, live_hash=F("live_at_decision__content_hash")
        )
        return drafts.order_by(*self.get_ordering(request))

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("pending_first", "-created_at", "-pk")

    @admin.display(description="flow", ordering="flow_id")
    def flow_link(self, draft: Draft) -> str:
        url = reverse("admin:flows_app_draft_change", args=[draft.pk])
        return format_html('<a href="{}">{}</a>', url, draft.flow_id)

    @admin.display(description="new or change")
    def kind(self, draft: Draft) -> str:
        return selectors.draft_kind(draft)

    @admin.display(description="lint at submission")
    def lint(self, draft: Draft) -> str:
        return lint_status(draft.findings)

    @admin.display(description="tests")
    def tests(self, draft: Draft) -> str:
        # Pending rows: the live tests now (cached by what decides them; one small file
        # read per pending row, at most one pending draft per flow); approved rows: what
        # approval recorded; other rows read nothing.
        return selectors.draft_tests_status(draft)

    @admin.display(description="submitted by", ordering="submitted_by")
    def submitter(self, draft: Draft) -> str:
        return draft.submitter

    @admin.display(description="age", ordering="created_at")
    def age(self, draft: Draft) -> str:
        return timesince(draft.created_at, timezone.now(), depth=1)


@admin.register(FlowVersion)
class FlowVersionAdmin(ReadOnly[FlowVersion]):
    """Every recorded revision of every flow: what runs were pinned to and what was approved."""

    list_display = (
        "version_link",
        "flow_id",
        "version",
        "approved_by",
        "approved_at",
        "from_draft",
        "runs_served",
        "created_at",
    )
    list_display_links = None
    list_filter = ("flow_id",)
    search_fields = ("flow_id", "content_hash", "title")
    list_select_related = ("draft",)
    show_full_result_count = False
    ordering = ("flow_id", "-created_at", "-pk")

    def get_queryset(self, request: HttpRequest) -> QuerySet[FlowVersion]:
        return super().get_queryset(request).annotate(runs_served=Count("runs"))

    @admin.display(description="revision")
    def version_link(self, version: FlowVersion) -> str:
        url = reverse("admin:flows_app_flowversion_change", args=[version.pk])
        return format_html('<a href="{}"><code>{}</code></a>', url, version.revision)

    @admin.display(description="from draft")
    def from_draft(self, version: FlowVersion) -> str:
        if version.draft is None:
            return "—"
        url = reverse("admin:flows_app_draft_change", args=[version.draft.pk])
        return format_html('<a href="{}">{}</a>', url, version.draft.public_id)

    @admin.display(description="runs served", ordering="runs_served")
    def runs_served(self, version: FlowVersion) -> int:
        return int(getattr(version, "runs_served", 0))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        version = self.get_object(request, unquote(object_id))
        if version is None:
            raise Http404(f"no revision with id {object_id}")
        if not self.has_view_permission(request, version):
            raise PermissionDenied
        diff = selectors.flow_version_diff(version)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{version.flow_id} revision {version.revision}",
            "subtitle": version.title,
            "version": version,
            "diff": diff,
            "runs_served": self.runs_served(version),
            "lines": source_lines(version.source, [])[1],
            "is_live": selectors.flow_version_is_live(version),
        }
        return TemplateResponse(request, "admin/flows_app/flowversion/version.html", context)


@admin.register(LiveFlow)
class LiveFlowAdmin(ReadOnly[LiveFlow]):
    """The flows agents are served now (files, not rows): one page listing the catalog."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("flows_app.view_flowversion")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        since = timezone.now() - timedelta(days=RECENT_RUNS_DAYS)
        counts = {
            flow_id: started
            for flow_id, (started, _) in flow_runs().runs_by_flow(since=since).items()
        }
        catalog = current_catalog()
        recorded = selectors.flow_versions_by_hash(f.content_hash for f in catalog.flows.values())
        rows = [
            {
                "flow": flow,
                "category": catalog.categories[flow.category].title
                if flow.category in catalog.categories
                else flow.category,
                "nodes": len(flow.nodes),
                "runs": counts.get(flow.id, 0),
                "recorded": recorded.get(flow.content_hash),
                "history": reverse("admin:flows_app_flowversion_changelist")
                + f"?flow_id__exact={flow.id}",
            }
            for flow in sorted(catalog.flows.values(), key=lambda f: f.id)
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Live flows",
            "subtitle": None,
            "rows": rows,
            "days": RECENT_RUNS_DAYS,
            "directory": catalog.directory,
        }
        return TemplateResponse(request, "admin/flows_app/liveflow/live.html", context)
