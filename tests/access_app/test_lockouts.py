"""Signing in to the admin is throttled (issue 18; ADR 0073, django-axes): after a few
failures for a user name from an address, or from an address, a clear lock-out page
(429) answers every attempt, the right password included, until the cool-off ends; each
lock-out is in the audit trail; the address is REMOTE_ADDR (uvicorn's, trusted proxies
only), never a header the client writes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from access_app.models import AuditRecord

pytestmark = pytest.mark.django_db

PASSWORD = "right-pass-7731"
LIMIT = 5


@pytest.fixture
def admin_user() -> User:
    return User.objects.create_superuser("boss", "boss@example.com", PASSWORD)


def sign_in(username: str, password: str, address: str = "127.0.0.1", **headers: Any) -> Any:
    return Client(REMOTE_ADDR=address, headers=headers).post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}
    )


def test_the_right_password_is_refused_after_five_wrong_ones(admin_user: User) -> None:
    wrong = [sign_in("boss", f"wrong-{i}").status_code for i in range(LIMIT - 1)]
    locking = sign_in("boss", "wrong-last")
    right = sign_in("boss", PASSWORD)

    assert wrong == [200] * (LIMIT - 1)  # the form again, with its error
    assert locking.status_code == 429
    assert right.status_code == 429
    page = right.content.decode()
    assert "Signing in is locked for a while" in page
    assert f"There were {LIMIT} failed attempts to sign in as <strong>boss</strong>" in page
    assert "manage.py axes_reset_username NAME" in page
    records = AuditRecord.objects.filter(outcome="sign-in locked out")
    assert [(r.tool, r.caller, r.peer, r.status) for r in records] == [
        ("POST /admin/login/", "staff:boss", "127.0.0.1", 429)
    ] * 2


def test_an_address_is_locked_whatever_user_names_it_tries(admin_user: User) -> None:
    for i in range(LIMIT):
        sign_in(f"nobody-{i}", "guess", address="10.1.1.1")

    assert sign_in("boss", PASSWORD, address="10.1.1.1").status_code == 429
    # Another address signs in as usual.
    assert sign_in("boss", PASSWORD, address="10.1.1.2").status_code == 302


def test_forwarded_headers_do_not_spread_failures_over_made_up_addresses(
    admin_user: User,
) -> None:
    for i in range(LIMIT):
        sign_in("boss", "wrong", address="10.2.2.2", X_Forwarded_For=f"192.0.2.{i}")

    assert (
        sign_in("boss", PASSWORD, address="10.2.2.2", X_Forwarded_For="192.0.2.99").status_code
        == 429
    )
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.2.2.2"}


def test_the_lock_ends_after_the_cool_off(admin_user: User) -> None:
    for _ in range(LIMIT):
        sign_in("boss", "wrong")
    assert sign_in("boss", PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))

    assert sign_in("boss", PASSWORD).status_code == 302
