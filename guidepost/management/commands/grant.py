"""``manage.py grant USER ROLE`` (``guidepost-mcp grant``): make a person a support lead or an
ops person, or (``--revoke``) no longer.

A role is a group the migrations create: "Support lead" (flows_app 0006: read, approve and
discard drafts; runs_app 0015: read runs with personal values, erase runs) and "Ops"
(runs_app 0005: the run and flow pages, ``/api/``); runs_app 0013 lets both answer
stalled runs, and support leads read runs. Granting also sets the user's staff status,
without which nobody signs in to the admin; revoking takes the group away and leaves staff
status alone (the person may be staff for another reason). It lives in the project, above
the apps whose groups it grants, and touches groups only by name.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from flowcore.common.names import closest

# A role's name on the command line -> the group the migrations create.
ROLES = {"support-lead": "Support lead", "ops": "Ops"}


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
        username, role = options["username"], options["role"]
        group = Group.objects.filter(name=ROLES[role]).first()
        if group is None:
            raise CommandError(
                f"the group {ROLES[role]!r} does not exist: migrate the database first "
                "(guidepost-mcp serve does it as it starts)"
            )
        with transaction.atomic():
            user = self.user(username)
            member = user.groups.filter(pk=group.pk).exists()
            if options["revoke"]:
                lines = self.revoke(user, group, member=member)
            else:
                lines = self.grant(user, group, member=member)
        for line in lines:
            self.stdout.write(line)

    def user(self, username: str) -> Any:
        users = get_user_model()
        found = users.objects.select_for_update().filter(**{users.USERNAME_FIELD: username}).first()
        if found is not None:
            return found
        names = users.objects.values_list(users.USERNAME_FIELD, flat=True)
        near = closest(username, [str(name) for name in names])
        hint = f" (closest: {', '.join(near)})" if near else ""
        raise CommandError(
            f"no user {username!r}{hint}: create the account first (the admin's Users → Add "
            "user, or guidepost-mcp createsuperuser), then grant the role"
        )

    def grant(self, user: Any, group: Group, *, member: bool) -> list[str]:
        name = user.get_username()
        lines = []
        if not member:
            user.groups.add(group)
            lines.append(f"{name}: added to the group {group.name!r}")
        if not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
            lines.append(f"{name}: staff status set, so they can sign in to the admin")
        if not lines:
            lines.append(f"{name} is already in {group.name!r} and staff: nothing changed")
        if not user.is_active:
            lines.append(f"note: {name} is inactive and cannot sign in until made active")
        return lines

    def revoke(self, user: Any, group: Group, *, member: bool) -> list[str]:
        name = user.get_username()
        if not member:
            return [f"{name} is not in {group.name!r}: nothing changed"]
        user.groups.remove(group)
        return [
            f"{name}: removed from the group {group.name!r} (staff status kept: untick it in "
            "the admin if they should no longer sign in)"
        ]
