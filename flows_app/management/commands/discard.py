from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from flowcore.common.errors import Refusal
from flows_app.commands import acting_as, add_as_option, refused
from flows_app.selectors import draft_find
from flows_app.services import draft_discard


class Command(BaseCommand):
    help = "Discard a pending draft with a reason; the draft and the reason are kept."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ref", metavar="FLOW_ID|DRAFT_ID", help="a draft id, or a flow id")
        parser.add_argument("--reason", required=True, help="why it is not published")
        add_as_option(parser, "discards")

    def handle(self, *args: Any, **options: Any) -> None:
        person = acting_as(options["acting_as"])
        try:
            draft = draft_find(options["ref"])
            draft_discard(draft=draft, discarded_by=person, reason=options["reason"])
        except Refusal as refusal:
            raise refused(refusal) from None
        self.stdout.write(f"discarded {draft.public_id} ({draft.flow_id}) by {person}")
