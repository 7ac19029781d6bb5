"""A step's statements, written once (``runs_app.step_store``, ADR 0042): the run read for
a step is the run the ORM would load, its flow is found without its version's text, and
what a step writes reads back the same.

Runs on SQLite and on PostgreSQL (DATABASE_URL).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from access_app.callers import Caller
from flowcore.flow.building import content_hash
from flows_app.models import FlowVersion
from flows_app.selectors import flow_of_version
from runs_app import agent_steps, selectors, step_store
from runs_app.models import Run, Step
from runs_app.packing import DEFLATE_1, unpack_json
from tests.runs_app.test_step_queries import statement
from tests.support.servers import BUNDLED_FLOWS, uses_postgres

pytestmark = pytest.mark.django_db

CALLER = Caller(key="test:step-store", name="pytest")
REFUND = "refund_request"
ORDER = {"order_number": "A00118"}
REWORDED = "Ask whether they can send a photo that shows the damage or the fault"


def start(values: dict[str, Any] | None = ORDER) -> str:
    started = agent_steps.run_start(caller=CALLER, flow_id=REFUND, values=values, ref=None)
    return str(started["run_id"])


def answer(run_id: str, choice: str) -> dict[str, Any]:
    return agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=None, at=None)


def flows_with(target: Path, say: str) -> Path:
    """The bundled flows, with refund_request's n_photos saying ``say``."""
    shutil.copytree(BUNDLED_FLOWS, target)
    path = target / f"{REFUND}.yaml"
    text = path.read_text(encoding="utf-8")
    assert REWORDED in text
    path.write_text(text.replace(REWORDED, say), encoding="utf-8")
    return target


def version_reads(queries: CaptureQueriesContext) -> list[str]:
    """The statements that read a flow version's row (the run's read only joins it)."""
    return [
        q["sql"]
        for q in queries.captured_queries
        if statement(q["sql"]) == "SELECT runs_app_flowversion"
    ]


def test_a_step_on_a_run_pinned_to_an_older_version_uses_its_text_read_once_per_process(
    settings: Any, tmp_path: Path
) -> None:
    # A text no earlier test built (the cache lives as long as the process).
    old_say = f"Ask for a photo of the damage ({uuid.uuid4().hex})"
    settings.GUIDEPOST_FLOWS_DIR = flows_with(tmp_path / "old", old_say)
    older, also_older = start(), start()
    settings.GUIDEPOST_FLOWS_DIR = flows_with(tmp_path / "new", "Ask for a photo")

    with CaptureQueriesContext(connection) as first:
        photos = answer(older, "damaged")
    with CaptureQueriesContext(connection) as later:
        photos_again = answer(also_older, "damaged")
        answer(older, "yes")
        answer(also_older, "no")

    assert photos["node"]["say"] == photos_again["node"]["say"] == old_say
    assert len(version_reads(first)) == 1  # its text, on the first miss
    assert version_reads(later) == []


def test_flows_of_versions_sharing_an_id_are_told_apart_by_their_text() -> None:
    # A test database reuses ids after a rollback: the cache must never key by id.
    texts = [
        (BUNDLED_FLOWS / f"{REFUND}.yaml")
        .read_text(encoding="utf-8")
        .replace(REWORDED, f"{REWORDED} ({uuid.uuid4().hex})")
        for _ in range(2)
    ]
    versions = [
        FlowVersion(pk=7, flow_id="retired_flow", content_hash=content_hash(text), source=text)
        for text in texts
    ]

    flows = [flow_of_version(v) for v in versions]

    assert [f.content_hash for f in flows] == [v.content_hash for v in versions]
    assert [flow_of_version(v).content_hash for v in reversed(versions)] == [
        v.content_hash for v in reversed(versions)
    ]


def test_a_version_whose_text_does_not_match_its_hash_is_never_cached_under_that_hash() -> None:
    honest = (BUNDLED_FLOWS / f"{REFUND}.yaml").read_text(encoding="utf-8")
    honest = honest.replace(REWORDED, f"{REWORDED} ({uuid.uuid4().hex})")
    edited = honest.replace(REWORDED, "Ask what went wrong")
    digest = content_hash(honest)

    tampered = flow_of_version(
        FlowVersion(flow_id="retired_flow", content_hash=digest, source=edited)
    )
    genuine = flow_of_version(
        FlowVersion(flow_id="retired_flow", content_hash=digest, source=honest)
    )

    assert tampered.content_hash == content_hash(edited)
    assert genuine.content_hash == digest


def test_the_run_read_for_a_step_is_the_run_the_orm_loads_with_nothing_left_to_fetch() -> None:
    run_id = start()
    answer(run_id, "damaged")
    orm = Run.objects.select_related("flow_version").get(public_id=run_id)

    with transaction.atomic():
        run = selectors.run_get(CALLER, run_id, for_update=True)
        with CaptureQueriesContext(connection) as queries:
            columns = {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}
            version = (run.flow_version.pk, run.flow_version.flow_id, run.flow_version.content_hash)
            flow = selectors.run_flow(run)

    assert queries.captured_queries == []
    assert run.get_deferred_fields() == set()
    assert not run._state.adding and run._state.db == orm._state.db
    assert columns == {f.attname: getattr(orm, f.attname) for f in Run._meta.concrete_fields}
    assert isinstance(columns["packed_state"], bytes)
    assert columns["updated_at"].utcoffset() is not None
    assert version == (orm.flow_version.pk, orm.flow_version.flow_id, orm.flow_version.content_hash)
    assert flow.content_hash == orm.flow_version.content_hash


def test_a_state_and_a_step_with_text_beyond_ascii_read_back_as_written() -> None:
    email = 'zoë.東京+🚚@exämple.org «quoted» \\ "x"'
    run_id = start({**ORDER, "order_email": email})

    answer(run_id, "damaged")  # reads the state through the step's read, writes it back
    done = answer(run_id, "no")

    run = Run.objects.get(public_id=run_id)
    assert run.engine_state["values"]["order_email"] == email
    assert selectors.run_status(caller=CALLER, run_id=run_id)["values"]["order_email"] == email
    last = Step.objects.filter(run=run).order_by("-seq").first()
    assert last is not None and last.result == done
    assert last.input == {"choice": "no"}


def test_the_state_is_stored_packed_with_its_text_as_it_is() -> None:
    email = "zoë@exämple.org"
    run_id = start({**ORDER, "order_email": email})
    with connection.cursor() as cursor:
        cursor.execute("SELECT packed_state FROM runs_app_run WHERE public_id = %s", [run_id])
        [stored] = cursor.fetchone()
    text = unpack_json(stored)  # deflated against the dictionary (ADR 0090)
    assert bytes(stored)[0] == DEFLATE_1
    assert email in text and "\\u" not in text
    assert ", " not in text and ": " not in text
    assert json.loads(text) == Run.objects.get(public_id=run_id).engine_state
    assert json.loads(text)["values"]["order_email"] == email


def test_a_step_is_saved_like_an_orm_insert() -> None:
    run_id = start()
    answer(run_id, "damaged")

    run = Run.objects.get(public_id=run_id)
    steps = list(Step.objects.filter(run=run).order_by("seq"))
    assert [s.seq for s in steps] == [1, 2]
    assert steps[-1].hash == run.head_hash and steps[-1].prev_hash == steps[0].hash
    assert steps[-1].created_at == run.updated_at


def test_a_step_of_a_run_whose_row_is_gone_is_refused_and_inserts_nothing() -> None:
    run = Run.objects.get(public_id=start())
    step = Step.objects.get(run=run)
    before = Step.objects.count()
    step.pk, step.seq = None, 2
    step._state.adding = True
    run.pk = step.run_id = Run.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1

    with pytest.raises(Run.NotUpdated), transaction.atomic():
        step_store.step_append(run, step, update=("revision",))

    assert Step.objects.count() == before and step.pk is None


# Every step writes these columns of its run (runs_app.recording._STEP_COLUMNS).
EVERY_STEP = {"packed_state", "revision", "updated_at", "head_hash", "node"}


def test_no_index_of_the_runs_holds_a_column_every_step_writes() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Run._meta.db_table)

    indexed = {
        name: set(c["columns"]) & EVERY_STEP for name, c in constraints.items() if c["index"]
    }
    assert {name: columns for name, columns in indexed.items() if columns} == {}


@pytest.mark.skipif(not uses_postgres(), reason="heap-only updates (the PostgreSQL pass)")
def test_a_step_that_keeps_the_runs_state_updates_its_row_heap_only_on_postgresql() -> None:
    with connection.cursor() as cursor:
        # A heap-only update needs room on the row's page. The table's pages are filled to
        # the brim by default, and earlier tests leave dead rows in them, so the run is
        # given a page with room (the setting is rolled back with the test's transaction).
        cursor.execute("ALTER TABLE runs_app_run SET (fillfactor = 50)")
    run_id = start()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_hot_updated('runs_app_run'::regclass)")
        [before] = cursor.fetchone()
        answer(run_id, "damaged")  # still active: no indexed column changes
        cursor.execute("SELECT pg_stat_get_xact_tuples_hot_updated('runs_app_run'::regclass)")
        [after] = cursor.fetchone()

    assert after - before == 1


@pytest.mark.skipif(not uses_postgres(), reason="Django's LIKE indexes (the PostgreSQL pass)")
def test_only_the_columns_searched_by_prefix_have_a_like_index_on_postgresql() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexdef FROM pg_indexes WHERE indexdef LIKE %s"
            " AND tablename IN ('runs_app_run', 'runs_app_auditrecord')",
            ["%pattern_ops%"],
        )
        like = sorted((table, d.split("(", 1)[1].split()[0]) for table, d in cursor.fetchall())

    assert like == [("runs_app_run", "owner"), ("runs_app_run", "public_id")]
