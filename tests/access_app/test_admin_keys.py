"""Agent keys and audit records in the admin, through Django's client: a key is shown
once when it is added and never again, revoked by an action, never deleted; audit
records are read-only and filterable."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from access_app.models import AgentKey, AuditRecord
from access_app.services import key_create

pytestmark = pytest.mark.django_db

KEY = re.compile(r"gpk_[A-Za-z0-9_-]{43}")
KEYS = "/admin/access_app/agentkey/"
RECORDS = "/admin/access_app/auditrecord/"


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", password="root-pass-4821"))
    return client


def test_adding_a_key_shows_it_once_and_stores_only_its_digest(admin: Client) -> None:
    response = admin.post(KEYS + "add/", {"name": "support-bot"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    [shown] = KEY.findall(response.content.decode())
    key = AgentKey.objects.get(name="support-bot")
    assert (key.digest, key.display) == (hashlib.sha256(shown.encode()).hexdigest(), shown[:12])
    for page in (KEYS, f"{KEYS}{key.pk}/change/"):
        listed = admin.get(page)
        assert listed.status_code == 200
        assert shown not in listed.content.decode() and shown[:12] in listed.content.decode()


@pytest.mark.parametrize("name", ["two words", "-dash-first", "x" * 65, "a:b"])
def test_a_bad_name_is_a_form_error_and_creates_nothing(admin: Client, name: str) -> None:
    response = admin.post(KEYS + "add/", {"name": name})

    assert response.status_code == 200
    assert not KEY.search(response.content.decode())
    assert AgentKey.objects.count() == 0


def test_a_name_with_an_active_key_is_refused_until_that_key_is_revoked(admin: Client) -> None:
    first, _ = key_create(name="support-bot")

    refused = admin.post(KEYS + "add/", {"name": "support-bot"})
    assert "already has an active key" in refused.content.decode()
    assert AgentKey.objects.count() == 1

    revoked = admin.post(KEYS, {"action": "revoke", "_selected_action": [first.pk]}, follow=True)
    assert "1 key(s) revoked" in revoked.content.decode()
    first.refresh_from_db()
    assert first.revoked_at is not None
    again = admin.post(KEYS + "add/", {"name": "support-bot"})
    assert KEY.search(again.content.decode())
    assert AgentKey.objects.filter(name="support-bot").count() == 2


def test_keys_cannot_be_deleted_or_renamed(admin: Client) -> None:
    key, _ = key_create(name="support-bot")

    assert admin.get(f"{KEYS}{key.pk}/delete/").status_code == 403
    admin.post(f"{KEYS}{key.pk}/change/", {"name": "renamed"})
    key.refresh_from_db()
    assert key.name == "support-bot"


def record(**fields: Any) -> AuditRecord:
    defaults: dict[str, Any] = {
        "at": timezone.now(),
        "tool": "guide_status",
        "outcome": "ok",
        "status": 200,
        "duration_ms": 1.0,
    }
    return AuditRecord.objects.create(**{**defaults, **fields})


def test_audit_records_are_read_only_and_filter_by_key_tool_and_outcome(admin: Client) -> None:
    kept = record(key_name="alpha", tool="guide_answer", outcome="run not found")
    record(key_name="beta")

    filtered = admin.get(RECORDS, {"key_name": "alpha", "tool": "guide_answer"})
    assert filtered.status_code == 200
    assert filtered.context["cl"].result_count == 1
    assert admin.get(RECORDS, {"outcome": "run not found"}).context["cl"].result_count == 1
    assert admin.get(RECORDS + "add/").status_code == 403
    assert admin.get(f"{RECORDS}{kept.pk}/delete/").status_code == 403
    admin.post(f"{RECORDS}{kept.pk}/change/", {"outcome": "ok"})
    kept.refresh_from_db()
    assert kept.outcome == "run not found"


def test_links_to_the_keys_admin_from_before_the_move_still_arrive(client: Client) -> None:
    moved = client.get("/admin/runs_app/agentkey/?q=support")
    assert moved.status_code == 301
    assert moved["Location"] == "/admin/access_app/agentkey/?q=support"
    assert client.get("/admin/runs_app/auditrecord/7/change/")["Location"] == (
        "/admin/access_app/auditrecord/7/change/"
    )
    assert client.get("/admin/runs_app/run/").status_code == 302  # runs stay: to the login
