"""``guidepost-mcp grant USER support-lead|ops [--revoke]``: a role in one command, against a
real database (the groups are the migrations' own), and once as a real process on a fresh
database."""

from __future__ import annotations

import sqlite3
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.servers import guidepost_command

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("migrated_groups")]

GROUPS = {"support-lead": "Support lead", "ops": "Ops"}


def grant(*args: str) -> list[str]:
    out = StringIO()
    call_command("grant", *args, stdout=out)
    return out.getvalue().splitlines()


def roles_of(name: str) -> tuple[bool, list[str]]:
    user = User.objects.get(username=name)
    return user.is_staff, sorted(user.groups.values_list("name", flat=True))


@pytest.mark.parametrize("role", GROUPS)
def test_grant_makes_a_user_staff_in_the_roles_group_and_says_what_changed(role: str) -> None:
    User.objects.create_user("maria")
    assert grant("maria", role) == [
        f"maria: added to the group {GROUPS[role]!r}",
        "maria: staff status set, so they can sign in to the admin",
    ]
    assert roles_of("maria") == (True, [GROUPS[role]])
    if role == "support-lead":
        assert User.objects.get(username="maria").has_perm("flows_app.approve_draft")


def test_grant_again_changes_nothing_and_says_so() -> None:
    User.objects.create_user("maria", is_staff=True)
    grant("maria", "support-lead")
    before = User.objects.filter(username="maria").values().get()
    assert grant("maria", "support-lead") == [
        "maria is already in 'Support lead' and staff: nothing changed"
    ]
    assert User.objects.filter(username="maria").values().get() == before
    assert roles_of("maria") == (True, ["Support lead"])


def test_roles_add_up_and_revoke_takes_away_only_the_one_named() -> None:
    User.objects.create_user("sam")
    grant("sam", "ops")
    grant("sam", "support-lead")
    assert grant("sam", "support-lead", "--revoke") == [
        "sam: removed from the group 'Support lead' (staff status kept: untick it in the admin "
        "if they should no longer sign in)"
    ]
    assert roles_of("sam") == (True, ["Ops"])
    assert grant("sam", "support-lead", "--revoke") == [
        "sam is not in 'Support lead': nothing changed"
    ]
    assert roles_of("sam") == (True, ["Ops"])


def test_an_unknown_user_is_refused_with_the_closest_names_and_nothing_is_made() -> None:
    User.objects.create_user("maria")
    with pytest.raises(CommandError) as refused:
        grant("mario", "support-lead")
    assert str(refused.value) == (
        "no user 'mario' (closest: maria): create the account first (guidepost-mcp adduser, "
        "the admin's Users → Add user, or guidepost-mcp createsuperuser), then grant the role"
    )
    assert list(User.objects.values_list("username", flat=True)) == ["maria"]
    assert not Group.objects.get(name="Support lead").user_set.exists()


def test_an_unknown_role_is_refused_naming_the_roles() -> None:
    User.objects.create_user("maria")
    with pytest.raises(CommandError, match="invalid choice: 'lead' \\(choose from"):
        grant("maria", "lead")
    assert roles_of("maria") == (False, [])


def test_an_inactive_user_is_granted_with_a_note_that_they_cannot_sign_in() -> None:
    User.objects.create_user("tom", is_active=False)
    assert grant("tom", "ops")[-1] == "note: tom is inactive and cannot sign in until made active"


@pytest.mark.slow
def test_the_console_script_grants_on_a_fresh_database(tmp_path: Path) -> None:
    """``guidepost-mcp grant`` migrates first, like createsuperuser, so it works before any
    ``serve``; it fails with the message, not a traceback."""
    database_url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    unknown = guidepost_command(database_url, "grant", "maria", "support-lead")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("CommandError: no user 'maria': create the account first")
    assert "Traceback" not in unknown.stderr
    with sqlite3.connect(tmp_path / "fresh.sqlite3") as db:
        db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
            "email, is_staff, is_active, date_joined) "
            "VALUES ('!', 0, 'maria', '', '', '', 0, 1, '2026-01-01')"
        )
    granted = guidepost_command(database_url, "grant", "maria", "support-lead")
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout.splitlines() == [
        "maria: added to the group 'Support lead'",
        "maria: staff status set, so they can sign in to the admin",
    ]
