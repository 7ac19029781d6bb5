"""``guidepost-mcp adduser NAME --role support-lead|ops``: an account with its roles in one
command, against a real database (the groups are the migrations' own); and as a real
process on a fresh database, the password typed at a terminal or given in
GUIDEPOST_ADDUSER_PASSWORD."""

from __future__ import annotations

import os
import pty
import select
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError

from tests.support.commands import typed
from tests.support.servers import guidepost_command

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("migrated_groups")]

PASSWORD = "a-long-review-passphrase"
VARIABLE = "GUIDEPOST_ADDUSER_PASSWORD"


def adduser(*args: str) -> list[str]:
    return typed("adduser", *args).splitlines()


def account(name: str) -> tuple[bool, list[str]]:
    user = User.objects.get(username=name)
    return user.is_staff, sorted(user.groups.values_list("name", flat=True))


def test_adduser_makes_a_support_lead_who_can_sign_in_and_approve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VARIABLE, PASSWORD)
    assert adduser("maria", "--role", "support-lead", "--email", "maria@example.com") == [
        "maria: account created",
        "maria: added to the group 'Support lead'",
        "maria: staff status set, so they can sign in to the admin",
    ]
    maria = User.objects.get(username="maria")
    assert maria.check_password(PASSWORD) and maria.is_active and not maria.is_superuser
    assert (maria.email, account("maria")) == ("maria@example.com", (True, ["Support lead"]))
    assert maria.has_perm("flows_app.approve_draft")


def test_adduser_gives_both_roles_when_both_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, PASSWORD)
    adduser("sam", "--role", "ops", "--role", "support-lead")
    assert account("sam") == (True, ["Ops", "Support lead"])


def test_an_existing_name_is_refused_pointing_at_grant_and_left_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    User.objects.create_user("maria", password="her-own-passphrase")
    monkeypatch.setenv(VARIABLE, PASSWORD)
    with pytest.raises(CommandError) as refused:
        adduser("maria", "--role", "ops")
    assert str(refused.value) == (
        "a user 'maria' already exists: give them a role with guidepost-mcp grant maria ROLE"
    )
    assert User.objects.get(username="maria").check_password("her-own-passphrase")
    assert account("maria") == (False, [])


def test_a_password_the_validators_refuse_makes_no_account(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VARIABLE, "password")
    with pytest.raises(CommandError, match="^password refused: This password is too common.$"):
        adduser("maria", "--role", "ops")
    assert not User.objects.filter(username="maria").exists()


def test_without_a_terminal_or_the_variable_it_says_which_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(CommandError) as refused:
        adduser("maria", "--role", "ops")
    assert str(refused.value) == f"no terminal to ask for the password on: set {VARIABLE} instead"
    assert not User.objects.exists()


def test_a_role_is_required_and_only_the_two_roles_are_accepted() -> None:
    with pytest.raises(CommandError, match="the following arguments are required: --role"):
        adduser("maria")
    with pytest.raises(CommandError, match="invalid choice: 'lead' \\(choose from"):
        adduser("maria", "--role", "lead")


def fresh(tmp_path: Path) -> tuple[str, Path]:
    database = tmp_path / "fresh.sqlite3"
    return f"sqlite:///{database}", database


def accounts(database: Path) -> list[tuple[str, int, int, str]]:
    with sqlite3.connect(database) as db:
        return db.execute(
            "SELECT u.username, u.is_staff, u.is_superuser, g.name FROM auth_user u "
            "JOIN auth_user_groups ug ON ug.user_id = u.id JOIN auth_group g ON g.id = ug.group_id"
        ).fetchall()


@pytest.mark.slow
def test_a_script_adds_a_user_on_a_fresh_database_with_the_password_variable(
    tmp_path: Path,
) -> None:
    database_url, database = fresh(tmp_path)
    made = guidepost_command(
        database_url, "adduser", "olga", "--role", "ops", env={VARIABLE: PASSWORD}
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[0] == "olga: account created"
    assert accounts(database) == [("olga", 1, 0, "Ops")]
    again = guidepost_command(
        database_url, "adduser", "olga", "--role", "ops", env={VARIABLE: PASSWORD}
    )
    assert again.returncode == 1
    assert again.stderr.startswith("CommandError: a user 'olga' already exists")
    assert "Traceback" not in again.stderr


# Takes stdin, a terminal, as the controlling terminal of its new session, then runs
# guidepost-mcp with the arguments it was given.
ON_THE_TERMINAL = """
import fcntl, runpy, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
sys.argv = ["guidepost-mcp", *sys.argv[1:]]
runpy.run_module("guidepost.cli", run_name="__main__")
"""


def read_until(fd: int, wanted: bytes, seen: bytearray) -> None:
    """Read the terminal until ``wanted`` has appeared (at most 60 s without output)."""
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, f"no {wanted!r} on the terminal; it showed {bytes(seen)!r}"
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # the process ended and closed the terminal
            chunk = b""
        assert chunk, f"the terminal closed before {wanted!r}; it showed {bytes(seen)!r}"
        seen += chunk


@pytest.mark.slow
def test_a_person_types_the_password_twice_at_a_terminal(tmp_path: Path) -> None:
    database_url, database = fresh(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    env["DATABASE_URL"] = database_url
    terminal, its_side = pty.openpty()
    # guidepost-mcp on a terminal of its own, as a person runs it: a new session whose
    # controlling terminal is that one (getpass reads /dev/tty, without echo).
    process = subprocess.Popen(
        [sys.executable, "-c", ON_THE_TERMINAL, "adduser", "maria", "--role", "support-lead"],
        stdin=its_side,
        stdout=its_side,
        stderr=its_side,
        env=env,
        start_new_session=True,
    )
    os.close(its_side)
    seen = bytearray()
    try:
        read_until(terminal, b"Password: ", seen)
        os.write(terminal, PASSWORD.encode() + b"\n")
        read_until(terminal, b"Password (again): ", seen)
        os.write(terminal, PASSWORD.encode() + b"\n")
        read_until(terminal, b"maria: staff status set", seen)
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(terminal)
    assert status == 0, bytes(seen)
    assert PASSWORD.encode() not in seen  # not echoed
    assert accounts(database) == [("maria", 1, 0, "Support lead")]
