from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from flowcore.checks.flow_tests import summary_verdict
from flowcore.common.errors import NotConfirmed, Refusal
from flows_app.commands import (
    acting_as,
    add_as_option,
    add_flows_option,
    check_flows_option,
    refused,
)
from flows_app.selectors import draft_to_approve
from flows_app.services import draft_approve


class Command(BaseCommand):
    help = "Approve a pending draft: publish it to the flows directory for every worker."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "ref",
            metavar="DRAFT_ID|FLOW_ID",
            help="the draft you reviewed: its id, or its flow's id with --revision",
        )
        parser.add_argument(
            "--revision",
            metavar="REV",
            help="with a flow id: the revision the draft's page shows (at least 6 digits); "
            "refused when the flow's pending draft is another one",
        )
        parser.add_argument(
            "--break-tests",
            action="store_true",
            help="approve even though the draft fails scenarios or breaks guarantees of the "
            "live tests (tests/<flow_id>.yaml); without it such a draft is refused and what "
            "it breaks is printed. Recorded with the approval.",
        )
        add_flows_option(parser)
        add_as_option(parser, "approves")

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        approver = acting_as(options["acting_as"])
        try:
            draft = draft_to_approve(options["ref"], revision=options["revision"])
            version = draft_approve(
                draft=draft, approved_by=approver, confirm_broken_tests=options["break_tests"]
            )
        except NotConfirmed as refusal:
            for line in refusal.details:
                self.stderr.write(line)
            raise refused(refusal) from None
        except Refusal as refusal:
            raise refused(refusal) from None
        self.stdout.write(
            f"approved {draft.public_id}: {draft.flow_id} is live, {version.named} "
            f"(approved by {approver})"
        )
        recorded = draft.tests_at_approval or {}
        if draft.broken_tests_confirmed:
            verdict = summary_verdict(recorded["summary"], subject="the draft")
            self.stdout.write(
                f"{verdict} (confirmed with --break-tests, recorded); "
                f"{recorded['tests_file']} stays as it is: update it in a later change"
            )
