"""``manage.py capture RUN_ID`` (``guidepost-mcp capture``): a recorded run as a scenario."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal
from flows_app.commands import add_flows_option, check_flows_option
from runs_app.capture import run_capture


class Command(BaseCommand):
    help = (
        "Append a scenario that replays a recorded run (its calls, and what came back) to "
        "<flows dir>/tests/<flow_id>.yaml, and print the file's path."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", help="the run's id (r_...)")
        add_flows_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        try:
            captured = run_capture(run_id=options["run_id"])
        except Refusal as refusal:
            candidates = (
                f" (closest: {', '.join(refusal.candidates)})" if refusal.candidates else ""
            )
            raise CommandError(
                f"{refusal.error}: {refusal.reason}{candidates}. {refusal.next}"
            ) from None
        self.stdout.write(str(captured.path))
        if captured.stale:
            self.stdout.write(
                self.style.WARNING(
                    f"note: {options['run_id']} ran on an older revision of "
                    f"{captured.flow_id}; its scenario replays the same on the live one, and "
                    "says so in a comment"
                )
            )
