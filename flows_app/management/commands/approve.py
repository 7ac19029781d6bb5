from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from flows_app.domain.errors import Refusal
from flows_app.management.commands._review import (
    acting_as,
    add_as_option,
    add_flows_option,
    check_flows_option,
    refused,
)
from flows_app.selectors import draft_find
from flows_app.services import draft_approve


class Command(BaseCommand):
    help = "Approve a pending draft: publish it to the flows directory for every worker."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ref", metavar="FLOW_ID|DRAFT_ID", help="a draft id, or a flow id")
        add_flows_option(parser)
        add_as_option(parser, "approves")

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        approver = acting_as(options["acting_as"])
        try:
            draft = draft_find(options["ref"])
            version = draft_approve(draft=draft, approved_by=approver)
        except Refusal as refusal:
            raise refused(refusal) from None
        self.stdout.write(
            f"approved {draft.public_id}: {draft.flow_id} is live as version "
            f"{version.content_hash[:12]} (approved by {approver})"
        )
