"""An audit record's INSERT, built once (``access_app.audit``, ADR 0088): it writes every
column of the record, each value as the ORM would store it, in one statement.

Runs on SQLite and on PostgreSQL (DATABASE_URL).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access_app import audit
from access_app.models import AuditRecord
from tests.runs_app.test_step_queries import statement

pytestmark = pytest.mark.django_db

ENTRY = audit.Entry(
    tool="guide_answer",
    outcome="run has moved",
    status=200,
    duration_ms=1.23456,
    key_name="støtte",
    caller="key:støtte",
    client="Claude Desktop/1.2 — ünïcode",
    peer="2001:db8::1",
    run_id="r_AbC-12",
    count=3,
    at=datetime(2026, 12, 2, 16, 30, 5, 123456, tzinfo=UTC),
)


def test_the_built_insert_names_every_column_of_a_record_but_its_id() -> None:
    columns = {f.column for f in AuditRecord._meta.concrete_fields} - {"id"}
    assert {f.column for f in audit._RECORD_FIELDS} == columns


def test_a_record_is_one_insert_that_reads_back_as_the_entry() -> None:
    with CaptureQueriesContext(connection) as queries:
        audit.audit_record(ENTRY)
    assert [statement(q["sql"]) for q in queries.captured_queries] == [
        "INSERT runs_app_auditrecord"
    ]
    [record] = AuditRecord.objects.all()
    assert (
        record.at,
        record.key_name,
        record.caller,
        record.client,
        record.peer,
        record.tool,
        record.run_id,
        record.outcome,
        record.status,
        record.duration_ms,
        record.count,
    ) == (
        ENTRY.at,
        "støtte",
        "key:støtte",
        "Claude Desktop/1.2 — ünïcode",
        "2001:db8::1",
        "guide_answer",
        "r_AbC-12",
        "run has moved",
        200,
        1.235,
        3,
    )


def test_a_record_without_a_time_is_stamped_now_and_cut_to_its_columns() -> None:
    before = datetime.now(UTC)
    audit.audit_record(
        audit.Entry(tool="x" * 300, outcome="ok", status=200, duration_ms=0.0, peer="p" * 99)
    )
    [record] = AuditRecord.objects.all()
    assert before <= record.at <= datetime.now(UTC)
    assert (len(record.tool), record.tool[-1], record.peer) == (100, "…", "p" * 64)
    assert (record.key_name, record.run_id, record.count) == ("", "", 1)
