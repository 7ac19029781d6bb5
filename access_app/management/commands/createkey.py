"""``createkey NAME``: a new agent key, printed once, alone, as the last line of stdout."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from access_app.services import KeyRefused, key_create


class Command(BaseCommand):
    help = (
        "Create an agent key named NAME and print it once, alone, as the last line. "
        "Only its SHA-256 is stored: copy it now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who uses the key, e.g. support-bot")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            key, secret = key_create(name=options["name"])
        except KeyRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Created the agent key {key.name} ({key.display}…). It is shown this once and "
            "never stored: give it to the agent now, which sends it as "
            "Authorization: Bearer <key>."
        )
        self.stdout.write(secret)
