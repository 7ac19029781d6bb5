"""The draft review, a custom app inside the admin: submitting a draft, the draft page
(what changes for agents, the diagram, the live tests checked on it), approving and
discarding, one draft or a selection.

Every page reads through ``flows_app.selectors`` and every decision goes through
``flows_app.services`` (``draft_approve``, ``draft_discard``); nothing here changes a
draft by saving a model. Approve and discard are POST-only, CSRF-checked, and gated by
the ``flows_app.approve_draft`` permission (the "Support lead" group), also for a forged
request. ``admin.DraftAdmin`` (the drafts list) is this plus its columns.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from flowcore.checks.flow_tests import FlowTestReport, summary_status, summary_verdict
from flowcore.checks.guarantees import guarantee_lines
from flowcore.common.errors import Refusal
from flowcore.drawing.diagram import MARK_LABELS, diagram_css, legend_svg, render_svg
from flowcore.flow.drafts import lint_status
from flowcore.flow.findings import Finding, counted, format_finding
from flowcore.flow.model import version_and_revision
from flows_app import selectors
from flows_app.models import Draft
from flows_app.services import DRAFT_BREAKS_TESTS, draft_approve, draft_create, draft_discard

APPROVE_PERMISSION = "flows_app.approve_draft"
# The draft page's checkbox: approving a draft that breaks the live tests.
CONFIRM_FIELD = "confirm_broken_tests"
CONFIRM_LABEL = "I have read what this breaks and approve anyway"


def _who(request: HttpRequest) -> str:
    return request.user.get_username()


class DraftSubmitForm(forms.Form):
    yaml = forms.CharField(
        label="Flow YAML",
        widget=forms.Textarea(attrs={"rows": 30, "cols": 100, "spellcheck": "false"}),
        help_text="The whole flow, as in a flow file. It is stored for review, never published.",
    )


class DraftReview(admin.ModelAdmin[Draft]):
    """The review's views and actions, for ``admin.DraftAdmin``."""

    # --- submitting (as a person) ------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Submitting is harmless (a draft never goes live by itself); leads may also write one.
        return request.user.has_perm("flows_app.add_draft") or self.has_approve_permission(request)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = DraftSubmitForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                submitted = draft_create(
                    text=form.cleaned_data["yaml"],
                    submitted_via=Draft.Via.USER,
                    submitted_by=_who(request),
                )
            except Refusal as refusal:
                form.add_error("yaml", f"Refused: {refusal.reason}")
            else:
                draft = submitted.draft
                if submitted.repeated:
                    text = f"Nothing new: this text already waits for review as {draft.public_id}."
                else:
                    text = f"Stored {draft.public_id} ({draft.flow_id}) for review."
                self.message_user(request, text, messages.SUCCESS)
                return self._back_to(draft)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Submit a draft",
            "subtitle": None,
            "form": form,
        }
        return TemplateResponse(request, "admin/flows_app/draft/submit.html", context)

    # --- decisions ------------------------------------------------------------------------

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    @admin.action(description="Approve the selected pending drafts", permissions=["approve"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[Draft]) -> None:
        for draft in self._pending_only(request, queryset):
            self._approve(request, draft)

    @admin.action(description="Discard the selected pending drafts…", permissions=["approve"])
    def discard_selected(
        self, request: HttpRequest, queryset: QuerySet[Draft]
    ) -> TemplateResponse | None:
        if request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Discard drafts",
                "action": "discard_selected",
                "chosen": queryset.filter(status=Draft.Status.PENDING),
                "left": queryset.exclude(status=Draft.Status.PENDING),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/flows_app/draft/discard_selected.html", context)
        reason = request.POST.get("reason", "")
        for draft in self._pending_only(request, queryset):
            self._discard(request, draft, reason)
        return None

    def _pending_only(self, request: HttpRequest, queryset: QuerySet[Draft]) -> list[Draft]:
        drafts = list(queryset)
        for draft in drafts:
            if not draft.pending:
                self.message_user(
                    request,
                    f"Left {draft.public_id} ({draft.flow_id}) as it is: it is {draft.status}, "
                    "not pending.",
                    messages.WARNING,
                )
        return [draft for draft in drafts if draft.pending]

    def _approve(self, request: HttpRequest, draft: Draft, *, confirmed: bool = False) -> bool:
        """Approve one draft and say how it went. Only the draft's page can confirm that a
        draft breaking the live tests is approved anyway (``confirmed``); elsewhere (the
        list action) such a draft is refused with a pointer to its page."""
        try:
            version = draft_approve(
                draft=draft, approved_by=_who(request), confirm_broken_tests=confirmed
            )
        except Refusal as refusal:
            refused = f"Not approved {draft.public_id} ({draft.flow_id}): {refusal.reason}."
            if refusal.error == DRAFT_BREAKS_TESTS:
                url = reverse("admin:flows_app_draft_change", args=[draft.pk]) + "#tests"
                refused = format_html(
                    '{} <a href="{}">Read what it breaks on its page</a> and approve it there, '
                    "ticking “{}”.",
                    refused,
                    url,
                    CONFIRM_LABEL,
                )
            self.message_user(request, refused, messages.ERROR)
            return False
        broke = (
            " It breaks the live tests, as you confirmed; the tests file stays as it is."
            if draft.broken_tests_confirmed
            else ""
        )
        self.message_user(
            request,
            f"Approved {draft.public_id}: {draft.flow_id} is live, {version.named} "
            f"(agents see it within seconds).{broke}",
            messages.SUCCESS,
        )
        return True

    def _discard(self, request: HttpRequest, draft: Draft, reason: str) -> bool:
        try:
            draft_discard(draft=draft, discarded_by=_who(request), reason=reason)
        except Refusal as refusal:
            self.message_user(
                request,
                f"Not discarded {draft.public_id} ({draft.flow_id}): {refusal.reason}",
                messages.ERROR,
            )
            return False
        self.message_user(
            request, f"Discarded {draft.public_id} ({draft.flow_id}).", messages.SUCCESS
        )
        return True

    # --- the draft page ---------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/approve/",
                self.admin_site.admin_view(self.approve_view),
                name="flows_app_draft_approve",
            ),
            path(
                "<path:object_id>/discard/",
                self.admin_site.admin_view(self.discard_view),
                name="flows_app_draft_discard",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        draft = self.get_object(request, unquote(object_id))
        if draft is None:
            raise Http404(f"no draft with id {object_id}")
        if not self.has_view_permission(request, draft):
            raise PermissionDenied
        review = selectors.draft_review(draft)
        # The diagram escapes every text it draws; its CSS is our constant.
        diagram = (
            render_svg(review.flow, node_notes=review.marks, node_marks=review.marks)
            if review.flow
            else ""
        )
        tests = review.tests
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Draft of {draft.flow_id}",
            "subtitle": draft.title,
            "review": review,
            "compared": _compared(review),
            "draft": draft,
            "submitted_lint": lint_status(draft.findings),
            "lint_now": lint_status(review.findings),
            "lint_errors": counted(review.errors, "lint error"),
            "can_decide": draft.pending and self.has_approve_permission(request),
            "superseded": draft.superseded.all(),
            "diagram": mark_safe(diagram),
            "diagram_css": mark_safe(diagram_css()),
            "legend": mark_safe(legend_svg(states=(), marks=MARK_LABELS, taken=False)),
            "tests": _tests_shown(tests) if tests else None,
            "tests_file": review.verdict.tests_file,
            "has_tests_file": review.verdict.has_tests_file,
            "tests_broken": tests is not None and not tests.ok,
            "tests_recorded": _tests_recorded(draft),
            "confirm_field": CONFIRM_FIELD,
            "confirm_label": CONFIRM_LABEL,
        }
        return TemplateResponse(request, "admin/flows_app/draft/review.html", context)

    def _decision_target(self, request: HttpRequest, object_id: str) -> Draft:
        if not self.has_approve_permission(request):
            raise PermissionDenied
        draft = self.get_object(request, unquote(object_id))
        if draft is None:
            raise PermissionDenied
        return draft

    def _back_to(self, draft: Draft) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:flows_app_draft_change", args=[draft.pk]))

    def approve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        draft = self._decision_target(request, object_id)
        self._approve(request, draft, confirmed=request.POST.get(CONFIRM_FIELD) == "yes")
        return self._back_to(draft)

    def discard_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        draft = self._decision_target(request, object_id)
        self._discard(request, draft, request.POST.get("reason", ""))
        return self._back_to(draft)


def _tests_shown(report: FlowTestReport) -> dict[str, Any]:
    """The live tests on a draft, as the page shows them: a verdict, then each failing
    scenario (the call that failed, expected and got), each broken guarantee (its
    counterexample path), and the tests file's own mistakes."""
    summary = report.summary()

    def problem(found: Finding, prefix: str) -> str:
        where = found["where"].removeprefix(prefix).lstrip("/")
        return f"{where}: {found['message']}" if where else found["message"]

    scenarios = []
    for result in report.failed_scenarios:
        prefix = f"tests/{report.flow_id}/{result.scenario.name}"
        failure = result.failure
        scenarios.append(
            {
                "name": result.scenario.name,
                "line": result.scenario.line,
                "where": failure.where if failure else None,
                "call": failure.call.text() if failure else None,
                "mismatches": [m.text() for m in failure.mismatches] if failure else [],
                "problems": [problem(f, prefix) for f in result.problems],
            }
        )
    guarantees = []
    for checked in report.broken_guarantees:
        prefix = f"tests/{report.flow_id}/{checked.guarantee.name}"
        guarantees.append(
            {
                "name": checked.guarantee.name,
                "line": checked.guarantee.line,
                "statement": checked.guarantee.statement(),
                "counterexample": "\n".join(guarantee_lines(checked)),
                "problems": [problem(f, prefix) for f in checked.problems],
            }
        )
    return {
        "ok": report.ok,
        "status": summary_status(summary),
        "verdict": summary_verdict(summary, subject="this draft"),
        "scenarios": scenarios,
        "guarantees": guarantees,
        "findings": [format_finding(f) for f in report.findings],
    }


def _tests_recorded(draft: Draft) -> dict[str, Any] | None:
    """What approval recorded of the live tests (None: not approved, or approved before
    approvals checked them)."""
    recorded = draft.tests_at_approval
    if draft.status != Draft.Status.APPROVED or not isinstance(recorded, dict):
        return None
    summary = recorded.get("summary")
    return {
        "file": recorded.get("tests_file", ""),
        "status": summary_status(summary),
        "verdict": summary_verdict(summary, subject="the draft") if summary else None,
        "report": "\n".join(str(line) for line in recorded.get("report", [])),
        "confirmed": draft.broken_tests_confirmed,
    }


def _compared(review: selectors.DraftReview) -> dict[str, str]:
    """What the draft page compares the draft with, in words: the live flow now (pending
    and superseded drafts), or the revision live at the decision. ``baseline``
    names it ("version 2024.2, revision b6ace70912ba"), ``facts`` introduces it in the
    facts, ``the_baseline`` in a sentence; ``verb`` is the tense of "what changes"."""
    draft = review.draft
    revision = review.live_revision
    if not review.at_decision:
        live = review.live
        return {
            "baseline": version_and_revision(live.version, live.content_hash) if live else "",
            "baseline_url": "",
            "facts": "live now:",
            "the_baseline": "the live flow",
            "verb": "changes",
        }
    approved = draft.status == Draft.Status.APPROVED
    return {
        "baseline": revision.named if revision is not None else "",
        "baseline_url": reverse("admin:flows_app_flowversion_change", args=[revision.pk])
        if revision is not None
        else "",
        "facts": "it replaced" if approved else "live when it was discarded:",
        "the_baseline": "the revision it replaced"
        if approved
        else "the revision live when it was discarded",
        "verb": "changed" if approved else "would have changed",
    }
