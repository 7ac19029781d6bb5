"""``manage.py adduser NAME --role ROLE`` (``guidepost-mcp adduser``): a person's account,
made with its roles in one step, for a first install or a script.

The password is asked for twice on the terminal, or read from GUIDEPOST_ADDUSER_PASSWORD
when that is set (scripts, containers), so it never appears in a command line or a shell's
history. The password validators of the settings judge it, as the admin's form does.
"""

from __future__ import annotations

import getpass
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from guidepost.people import ROLES, PeopleError, person_add

PASSWORD_VARIABLE = "GUIDEPOST_ADDUSER_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create the account NAME with a role: --role support-lead (reviews and approves "
        "drafts) or ops (the run and flow pages); both may be given. The password is asked "
        f"for, or read from {PASSWORD_VARIABLE}. Prints what was made."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", metavar="NAME", help="the name they sign in with")
        parser.add_argument(
            "--role",
            dest="roles",
            action="append",
            required=True,
            choices=list(ROLES),
            help="support-lead or ops; repeat it for both",
        )
        parser.add_argument("--email", default="", help="their email address (optional)")

    def handle(self, *args: Any, **options: Any) -> None:
        password = self.password()
        try:
            lines = person_add(
                username=options["username"],
                password=password,
                roles=options["roles"],
                email=options["email"],
            )
        except PeopleError as exc:
            raise CommandError(str(exc)) from None
        for line in lines:
            self.stdout.write(line)

    def password(self) -> str:
        given = os.environ.get(PASSWORD_VARIABLE)
        if given is not None:
            if not given:
                raise CommandError(f"{PASSWORD_VARIABLE} is set but empty")
            return given
        if not sys.stdin.isatty():
            raise CommandError(
                f"no terminal to ask for the password on: set {PASSWORD_VARIABLE} instead"
            )
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ: nothing was made")
        if not first:
            raise CommandError("an empty password: nothing was made")
        return first
