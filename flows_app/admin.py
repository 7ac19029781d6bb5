"""The admin of flows: the drafts list (its review is ``admin_review``), every recorded
revision of every flow, and the live flows with their history. Content is read-only
everywhere; every page reads through ``flows_app.selectors``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, F, IntegerField, QuerySet, When
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from access_app.admin import ReadOnly
from flowcore.common.errors import Refusal
from flowcore.common.limits import USAGE_DAYS
from flowcore.flow.drafts import lint_status, source_lines
from flows_app import selectors
from flows_app.admin_review import APPROVE_PERMISSION, DraftReview
from flows_app.catalog import current_catalog
from flows_app.models import Draft, FlowVersion, LiveFlow
from flows_app.runs_port import flow_runs
from flows_app.services import draft_restore

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
    """The flows agents are served now (the catalog, not these rows): one page listing it."""

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
                "history": reverse("admin:flows_app_liveflow_history", args=[flow.id]),
                "revisions": reverse("admin:flows_app_flowversion_changelist")
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

    # --- a flow's history: roll back, compare ----------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<str:flow_id>/history/",
                self.admin_site.admin_view(self.flow_history_view),
                name="flows_app_liveflow_history",
            ),
            path(
                "<str:flow_id>/diff/",
                self.admin_site.admin_view(self.diff_view),
                name="flows_app_liveflow_diff",
            ),
            path(
                "<str:flow_id>/restore/",
                self.admin_site.admin_view(self.restore_view),
                name="flows_app_liveflow_restore",
            ),
            *super().get_urls(),
        ]

    def _history_rows(self, flow_id: str) -> list[selectors.HistoryRow]:
        rows = selectors.flow_history(flow_id)
        if not rows:
            raise Http404(f"no revision of {flow_id} is recorded")
        return rows

    def flow_history_view(self, request: HttpRequest, flow_id: str) -> HttpResponse:
        """Every recorded revision of the flow: its approvals, its runs by state; "make this
        version live again", compare any two, and the move of older runs."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        rows = self._history_rows(flow_id)
        runs = flow_runs().runs_by_version(flow_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{flow_id}: history",
            "subtitle": None,
            "flow_id": flow_id,
            "rows": [
                {
                    "row": row,
                    "runs": [
                        (state, runs.get(row.version.content_hash, {}).get(state, 0))
                        for state in RUN_STATES
                    ],
                }
                for row in rows
            ],
            "can_restore": request.user.has_perm(APPROVE_PERMISSION),
            "older_open": sum(
                n
                for content_hash, states in runs.items()
                if not any(r.live and r.version.content_hash == content_hash for r in rows)
                for state, n in states.items()
                if state in ("active", "stalled")
            ),
        }
        return TemplateResponse(request, "admin/flows_app/liveflow/history.html", context)

    def diff_view(self, request: HttpRequest, flow_id: str) -> HttpResponse:
        """What changes for agents, and the line diff, between any two revisions."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        rows = self._history_rows(flow_id)
        by_pk = {str(r.version.pk): r.version for r in rows}
        old, new = by_pk.get(request.GET.get("a", "")), by_pk.get(request.GET.get("b", ""))
        if old is None or new is None:
            raise Http404("choose two revisions of this flow to compare")
        old = FlowVersion.objects.get(pk=old.pk)  # with its text
        new = FlowVersion.objects.get(pk=new.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{flow_id}: {old.revision} → {new.revision}",
            "subtitle": None,
            "flow_id": flow_id,
            "diff": selectors.flow_versions_diff(old, new),
        }
        return TemplateResponse(request, "admin/flows_app/liveflow/diff.html", context)

    def restore_view(self, request: HttpRequest, flow_id: str) -> HttpResponse:
        """POST: "make this version live again": a draft of its text, with the reason, taken
        to its review page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not request.user.has_perm(APPROVE_PERMISSION):
            raise PermissionDenied
        rows = self._history_rows(flow_id)
        chosen = next(
            (r.version for r in rows if str(r.version.pk) == request.POST.get("version")), None
        )
        history = HttpResponseRedirect(reverse("admin:flows_app_liveflow_history", args=[flow_id]))
        if chosen is None:
            self.message_user(request, "Choose a revision of this flow.", messages.ERROR)
            return history
        try:
            submitted = draft_restore(
                flow_id=flow_id,
                version=FlowVersion.objects.get(pk=chosen.pk),
                reason=request.POST.get("reason", ""),
                submitted_via=Draft.Via.USER,
                submitted_by=request.user.get_username(),
            )
        except Refusal as refusal:
            self.message_user(
                request, f"{refusal.error}: {refusal.reason}. {refusal.next}", messages.ERROR
            )
            return history
        draft = submitted.draft
        self.message_user(
            request,
            f"Stored {draft.public_id}: {flow_id} back to {chosen.named}, for review. "
            "Approving it makes it live again.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:flows_app_draft_change", args=[draft.pk]))


# The states a history counts runs in, in this order.
RUN_STATES = ("active", "stalled", "completed", "closed")
