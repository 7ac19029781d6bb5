from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal, TestsFail
from flows_app.commands import acting_as, add_as_option, refused
from flows_app.services import catalog_publish


class Command(BaseCommand):
    help = (
        "Make a flows directory the live catalog of every instance: its flows, "
        "categories.yaml and tests/, once every flow lints and passes its tests (ADR 0081)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path, metavar="DIR", help="the flows to publish")
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would change; change nothing"
        )
        add_as_option(parser, "publishes")

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["directory"].expanduser().resolve()
        if not directory.is_dir():
            raise CommandError(f"{options['directory']}: no such directory")
        publisher = acting_as(options["acting_as"])
        try:
            published = catalog_publish(directory, by=publisher, dry_run=options["dry_run"])
        except TestsFail as refusal:
            for line in refusal.details:
                self.stderr.write(line)
            raise refused(refusal) from None
        except Refusal as refusal:
            raise refused(refusal) from None
        for mark, names in (
            ("+", published.added),
            ("~", published.changed),
            ("-", published.removed),
        ):
            for name in names:
                self.stdout.write(f"{mark} {name}")
        count = len(published.added) + len(published.changed) + len(published.removed)
        if not count:
            self.stdout.write(f"nothing to publish: the live catalog is {directory} already")
        elif options["dry_run"]:
            self.stdout.write(f"dry run: {count} files would change; nothing was published")
        else:
            self.stdout.write(
                f"published {count} files of {directory} as catalog revision "
                f"{published.revision} (approved by {publisher}); every instance serves them "
                "within its poll interval"
            )
