"""A run's and its steps' digests are stored as the bytes they spell and read as the same
hex (runs_app.fields, ADR 0092): on both databases, and through the migration both ways."""

from __future__ import annotations

import pytest
from django.db import connection

from access_app.callers import Caller
from runs_app import agent_steps
from runs_app.models import Run, Step
from runs_app.verification import verify
from tests.runs_app.test_packing import migrate

CALLER = Caller(key="test:digests", name="pytest")
BEFORE_BYTES = ("runs_app", "0020_run_indexes_no_step_column")
STEP_DIGESTS = "SELECT hash, prev_hash, flow_hash, payload FROM runs_app_step ORDER BY seq"
RUN_DIGESTS = "SELECT head_hash, salt, moved_from FROM runs_app_run"


def walk() -> str:
    started = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values={"order_number": "A00118"}, ref=None
    )
    agent_steps.run_answer(
        caller=CALLER, run_id=started["run_id"], choice="damaged", values=None, at=None
    )
    return str(started["run_id"])


def stored(sql: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def as_hex(rows: list[tuple[object, ...]]) -> list[tuple[str, ...]]:
    return [tuple(bytes(v).hex() for v in row) for row in rows]


@pytest.mark.django_db
def test_digests_take_the_bytes_they_spell_and_read_back_as_their_hex() -> None:
    run_id = walk()

    steps = list(Step.objects.order_by("seq"))
    run = Run.objects.get(public_id=run_id)
    rows = stored(STEP_DIGESTS)
    assert [len(bytes(h)) for h, *_ in rows] == [32, 32]
    assert len(bytes(stored(RUN_DIGESTS)[0][1])) == 16  # the salt
    assert as_hex(rows) == [(s.hash, s.prev_hash, s.flow_hash, s.payload) for s in steps]
    assert as_hex(stored(RUN_DIGESTS)) == [(run.head_hash, run.salt, run.moved_from)]
    assert run.head_hash == steps[-1].hash and len(run.head_hash) == 64
    assert steps[1].prev_hash == steps[0].hash and steps[1].flow_hash == ""
    assert Run.objects.filter(head_hash=steps[-1].hash).count() == 1
    verdict = verify([run_id])
    assert (verdict.runs, verdict.problems) == (1, [])


@pytest.mark.django_db(transaction=True)
def test_digests_keep_their_hex_through_the_migration_back_and_forth() -> None:
    run_id = walk()
    steps = [(s.hash, s.prev_hash, s.flow_hash, s.payload) for s in Step.objects.order_by("seq")]
    run = Run.objects.get(public_id=run_id)
    heads = [(run.head_hash, run.salt, run.moved_from)]

    migrate([BEFORE_BYTES])
    assert stored(STEP_DIGESTS) == steps  # hex text again
    assert stored(RUN_DIGESTS) == heads
    migrate()

    assert as_hex(stored(STEP_DIGESTS)) == steps
    assert as_hex(stored(RUN_DIGESTS)) == heads
    verdict = verify([run_id])
    assert (verdict.runs, verdict.problems) == (1, [])
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="yes", values=None, at=None)
    assert verify([run_id]).problems == []
