"""Retention (ADR 0087): ``GUIDEPOST_RETENTION_DAYS`` erases exactly the ended runs
(completed, closed) that ended before the age, never an active or stalled run however
old; ``GUIDEPOST_AUDIT_RETENTION_DAYS`` deletes the audit records of sealed windows past
the age; unset keeps everything; the flow pages' counts and ``verify`` stay whole.
"""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from access_app.models import AuditRecord
from runs_app.erasure import RETENTION, retention
from runs_app.models import Run
from runs_app.selectors import runs_by_flow
from tests.runs_app.test_verify import ORDER, call, seal_everything, verify, walked
from tests.support.servers import fresh_database, guidepost_command

pytestmark = pytest.mark.django_db


def ended_at(choice: str, state: str) -> str:
    """A run that answers ``choice`` at the reason's question and is then in ``state``."""
    run_id = str(call("guide_start", {"flow_id": "refund_request", "values": ORDER})["run_id"])
    call("guide_answer", {"run_id": run_id, "choice": choice})
    assert Run.objects.get(public_id=run_id).state == state
    return run_id


def test_retention_erases_exactly_the_ended_runs_past_the_age(settings: object) -> None:
    settings.GUIDEPOST_RETENTION_DAYS = 30  # type: ignore[attr-defined]
    old_closed = walked(close=True)
    old_completed = ended_at("gift_from_aunt_Mathilda", "completed")  # __other__
    old_active = str(call("guide_start", {"flow_id": "refund_request"})["run_id"])
    old_stalled = ended_at("__unknown__", "stalled")
    cut = timezone.now()
    young = walked(close=True)
    counts = runs_by_flow(since=cut - timedelta(days=1))

    done = retention(now=cut + timedelta(days=30))

    assert sorted(done.runs) == sorted([old_closed, old_completed])
    erased = Run.objects.filter(erased_at__isnull=False)
    assert sorted(erased.values_list("public_id", flat=True)) == sorted(done.runs)
    assert {s.caller for s in Run.objects.get(public_id=old_closed).steps.filter(tool="erase")} == {
        RETENTION
    }
    for run_id in (old_active, old_stalled, young):
        assert Run.objects.get(public_id=run_id).erased_at is None
    assert runs_by_flow(since=cut - timedelta(days=1)) == counts
    assert retention(now=cut + timedelta(days=30)).runs == []  # erased once
    assert verify()[0]


def test_retention_unset_keeps_everything(settings: object) -> None:
    settings.GUIDEPOST_RETENTION_DAYS = None  # type: ignore[attr-defined]
    settings.GUIDEPOST_AUDIT_RETENTION_DAYS = None  # type: ignore[attr-defined]
    walked(close=True)
    records = AuditRecord.objects.count()

    done = retention(now=timezone.now() + timedelta(days=3650))

    assert done.runs == [] and done.audit_records == 0
    assert not Run.objects.filter(erased_at__isnull=False).exists()
    assert AuditRecord.objects.count() == records


def test_audit_retention_deletes_the_records_of_sealed_windows_past_the_age(
    settings: object,
) -> None:
    settings.GUIDEPOST_AUDIT_RETENTION_DAYS = 7  # type: ignore[attr-defined]
    old = walked(close=True)
    seal_everything()
    cut = timezone.now()
    young = walked(close=True)

    done = retention(now=cut + timedelta(days=7))

    assert done.audit_records > 0
    assert not AuditRecord.objects.filter(run_id=old).exists()
    assert AuditRecord.objects.filter(run_id=young).exists()
    ok, lines, error = verify()
    assert ok, (lines, error)
    assert any("pruned by retention" in line for line in lines)


def test_the_retention_command_says_what_it_did(settings: object) -> None:
    settings.GUIDEPOST_RETENTION_DAYS = 1  # type: ignore[attr-defined]
    settings.GUIDEPOST_AUDIT_RETENTION_DAYS = None  # type: ignore[attr-defined]
    out = io.StringIO()
    call_command("retention", stdout=out)
    assert out.getvalue().splitlines() == [
        "runs: 0 ended runs older than 1 days erased",
        "events: 0 events older than 1 days deleted, with their deliveries",
        "audit records: kept (GUIDEPOST_AUDIT_RETENTION_DAYS is not set)",
    ]


def test_serves_retention_tick_applies_retention_and_survives_a_failure(
    settings: object, caplog: pytest.LogCaptureFixture
) -> None:
    from guidepost.loops import keep_connection, retention_loop

    tick = retention_loop(3600, release=keep_connection).once  # the test's own connection
    settings.GUIDEPOST_RETENTION_DAYS = 1  # type: ignore[attr-defined]
    run_id = walked(close=True)
    Run.objects.filter(public_id=run_id).update(updated_at=timezone.now() - timedelta(days=2))
    tick()
    assert Run.objects.get(public_id=run_id).erased_at is not None

    settings.GUIDEPOST_AUDIT_RETENTION_DAYS = "not a number"  # type: ignore[attr-defined]
    tick()  # logged, not raised
    assert "could not apply retention" in caplog.text


@pytest.mark.slow
def test_retention_vacuum_rewrites_the_database_as_a_real_command(tmp_path: Path) -> None:
    """``retention --vacuum`` on the suite's kind of database (SQLite: VACUUM outside any
    transaction; PostgreSQL: VACUUM FULL, which no transaction may hold either)."""
    with fresh_database(tmp_path, empty=True) as database_url:
        made = guidepost_command(database_url, "createkey", "support")  # migrates first
        assert made.returncode == 0, made.stderr
        done = guidepost_command(
            database_url, "retention", "--vacuum", env={"GUIDEPOST_RETENTION_DAYS": "30"}
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "runs: 0 ended runs older than 30 days erased" in done.stdout
        assert "VACUUM" in done.stdout


def test_retention_deletes_the_events_and_deliveries_older_than_the_runs_it_keeps(
    settings: object,
) -> None:
    """Events (what a webhook says of a run) are kept no longer than the runs: each holds
    the run's words until its run is erased, and they piled up for ever."""
    from events_app.models import Delivery, Event, Subscription

    settings.GUIDEPOST_RETENTION_DAYS = 30  # type: ignore[attr-defined]
    subscription = Subscription.objects.create(url="https://hooks.example.com/", events=["x"])
    now = timezone.now()
    for days in (31, 29):
        event = Event.objects.create(
            kind="run.closed", data={}, created_at=now - timedelta(days=days)
        )
        Delivery.objects.create(
            event=event, subscription=subscription, next_attempt_at=now, retry_since=now
        )

    done = retention(now=now)

    assert done.events == 1
    assert [e.created_at for e in Event.objects.all()] == [now - timedelta(days=29)]
    assert Delivery.objects.count() == 1
