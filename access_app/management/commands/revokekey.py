"""``revokekey NAME``: the key named NAME stops working (within a second in every worker)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from access_app.keyring import CACHE_SECONDS
from access_app.services import KeyRefused, key_revoke


class Command(BaseCommand):
    help = "Revoke the agent key named NAME. Its runs stay; the key is kept for the audit trail."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the key's name")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        try:
            revoked = key_revoke(name=name)
        except KeyRefused as exc:
            raise CommandError(str(exc)) from None
        if not revoked:
            self.stdout.write(f"The agent key {name} was already revoked.")
            return
        for key in revoked:
            self.stdout.write(
                f"Revoked the agent key {key.name} ({key.display}…): running servers refuse "
                f"it within {CACHE_SECONDS:g} s."
            )
