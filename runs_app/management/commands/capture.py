"""``manage.py capture RUN_ID`` (``guidepost-mcp capture``): a recorded run as a scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal
from runs_app.capture import run_capture


class Command(BaseCommand):
    help = (
        "Append a scenario that replays a recorded run (its calls, and what came back) to "
        "<flows dir>/tests/<flow_id>.yaml, and print the file's path."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", help="the run's id (r_...)")
        parser.add_argument(
            "--flows",
            type=Path,
            help="flows directory (default: GUIDEPOST_FLOWS_DIR); read before Django starts",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        flows = options["flows"]
        if flows is not None and flows.expanduser().resolve() != settings.GUIDEPOST_FLOWS_DIR:
            # guidepost-mcp and manage.py apply --flows before settings are read; a caller
            # that reaches this command another way must set GUIDEPOST_FLOWS_DIR itself.
            raise CommandError(f"--flows {flows}: set GUIDEPOST_FLOWS_DIR={flows} instead")
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
