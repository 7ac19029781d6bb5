"""The ledger's seals (ADR 0067): a seal covers only what is older than the margin, a
busy window is cut into blocks of bounded size, sealers racing for a block write one
chain, and a seal lists each run and marks each audit record of its window."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from access_app.callers import Transport
from access_app.models import AuditRecord
from guidepost.mcp.dispatch import dispatch
from runs_app import ledger
from runs_app.models import GENESIS_HASH, Run, Seal
from runs_app.verification import verify

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="1", key_name="ledger")


def started(count: int) -> list[str]:
    ids = []
    for _ in range(count):
        outcome = dispatch("guide_start", {"flow_id": "refund_request"}, AGENT)
        assert not outcome.is_error, outcome.payload
        ids.append(str(outcome.payload["run_id"]))
    return ids


@pytest.mark.django_db
def test_a_seal_leaves_out_what_is_younger_than_its_margin() -> None:
    [run_id] = started(1)
    now = timezone.now()

    empty = ledger.seal(now=now, margin=60)  # everything is younger than a minute
    block = ledger.seal(now=now + timedelta(seconds=61), margin=60)

    assert empty is not None and (empty.runs, empty.audit_ids) == ([], [])
    assert (empty.seq, empty.prev_hash, empty.since) == (1, GENESIS_HASH, ledger.LEDGER_START)
    assert block is not None
    assert (block.seq, block.prev_hash, block.since) == (2, empty.hash, empty.until)
    assert block.until == now + timedelta(seconds=1)
    run = Run.objects.get(public_id=run_id)
    assert block.runs == [[run_id, 1, run.head_hash]]
    assert block.audit_ids == [[r.pk, r.pk] for r in AuditRecord.objects.all()]
    assert len(block.audit_marks) == ledger.MARK_LENGTH
    assert block.hash == ledger.seal_hash(block)


@pytest.mark.django_db
def test_a_window_holding_nothing_is_sealed_so_the_ledgers_end_keeps_up_with_time() -> None:
    """An end that keeps up is what makes a ledger whose last seals were deleted (or that
    no sealer extends) show: its end is then older than the sealing window."""
    now = timezone.now()

    empty = ledger.seal(now=now, margin=0)
    assert empty is not None and empty.until == now and (empty.runs, empty.audit_marks) == ([], "")
    assert ledger.seal(now=now, margin=0) is None  # no time left to seal
    [run_id] = started(1)
    block = ledger.seal(now=timezone.now(), margin=0)

    assert block is not None and block.since == now
    assert [r[0] for r in block.runs] == [run_id]


@pytest.mark.django_db
def test_sealing_all_reads_the_clock_once(settings: object) -> None:
    """Each block read the clock anew, so with nothing left to seal there was always a
    moment more: sealing never ended."""
    assert ledger.seal_all(margin=0) == 1
    assert ledger.seal_all(margin=0) == 1  # the moments since, in one block


@pytest.mark.django_db
def test_a_busy_window_is_sealed_in_blocks_of_bounded_size_that_follow_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger, "MAX_SEALED_RUNS", 2)
    monkeypatch.setattr(ledger, "MAX_SEALED_RECORDS", 3)
    ids = started(7)

    written = ledger.seal_all(now=timezone.now(), margin=0)

    blocks = list(Seal.objects.order_by("seq"))
    assert written == len(blocks) >= 4
    assert all(len(b.runs) <= 2 and len(b.audit_marks) <= 3 * ledger.MARK_LENGTH for b in blocks)
    assert [r[0] for b in blocks for r in b.runs] == ids
    assert all(
        b.since == a.until and b.prev_hash == a.hash
        for a, b in zip(blocks, blocks[1:], strict=False)
    )
    assert verify().problems == []


@pytest.mark.django_db
def test_a_window_with_more_audit_records_than_a_block_holds_is_cut_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger, "MAX_SEALED_RECORDS", 2)
    for _ in range(5):  # refused calls: audit records, no run
        assert dispatch("guide_status", {"run_id": "r_none"}, AGENT).is_error
    records = list(AuditRecord.objects.order_by("id").values_list("id", flat=True))

    ledger.seal_all(now=timezone.now(), margin=0)

    blocks = list(Seal.objects.order_by("seq"))
    assert [b.audit_ids for b in blocks] == [
        [[records[0], records[1]]],
        [[records[2], records[3]]],
        [[records[4], records[4]]],
    ]
    assert verify().problems == []


@pytest.mark.django_db(transaction=True)
def test_sealers_racing_for_the_same_blocks_write_one_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four sealers (as four instances would) seal the same backlog at once: each block is
    written once, the blocks follow each other, every run is listed once."""
    monkeypatch.setattr(ledger, "MAX_SEALED_RUNS", 3)
    ids = started(12)
    now = timezone.now()
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def sealer() -> None:
        try:
            barrier.wait()
            ledger.seal_all(now=now, margin=0)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=sealer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    ledger.seal_all(now=now, margin=0)  # what a sealer that lost its last race left

    assert errors == []
    blocks = list(Seal.objects.order_by("seq"))
    assert [b.seq for b in blocks] == list(range(1, len(blocks) + 1))
    assert [r[0] for b in blocks for r in b.runs] == ids
    assert verify().problems == []


@pytest.mark.django_db
def test_a_run_that_changes_again_is_listed_again_at_its_new_head() -> None:
    [run_id] = started(1)
    ledger.seal(now=timezone.now(), margin=0)
    outcome = dispatch(
        "guide_answer", {"run_id": run_id, "values": {"order_number": "A00118"}}, AGENT
    )
    assert not outcome.is_error
    second = ledger.seal(now=timezone.now(), margin=0)

    run = Run.objects.get(public_id=run_id)
    assert second is not None and second.runs == [[run_id, 2, run.head_hash]]
    assert verify().problems == []


def test_every_field_of_an_audit_record_is_sealed() -> None:
    """A new field of AuditRecord must be a new seal format (AUDIT_FIELDS), not unbound."""
    fields = {f.attname for f in AuditRecord._meta.concrete_fields}

    assert set(ledger.AUDIT_FIELDS) == fields


def test_an_audit_records_mark_covers_every_field() -> None:
    row: list[Any] = [
        7,
        timezone.now(),
        "k",
        "key:k",
        "c/1",
        "127.0.0.1",
        "t",
        "r_x",
        "ok",
        200,
        1.5,
        1,
    ]
    marks = set()
    for i in range(len(row)):
        changed = list(row)
        changed[i] = changed[i] + timedelta(microseconds=1) if i == 1 else f"{changed[i]}!"
        marks.add(ledger.audit_mark(changed))

    assert len(marks | {ledger.audit_mark(row)}) == len(row) + 1
