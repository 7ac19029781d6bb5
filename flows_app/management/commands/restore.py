"""``manage.py restore FLOW_ID VERSION --reason TEXT`` (``guidepost-mcp restore``): make an
earlier revision of a flow live again, as a draft of its text for the same review."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal
from flows_app.commands import (
    acting_as,
    add_as_option,
    add_flows_option,
    check_flows_option,
    refused,
)
from flows_app.models import Draft
from flows_app.selectors import flow_version_find
from flows_app.services import draft_restore


class Command(BaseCommand):
    help = (
        "Make an earlier revision of FLOW_ID live again: store its text as a draft, with the "
        "reason, for the same review and approval as any change (guidepost-mcp approve)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("flow_id", metavar="FLOW_ID", help="the flow")
        parser.add_argument(
            "version",
            metavar="VERSION",
            help="the revision to restore: the first digits of its content hash (at least 6, "
            "as the history shows them), or the flow's own version value when only one "
            "revision has it",
        )
        parser.add_argument("--reason", required=True, help="why it should be live again")
        add_flows_option(parser)
        add_as_option(parser, "restores it")

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        who = acting_as(options["acting_as"])
        try:
            version = flow_version_find(options["flow_id"], options["version"])
            submitted = draft_restore(
                flow_id=options["flow_id"],
                version=version,
                reason=options["reason"],
                submitted_via=Draft.Via.CLI,
                submitted_by=who,
            )
        except Refusal as refusal:
            candidates = (
                f" (revisions: {', '.join(refusal.candidates)})" if refusal.candidates else ""
            )
            error = refused(refusal)
            raise CommandError(f"{error}{candidates}") from None
        draft = submitted.draft
        self.stdout.write(
            f"stored {draft.public_id}: {draft.flow_id} back to {version.named}, for review "
            f"(reason: {draft.restore_reason}); approve it with: guidepost-mcp approve "
            f"{draft.public_id}"
        )
