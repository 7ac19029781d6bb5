from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone
from django.utils.timesince import timesince

from flowcore.flow.drafts import lint_status
from flowcore.flow.findings import counted
from flows_app.commands import add_flows_option, check_flows_option
from flows_app.selectors import draft_kind, drafts_pending


class Command(BaseCommand):
    help = "List the pending drafts, oldest first, with their lint status."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        add_flows_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        drafts = drafts_pending()
        now = timezone.now()
        for draft in drafts:
            lint = lint_status(draft.findings)
            self.stdout.write(
                f"{draft.public_id}  {draft.flow_id}  {draft_kind(draft)}  {lint}  "
                f"by {draft.submitter}, "
                f"{timesince(draft.created_at, now, depth=1)} ago  {draft.title}"
            )
        self.stdout.write(counted(len(drafts), "pending draft"))
