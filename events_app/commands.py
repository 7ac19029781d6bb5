"""What the commands of events_app share (``webhook``, ``endpoint``): an action picked by
its name, a Refusal as the command's failure in one line, and a secret printed once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from flowcore.common.errors import Refusal


class ActionsCommand(BaseCommand):
    """``COMMAND ACTION ...``: ``handle_ACTION(options)`` runs it."""

    # None of the actions needs Django's system checks, which import the URLconf and so
    # the API and the admin: most of a `webhook list` (serve runs them when it starts).
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, "handle_" + options["action"])(options)
        except Refusal as refusal:
            raise CommandError(f"{refusal.error}: {refusal.reason}. {refusal.next}") from None

    def show_secret(self, secret: str) -> None:
        """The secret alone on the last line, so ``$(... | tail -1)`` takes it."""
        self.stdout.write("Signing secret (verify webhook-signature with it; shown once):")
        self.stdout.write(secret)
