"""People who sign in: an account made with its roles, a role given or taken away.

A role is a group the migrations create: "Support lead" (flows_app 0006: read, approve and
discard drafts; runs_app 0015: read runs with personal values, erase runs) and "Ops"
(runs_app 0005: the run and flow pages, ``/api/``); runs_app 0013 lets both answer
stalled runs, and support leads read runs. Giving a role also sets the user's staff
status, without which nobody signs in to the admin; taking it away leaves staff status
alone (the person may be staff for another reason). It lives in the project, above the
apps whose groups it grants, and touches groups only by name. The commands ``grant`` and
``adduser`` call it; each change is said as one line, for the command to print.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from flowcore.common.names import closest

# A role's name on the command line -> the group the migrations create.
ROLES = {"support-lead": "Support lead", "ops": "Ops"}


class PeopleError(Exception):
    """What a person asked for cannot be done; the message says why and what to do."""


def role_group(role: str) -> Group:
    group = Group.objects.filter(name=ROLES[role]).first()
    if group is None:
        raise PeopleError(
            f"the group {ROLES[role]!r} does not exist: migrate the database first "
            "(guidepost-mcp serve does it as it starts)"
        )
    return group


def role_grant(*, username: str, role: str) -> list[str]:
    """Put the user in the role's group and make them staff."""
    group = role_group(role)
    with transaction.atomic():
        return _grant(_user_locked(username), group)


def role_revoke(*, username: str, role: str) -> list[str]:
    """Take the user out of the role's group; staff status stays."""
    group = role_group(role)
    with transaction.atomic():
        user = _user_locked(username)
        name = user.get_username()
        if not user.groups.filter(pk=group.pk).exists():
            return [f"{name} is not in {group.name!r}: nothing changed"]
        user.groups.remove(group)
    return [
        f"{name}: removed from the group {group.name!r} (staff status kept: untick it in "
        "the admin if they should no longer sign in)"
    ]


def person_add(*, username: str, password: str, roles: Iterable[str], email: str = "") -> list[str]:
    """A new account, staff in the roles' groups, with ``password`` once the configured
    password validators accept it. Refused for a name already taken: an existing account
    gets a role with ``grant``."""
    groups = [role_group(role) for role in dict.fromkeys(roles)]
    users = get_user_model()
    if users.objects.filter(**{users.USERNAME_FIELD: username}).exists():
        raise PeopleError(
            f"a user {username!r} already exists: give them a role with guidepost-mcp grant "
            f"{username} ROLE"
        )
    candidate = users(**{users.USERNAME_FIELD: username, "email": email})
    try:
        validate_password(password, candidate)
    except ValidationError as exc:
        raise PeopleError("password refused: " + " ".join(exc.messages)) from None
    with transaction.atomic():
        user = users.objects.create_user(username, email=email, password=password)
        lines = [f"{username}: account created"]
        for group in groups:
            lines += _grant(user, group)
    return lines


def _user_locked(username: str) -> Any:
    users = get_user_model()
    found = users.objects.select_for_update().filter(**{users.USERNAME_FIELD: username}).first()
    if found is not None:
        return found
    names = users.objects.values_list(users.USERNAME_FIELD, flat=True)
    near = closest(username, [str(name) for name in names])
    hint = f" (closest: {', '.join(near)})" if near else ""
    raise PeopleError(
        f"no user {username!r}{hint}: create the account first (guidepost-mcp adduser, the "
        "admin's Users → Add user, or guidepost-mcp createsuperuser), then grant the role"
    )


def _grant(user: Any, group: Group) -> list[str]:
    name = user.get_username()
    lines = []
    if not user.groups.filter(pk=group.pk).exists():
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
