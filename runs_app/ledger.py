"""The ledger (ADR 0067): runs and audit records sealed in chained blocks, and the heads an
operator stores elsewhere.

A **seal** covers a window of time [since, until) that ends ``GUIDEPOST_SEAL_MARGIN``
seconds before it is written, longer than any transaction lasts (and than the clocks of
two instances differ), so no commit can still add to it. It lists every run whose last
change falls in the window (id, revision, head hash) and holds a mark (a digest) of each
audit record of the window; it hashes that content and the previous seal's hash. Seals
are written by ``serve`` (a thread per instance, every ``GUIDEPOST_SEAL_INTERVAL``
seconds) and by ``verify --heads``, never on a call's path: a step costs no statement
more. Two sealers racing for the same block: the unique ``seq`` keeps the first.

What the ledger proves: a run listed by a seal still has that step with that hash (no
deleted run, no rewritten history), a run whose last change is sealed is at the revision
the seal lists, and each sealed audit record is unchanged (or its window was pruned by
retention). What it cannot: anything in the window not yet sealed; and, without heads
stored elsewhere, a forger who rewrites the seals too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from access_app.models import AuditRecord
from flowcore.common.jsontext import canonical_json, compact_json
from flowcore.common.limits import MAX_SEALED_RECORDS, MAX_SEALED_RUNS
from runs_app.chain import iso
from runs_app.models import GENESIS_HASH, Run, Seal, Step

SEAL_FORMAT = 1
# Where the first seal's window starts: before any record guidepost ever wrote.
LEDGER_START = datetime(2000, 1, 1, tzinfo=UTC)
# An audit record's fields as a seal marks them, in this order (format 1). A new field of
# AuditRecord is a new seal format: tests/runs_app/test_ledger.py fails until it is one.
AUDIT_FIELDS = (
    "id",
    "at",
    "key_name",
    "caller",
    "client",
    "peer",
    "tool",
    "run_id",
    "outcome",
    "status",
    "duration_ms",
    "count",
)
MARK_LENGTH = 32  # hex digits of an audit record's mark (128 bits)
# A sealer may be a tick late: a record no seal covers this long past its sealing time is a
# failure, not "not sealed yet".
SEAL_LATE = timedelta(minutes=1)
HEADS_FORMAT = 1


# --- sealing --------------------------------------------------------------------------------


def seal(*, now: datetime | None = None, margin: float | None = None) -> Seal | None:
    """Seal the next block: from where the last seal's window ends to ``margin`` seconds
    (``GUIDEPOST_SEAL_MARGIN``) before ``now``, cut shorter to hold at most
    ``MAX_SEALED_RUNS`` runs and ``MAX_SEALED_RECORDS`` audit records. None when there is
    no such window yet or another sealer wrote this block first.

    Reads outside a transaction (the window is final), then one INSERT.
    """
    now = timezone.now() if now is None else now
    margin = settings.GUIDEPOST_SEAL_MARGIN if margin is None else margin
    head = Seal.objects.order_by("-seq").only("seq", "until", "hash").first()
    since = head.until if head is not None else LEDGER_START
    until = now - timedelta(seconds=margin)
    if until <= since:
        return None
    runs = _window(
        Run.objects.filter(updated_at__gte=since, updated_at__lt=until)
        .order_by("updated_at", "id")
        .values_list("updated_at", "public_id", "revision", "head_hash"),
        MAX_SEALED_RUNS,
        "updated_at",
    )
    if runs.cut is not None:
        until = runs.cut
    records = _window(
        AuditRecord.objects.filter(at__gte=since, at__lt=until)
        .order_by("at", "id")
        .values_list(*AUDIT_FIELDS),
        MAX_SEALED_RECORDS,
        "at",
        time_index=1,
    )
    if records.cut is not None:
        until = records.cut
    listed = [
        [public_id, rev, head_hash] for t, public_id, rev, head_hash in runs.rows if t < until
    ]
    marked = sorted(records.rows, key=lambda r: r[0])
    # An empty window is sealed too: the ledger's end then keeps up with time, so an end
    # left behind (its last seals deleted, or no sealer running) is found by ``verify``.
    block = Seal(
        seq=head.seq + 1 if head is not None else 1,
        format=SEAL_FORMAT,
        since=since,
        until=until,
        sealed_at=now,
        runs=listed,
        audit_ids=_ranges(r[0] for r in marked),
        audit_marks="".join(audit_mark(r) for r in marked),
        prev_hash=head.hash if head is not None else GENESIS_HASH,
    )
    block.hash = seal_hash(block)
    try:
        with transaction.atomic():
            block.save(force_insert=True)
    except IntegrityError:  # another sealer wrote this block first
        return None
    return block


def seal_all(*, now: datetime | None = None, margin: float | None = None) -> int:
    """Seal block after block up to ``margin`` before ``now`` (taken once: with the clock
    read anew, every block would leave a moment to seal); how many were written."""
    now = timezone.now() if now is None else now
    written = 0
    while seal(now=now, margin=margin) is not None:
        written += 1
    return written


@dataclass(frozen=True)
class _Rows:
    rows: list[tuple[Any, ...]]
    cut: datetime | None  # where the window must end to hold at most the limit


def _window(query: Any, limit: int, time_field: str, *, time_index: int = 0) -> _Rows:
    """The rows of ``query`` (ordered by their time), at most ``limit`` of them: past it,
    the window ends at the first time left out (every row of an earlier time kept)."""
    rows = list(query[: limit + 1])
    if len(rows) <= limit:
        return _Rows(rows, None)
    cut = rows[limit][time_index]
    kept = [r for r in rows if r[time_index] < cut]
    if not kept:  # more than ``limit`` rows share one microsecond: take them all
        kept = list(query.filter(**{time_field: cut}))
        cut = cut + timedelta(microseconds=1)
    return _Rows(kept, cut)


def audit_mark(row: Sequence[Any]) -> str:
    """An audit record's mark: SHA-256 over its ``AUDIT_FIELDS``, cut to 128 bits."""
    values = [iso(v) if isinstance(v, datetime) else v for v in row]
    digest = hashlib.sha256(canonical_json(values).encode("utf-8")).hexdigest()
    return digest[:MARK_LENGTH]


def seal_hash(block: Seal) -> str:
    content = [
        block.format,
        block.seq,
        block.prev_hash,
        iso(block.since),
        iso(block.until),
        iso(block.sealed_at),
        block.runs,
        block.audit_ids,
        block.audit_marks,
    ]
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def _ranges(ids: Iterable[int]) -> list[list[int]]:
    """
    >>> _ranges([1, 2, 3, 7, 9, 10])
    [[1, 3], [7, 7], [9, 10]]
    """
    ranges: list[list[int]] = []
    for i in ids:
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return ranges


def _ids(ranges: Iterable[Sequence[int]]) -> Iterator[int]:
    for first, last in ranges:
        yield from range(first, last + 1)


def audit_prune(*, before: datetime) -> int:
    """Delete the audit records of every sealed window that ended before ``before`` and
    mark its seal pruned (retention, issue 25 decides when): ``verify`` then reports those
    records as pruned by retention, not as deleted. How many records were deleted."""
    deleted = 0
    with transaction.atomic():
        for block in Seal.objects.filter(until__lte=before, pruned_at__isnull=True):
            deleted += AuditRecord.objects.filter(at__gte=block.since, at__lt=block.until).delete()[
                0
            ]
            Seal.objects.filter(pk=block.pk).update(pruned_at=timezone.now())
    return deleted


# --- checking --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """A seal's line for one run: the run was at ``revision``, with ``head_hash``."""

    seq: int
    revision: int
    head_hash: str


@dataclass
class LedgerCheck:
    """What ``ledger_check`` found: problems (one line each, naming the seal or the
    audit record), notes, and what the runs' checks need."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    listings: dict[str, list[Listing]] = field(default_factory=dict)
    hashes: dict[int, str] = field(default_factory=dict)  # each seal's stored hash
    until: datetime | None = None  # where the sealed time ends
    records: int = 0  # sealed audit records checked
    pruned: int = 0  # sealed audit records pruned by retention
    erased: int = 0  # sealed audit records whose caller's text an erasure removed
    unsealed: int = 0  # audit records not sealed yet

    @property
    def seals(self) -> int:
        return len(self.hashes)


def sealing_window() -> timedelta | None:
    """How long after a record is written a seal covers it at the latest: the margin, an
    interval, and a late tick. None when ``serve`` does not seal (an interval of 0)."""
    interval = settings.GUIDEPOST_SEAL_INTERVAL
    if not interval:
        return None
    return timedelta(seconds=settings.GUIDEPOST_SEAL_MARGIN + interval) + SEAL_LATE


def ledger_check(
    erased: Mapping[int, tuple[str, str]] | None = None, *, now: datetime | None = None
) -> LedgerCheck:
    """Check every seal: its chain, its window, and the audit records it marks; and that
    the ledger has no open end: no record older than the sealing window left out.
    ``erased``: the audit records an erasure changed, with their marks before and after
    (``erasure.erased_audit_records``)."""
    check = LedgerCheck()
    last: Seal | None = None
    prev_hash, expected_seq = GENESIS_HASH, 1
    for block in Seal.objects.order_by("seq").iterator(chunk_size=50):
        where = f"seal {block.seq}"
        if block.seq > expected_seq:
            missing = block.seq - expected_seq
            check.problems.append(
                f"{where}: seal {expected_seq} is missing"
                if missing == 1
                else f"{where}: seals {expected_seq}–{block.seq - 1} are missing"
            )
        elif block.prev_hash != prev_hash:
            check.problems.append(f"{where}: does not follow seal {block.seq - 1}")
        if block.hash != seal_hash(block):
            check.problems.append(f"{where}: its content differs from its hash")
        if check.until is not None and block.since != check.until:
            check.problems.append(
                f"{where}: its window starts at {iso(block.since)}, not where the seal before "
                f"it ends ({iso(check.until)})"
            )
        _check_records(block, check, erased or {})
        for public_id, revision, head_hash in block.runs:
            check.listings.setdefault(public_id, []).append(Listing(block.seq, revision, head_hash))
        check.hashes[block.seq] = block.hash
        prev_hash, expected_seq, check.until = block.hash, block.seq + 1, block.until
        last = block
    since = check.until or LEDGER_START
    check.unsealed = AuditRecord.objects.filter(at__gte=since).count()
    _check_the_end(check, last, since, timezone.now() if now is None else now)
    return check


def _check_the_end(check: LedgerCheck, last: Seal | None, since: datetime, now: datetime) -> None:
    """Deleting the last seals, then a run they listed, once passed ``verify``: what no
    seal covers was "not sealed yet", however old. A sealer seals every interval, empty
    windows too, so the ledger's end keeps up with time: an end older than the sealing
    window, with records after it, is a failure."""
    window = sealing_window()
    records = AuditRecord.objects.filter(at__gte=since)
    runs = Run.objects.filter(updated_at__gte=since)
    if window is None:
        if check.unsealed or runs.exists():
            check.notes.append(
                "ledger: serve does not seal (GUIDEPOST_SEAL_INTERVAL is 0): what no seal "
                "covers is proven by its run's chain alone"
            )
        return
    late = now - window
    if since >= late or not (check.unsealed or runs.exists()):
        return
    old_records, old_runs = records.filter(at__lt=late).count(), runs.filter(updated_at__lt=late)
    if old_records or old_runs.exists():
        found = f"{old_runs.count()} runs and {old_records} audit records written before it"
    elif last is not None:
        found = "later records"
    else:
        return  # nothing sealed yet, and nothing old enough to be
    ends = f"seal {last.seq}, whose window ends at {iso(since)}" if last else "no seal at all"
    check.problems.append(
        f"ledger: it ends with {ends}, longer ago than the sealing window "
        f"({_minutes(window)}), and {found} are in no seal: seals are missing from its end, "
        "or no sealer runs"
    )


def _minutes(window: timedelta) -> str:
    """
    >>> _minutes(timedelta(minutes=7)), _minutes(timedelta(seconds=90))
    ('7 min', '1.5 min')
    """
    return f"{window.total_seconds() / 60:g} min"


def _check_records(block: Seal, check: LedgerCheck, erased: Mapping[int, tuple[str, str]]) -> None:
    sealed = dict(
        zip(
            _ids(block.audit_ids),
            (
                block.audit_marks[i : i + MARK_LENGTH]
                for i in range(0, len(block.audit_marks), MARK_LENGTH)
            ),
            strict=False,
        )
    )
    found = {
        row[0]: audit_mark(row)
        for row in AuditRecord.objects.filter(at__gte=block.since, at__lt=block.until)
        .order_by("id")
        .values_list(*AUDIT_FIELDS)
        .iterator(chunk_size=2_000)
    }
    where = f"seal {block.seq}"
    pruned = 0
    for record_id, mark in sealed.items():
        stored = found.get(record_id)
        if stored is None:
            if block.pruned_at is not None:
                pruned += 1
            else:
                check.problems.append(f"audit record {record_id}: deleted (sealed in {where})")
        elif stored != mark and erased.get(record_id) == (mark, stored):
            check.erased += 1
        elif stored != mark:
            check.problems.append(f"audit record {record_id}: differs from {where}")
        else:
            check.records += 1
    for record_id in found.keys() - sealed.keys():
        check.problems.append(f"audit record {record_id}: not in {where}, which covers its time")
    if pruned and block.pruned_at is not None:
        check.pruned += pruned
        check.notes.append(
            f"{where}: {pruned} audit records pruned by retention at {iso(block.pruned_at)}"
        )


def run_ledger_problems(
    run: Run, steps: Sequence[Step], listings: Sequence[Listing], until: datetime | None
) -> list[str]:
    """How ``run`` differs from what the seals listed of it (``listings``, in order);
    ``until`` is where the sealed time ends."""
    hashes = {step.seq: step.hash for step in steps}
    problems = []
    for listing in listings:
        stored = hashes.get(listing.revision)
        if stored is None:
            problems.append(
                f"step {listing.revision} is missing; seal {listing.seq} lists the run at it"
            )
        elif stored != listing.head_hash:
            problems.append(f"step {listing.revision} differs from seal {listing.seq}")
    if until is not None and run.updated_at < until:
        last = listings[-1] if listings else None
        if last is None:
            problems.append(
                f"is not in the ledger, though its last change ({iso(run.updated_at)}) is sealed"
            )
        elif (last.revision, last.head_hash) != (run.revision, run.head_hash):
            problems.append(
                f"its last change ({iso(run.updated_at)}) is sealed, but seal {last.seq} lists "
                f"it at revision {last.revision}"
            )
    return problems


# --- heads -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heads:
    """What ``verify --heads`` wrote: the ledger's head, and each run not sealed at its
    head then (its revision and head hash)."""

    written_at: str
    seq: int
    hash: str
    runs: dict[str, tuple[int, str]]

    def to_json(self) -> str:
        return (
            compact_json(
                {
                    "guidepost_heads": HEADS_FORMAT,
                    "written_at": self.written_at,
                    "ledger": {"seq": self.seq, "hash": self.hash},
                    "runs": {k: list(v) for k, v in sorted(self.runs.items())},
                }
            )
            + "\n"
        )


def heads_now(now: datetime | None = None) -> Heads:
    """The current heads: the last seal, and every run changed since its window ends."""
    now = timezone.now() if now is None else now
    head = Seal.objects.order_by("-seq").only("seq", "until", "hash").first()
    since = head.until if head is not None else LEDGER_START
    runs = Run.objects.filter(updated_at__gte=since).values_list(
        "public_id", "revision", "head_hash"
    )
    return Heads(
        written_at=iso(now),
        seq=head.seq if head is not None else 0,
        hash=head.hash if head is not None else GENESIS_HASH,
        runs={public_id: (rev, head_hash) for public_id, rev, head_hash in runs},
    )


def heads_read(path: Path) -> Heads:
    """The heads written to ``path``. Raises ValueError when it is not a heads file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("guidepost_heads") != HEADS_FORMAT:
            raise ValueError(f"not a heads file of format {HEADS_FORMAT}")
        return Heads(
            written_at=str(data["written_at"]),
            seq=int(data["ledger"]["seq"]),
            hash=str(data["ledger"]["hash"]),
            runs={str(k): (int(v[0]), str(v[1])) for k, v in data["runs"].items()},
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"{path}: not a heads file ({exc})") from None


def heads_problems(heads: Heads, check: LedgerCheck) -> list[str]:
    """How the ledger differs from ``heads`` (its runs are checked with each run)."""
    if heads.seq == 0:
        return []
    last = max(check.hashes, default=0)
    if heads.seq > last:
        return [
            f"ledger: it ends at seal {last}, shorter than the heads of {heads.written_at}, "
            f"which name seal {heads.seq}: seals were deleted from its end"
        ]
    stored = check.hashes.get(heads.seq)
    if stored is None:
        return [f"seal {heads.seq}: missing; the heads of {heads.written_at} name it"]
    if stored != heads.hash:
        return [f"seal {heads.seq}: differs from the heads of {heads.written_at}"]
    return []


def run_heads_problems(
    steps: Sequence[Step], pinned: tuple[int, str], written_at: str
) -> list[str]:
    """How a run differs from its line in heads written at ``written_at``."""
    revision, head_hash = pinned
    stored = next((step.hash for step in steps if step.seq == revision), None)
    if stored is None:
        return [f"step {revision} is missing; the heads of {written_at} hold the run at it"]
    if stored != head_hash:
        return [f"step {revision} differs from the heads of {written_at}"]
    return []
