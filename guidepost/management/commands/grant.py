"""``manage.py grant USER ROLE`` (``guidepost-mcp grant``): make a person a support lead or an
ops person, or (``--revoke``) no longer. What a role is: ``guidepost/people.py``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from guidepost.people import ROLES, PeopleError, role_grant, role_revoke


class Command(BaseCommand):
    help = (
        "Give USER a role: support-lead (reviews and approves drafts, answers stalled runs, "
        "erases runs) or ops (the run and flow pages and /api/, answers stalled runs); "
        "--revoke takes it away. Prints what changed."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", metavar="USER", help="the user's name, as they sign in")
        parser.add_argument("role", choices=list(ROLES), help="support-lead or ops")
        parser.add_argument(
            "--revoke", action="store_true", help="take the role away instead of giving it"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        change = role_revoke if options["revoke"] else role_grant
        try:
            lines = change(username=options["username"], role=options["role"])
        except PeopleError as exc:
            raise CommandError(str(exc)) from None
        for line in lines:
            self.stdout.write(line)
