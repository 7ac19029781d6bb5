"""Erasure and retention: a run's values removed, its proof kept.

Erasing a run removes what people said in it and keeps what ``verify`` proves:

- each step's input and result are emptied; the step keeps its columns (tool, status,
  nodes before and after, time, caller, flow hash), its hash and, in ``Step.payload``,
  the digest its hash was computed over (``chain.payload_digest``), so its hash is
  still checked (steps of format 2; a step of format 1 hashed its values as they are:
  only its link to the step before is checked);
- the run loses its values (``engine_state``'s values, and an answer in the person's own
  words on its path; its path, counts, state, node and outcome stay, so the flow pages
  count it as before), ``ref`` (unless kept),
  ``request_id``, close reason and salt: with the salt gone, no digest left can be tested
  against guesses of a short value;
- its audit records lose what the caller sent (``client``) and its address (``peer``);
- webhook deliveries of the run lose their payloads (``webhook_deliveries_erase``);
- the erasure is a step of the run's chain (tool ``erase``): who, when, why, and the
  run's owner, state, outcome, flow and kept ``ref``, hashed without a key (the text is
  the operator's), with the marks of each audit record before and after it was erased.

``verify`` then proves the erased run's path, statuses, times and who acted, and reports
it as erased by whom, when and why (``erased_run_problems``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from access_app.models import AuditRecord
from events_app.services import events_erase_runs, events_prune
from flowcore.common.errors import InvalidInput, NotFound, Refusal, StepNotAllowed
from flowcore.common.limits import MAX_ERASE_REASON_LENGTH
from flowcore.common.text import shown
from flowcore.flow.model import OTHER, UNKNOWN, AskNode, Flow
from flowcore.run.state import PathEntry
from runs_app.chain import FORMAT_DIGESTS, digests_hash, iso, payload_digest
from runs_app.ledger import AUDIT_FIELDS, audit_mark, audit_prune, seal_all
from runs_app.models import GENESIS_HASH, Run, Step
from runs_app.recording import step_record
from runs_app.selectors import run_flow

ERASE = "erase"  # the erase step's tool
ERASED = "erased"  # what pages and the API show where values were
ENDED = (Run.State.COMPLETED, Run.State.CLOSED)
# Who erases by age (the erase step's caller).
RETENTION = "operator:retention"
# What an erased step keeps of its input and result.
ERASED_INPUT: dict[str, Any] = {}
ERASED_RESULT = "{}"


@dataclass(frozen=True)
class Erasure:
    """Who erased a run, when and why (its erase step)."""

    by: str
    at: datetime
    reason: str

    def line(self) -> str:
        return f"erased by {self.by} at {iso(self.at)}: {self.reason}"


# --- erasing -----------------------------------------------------------------------------------


def run_erase(*, run_id: str, reason: str, by: str, keep_ref: bool = False) -> bool:
    """Erase the values of the ended run ``run_id`` (see the module), recorded as an
    ``erase`` step made by ``by`` (``staff:NAME``, ``operator:…``) for ``reason``. False
    when the run was erased already (nothing changes).

    Raises NotFound for no such run, StepNotAllowed for a run still active or stalled
    (close it first: an erased run cannot go on), InvalidInput for an empty reason.
    """
    reason = " ".join(reason.split())
    if not reason:
        raise InvalidInput(
            "reason required",
            "an erasure needs a reason (it is recorded in the run's chain)",
            "Say why, e.g. --reason 'GDPR request, ticket 4411'.",
        )
    if len(reason) > MAX_ERASE_REASON_LENGTH:
        raise InvalidInput(
            "reason too long",
            f"the reason has {len(reason)} characters; at most {MAX_ERASE_REASON_LENGTH}",
            "Shorten the reason: the ticket that asked is enough.",
        )
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("flow_version")
            .filter(public_id=run_id)
            .first()
        )
        if run is None:
            raise NotFound(
                "run not found",
                f"no run has id {shown(run_id)}",
                "Copy the run id from the runs page or the admin's run list.",
            )
        if run.erased_at is not None:
            return False
        if run.state not in ENDED:
            raise StepNotAllowed(
                "run not ended",
                f"run {run.public_id} is {run.state}: only a completed or closed run is erased",
                "Close the run first (guide_close), then erase it; an erased run cannot go on.",
            )
        _erase(run, reason=reason, by=by, keep_ref=keep_ref, now=timezone.now())
    return True


def runs_erase_by_ref(
    *, ref: str, reason: str, by: str, keep_ref: bool = False
) -> tuple[list[str], list[str]]:
    """Erase every ended run whose ``ref`` is ``ref`` (how a request arrives: a ticket id).
    Returns the ids erased and the ids left because they are still active or stalled.
    Raises InvalidInput for an empty ref or reason."""
    if not ref:
        raise InvalidInput(
            "ref required", "no ref given", "Give the ref the runs were started with."
        )
    erased: list[str] = []
    open_runs: list[str] = []
    for public_id, state in (
        Run.objects.filter(ref=ref, erased_at__isnull=True)
        .order_by("started_at")
        .values_list("public_id", "state")
    ):
        if state not in ENDED:
            open_runs.append(public_id)
        elif run_erase(run_id=public_id, reason=reason, by=by, keep_ref=keep_ref):
            erased.append(public_id)
    return erased, open_runs


def _erase(run: Run, *, reason: str, by: str, keep_ref: bool, now: datetime) -> None:
    steps = list(run.steps.order_by("seq"))
    for step in steps:
        if step.format >= FORMAT_DIGESTS and run.salt:
            step.payload = payload_digest(step.input, step.result, run.salt)
        step.input = ERASED_INPUT
        step.result_text = ERASED_RESULT
    Step.objects.bulk_update(steps, ["input", "packed_result", "payload"])
    records = _audit_erase(run.public_id)
    given: dict[str, Any] = {
        "reason": reason,
        "flow_id": run.flow_id,
        "owner": run.owner,
        "state": str(run.state),
        "outcome": run.outcome,
    }
    if keep_ref and run.ref:
        given["ref"] = run.ref
    if records:
        given["audit"] = records
    state = dict(run.engine_state)
    state["values"] = {}
    state["stamps"] = {}
    state["path"] = _path_without_words(run, state.get("path") or [])
    run.engine_state = state
    run.ref = run.ref if keep_ref else ""
    run.request_id = ""
    run.close_reason = ""
    run.salt = ""
    run.erased_at = now
    # Hashed without a key: the salt goes, and what this step holds is the operator's.
    step_record(
        run,
        by,
        None,
        flow=None,
        tool=ERASE,
        call=given,
        result={"run_id": run.public_id, "status": ERASED},
        node_before=run.node,
        now=now,
        columns=("ref", "request_id", "close_reason", "salt", "erased_at"),
        keyed=False,
    )
    webhook_deliveries_erase([run.public_id])


def _path_without_words(run: Run, path: Sequence[Any]) -> list[list[str]]:
    """The run's path with each answer in the person's own words (one that went on by
    ``__other__``) replaced by ``__other__``: the edge it took and the flow pages' counts
    stay, the words go. Labels and ``__unknown__`` are the flow's own text and stay, as
    does a check's condition; the values a check read go."""
    try:
        flow: Flow | None = run_flow(run)
    except Refusal:
        flow = None
    kept = []
    for entry in map(PathEntry.from_stored, path):
        node = flow.nodes.get(entry.id) if flow is not None else None
        labels = node.accepts if isinstance(node, AskNode) else {}
        if entry.read is not None:
            kept.append(entry._replace(read=()).stored())
            continue
        if entry.value is not None and entry.value != UNKNOWN and entry.value not in labels:
            entry = entry._replace(value=OTHER)
        kept.append(entry.stored())
    return kept


def _audit_erase(run_id: str) -> list[list[object]]:
    """Blank what the run's audit records hold of the caller (``client``, ``peer``);
    ``[id, mark before, mark after]`` of each record changed (``ledger.audit_mark``), so
    ``verify`` tells a sealed record erased from one edited."""
    changed: list[list[object]] = []
    rows = (
        AuditRecord.objects.filter(run_id=run_id)
        .exclude(client="", peer="")
        .order_by("id")
        .values_list(*AUDIT_FIELDS)
    )
    client, peer = AUDIT_FIELDS.index("client"), AUDIT_FIELDS.index("peer")
    for row in rows:
        after = list(row)
        after[client] = after[peer] = ""
        changed.append([row[0], audit_mark(row), audit_mark(after)])
    if changed:
        AuditRecord.objects.filter(id__in=[c[0] for c in changed]).update(client="", peer="")
    return changed


def webhook_deliveries_erase(run_ids: Sequence[str]) -> int:
    """Erase what the events of the runs ``run_ids`` hold for webhooks (their values, ref,
    reasons and hand-over notes: ``events_app.services.events_erase_runs``); how many
    events changed. Called in the erasure's transaction. A delivery log keeps only
    statuses, times and the receiver's error, nothing a person said."""
    return events_erase_runs(run_ids)


def database_vacuum() -> str:
    """Rewrite the database so that no free page keeps erased text (what ``erase
    --vacuum`` and ``retention --vacuum`` do after erasing; docs/privacy.md). SQLite:
    ``VACUUM`` and a checkpoint that empties the write-ahead log. PostgreSQL: ``VACUUM
    FULL`` of the runs', steps' and audit records' tables (it locks them while it runs).
    What it did, in words. Must run outside a transaction."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("VACUUM")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return "the database file rewritten (VACUUM), its write-ahead log emptied"
        if connection.vendor == "postgresql":
            tables = [Run._meta.db_table, Step._meta.db_table, AuditRecord._meta.db_table]
            quote = connection.ops.quote_name
            for table in tables:
                cursor.execute(f"VACUUM FULL {quote(table)}")
            return f"{', '.join(tables)} rewritten (VACUUM FULL)"
    return f"nothing rewritten: no vacuum for {connection.vendor}"


# --- retention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retention:
    """What one pass of retention did."""

    runs: list[str]  # ids of the runs erased
    audit_records: int  # audit records deleted
    run_days: int | None
    audit_days: int | None
    events: int = 0  # events deleted, with their deliveries


def retention(*, now: datetime | None = None) -> Retention:
    """Erase the ended runs (completed, closed) that ended more than
    ``GUIDEPOST_RETENTION_DAYS`` days ago (and delete the events recorded before then, with
    their deliveries), and delete the audit records of the sealed
    windows that ended more than ``GUIDEPOST_AUDIT_RETENTION_DAYS`` ago (``ledger.
    audit_prune``; sealing first what can be sealed). Unset: that part keeps everything.
    Active and stalled runs are never erased by age."""
    now = timezone.now() if now is None else now
    run_days: int | None = settings.GUIDEPOST_RETENTION_DAYS
    audit_days: int | None = settings.GUIDEPOST_AUDIT_RETENTION_DAYS
    erased: list[str] = []
    events = 0
    if run_days is not None:
        erased = runs_erase_ended_before(
            now - timedelta(days=run_days),
            reason=f"retention: ended more than {run_days} days ago",
        )
        events = events_prune(before=now - timedelta(days=run_days))
    deleted = 0
    if audit_days is not None:
        seal_all(now=now)
        deleted = audit_prune(before=now - timedelta(days=audit_days))
    return Retention(erased, deleted, run_days, audit_days, events)


def runs_erase_ended_before(before: datetime, *, reason: str, by: str = RETENTION) -> list[str]:
    """Erase every ended run whose last change (its end) is before ``before``; their ids."""
    erased = []
    for public_id in (
        Run.objects.filter(state__in=ENDED, updated_at__lt=before, erased_at__isnull=True)
        .order_by("updated_at")
        .values_list("public_id", flat=True)
        .iterator(chunk_size=500)
    ):
        try:
            if run_erase(run_id=public_id, reason=reason, by=by):
                erased.append(public_id)
        except StepNotAllowed:  # reopened since it was listed: no longer ended
            continue
    return erased


# --- reading and verifying ----------------------------------------------------------------------


def run_erasure(run: Run, steps: Sequence[Step] | None = None) -> Erasure | None:
    """Who erased ``run``, when and why; None for a run not erased."""
    if run.erased_at is None:
        return None
    if steps is None:
        step = run.steps.filter(tool=ERASE).order_by("-seq").first()
    else:
        step = next((s for s in reversed(steps) if s.tool == ERASE), None)
    if step is None:
        return Erasure(by="", at=run.erased_at, reason="")
    return Erasure(by=step.caller, at=step.created_at, reason=str(step.input.get("reason", "")))


def step_erased(step: Step) -> bool:
    """Whether ``step``'s input and result were erased (its payload digest kept)."""
    return (
        bool(step.payload)
        and step.tool != ERASE
        or (step.input == ERASED_INPUT and step.result_text == ERASED_RESULT)
    )


def is_erased(run: Run, steps: Sequence[Step]) -> bool:
    """Whether ``verify`` checks ``run`` as an erased run: marked erased, or ending with
    an erase step (either alone is a problem ``erased_run_problems`` names)."""
    return run.erased_at is not None or bool(steps and steps[-1].tool == ERASE)


def erased_run_problems(run: Run, steps: Sequence[Step], content_hash: str) -> list[str]:
    """Everything wrong with the erased ``run``'s chain and fields (its replay cannot run:
    its inputs are gone). Checked: each step's link to the one before; the hash of each
    step of format 2 from its columns and kept payload digest, and that it holds no value;
    the erase step's hash from what it holds; the run's fields against its steps (start,
    end, erasure time, owner, state, outcome, node, flow, version, kept ref) and that it
    holds no value."""
    if not steps:
        return ["is marked erased, but has no steps"]
    erase = steps[-1]
    if erase.tool != ERASE:
        return ["is marked erased, but its last step is not an erase step"]
    problems: list[str] = []
    first_format = steps[0].format
    prev, broken = GENESIS_HASH, None
    for expected_seq, step in enumerate(steps, 1):
        if step.seq != expected_seq or step.prev_hash != prev:
            broken = step.seq
            break
        if step is erase:
            ok = step.format == FORMAT_DIGESTS and step.hash == digests_hash(
                step, run.public_id, payload_digest(step.input, step.result, "")
            )
        elif step.tool == ERASE:
            ok = False  # erased twice
        elif step.format != first_format:
            ok = False
        elif step.format >= FORMAT_DIGESTS:
            ok = bool(step.payload) and step.hash == digests_hash(step, run.public_id, step.payload)
        else:
            ok = True  # format 1 hashed its values: only its link is checked
        if not ok:
            broken = step.seq
            break
        if step is not erase and (step.input != ERASED_INPUT or step.result_text != ERASED_RESULT):
            problems.append(f"step {step.seq} still holds values")
        prev = step.hash
    if broken is not None:
        problems.insert(0, f"the hash chain breaks at step {broken}")
    elif prev != run.head_hash or len(steps) != run.revision:
        problems.insert(0, f"the hash chain breaks at step {len(steps) + 1}")
    given = erase.input
    before = steps[-2] if len(steps) > 1 else None
    bound: dict[str, tuple[object, object]] = {
        "started_at": (run.started_at, steps[0].created_at),
        "updated_at": (run.updated_at, erase.created_at),
        "erased_at": (run.erased_at, erase.created_at),
        "owner": (run.owner, given.get("owner")),
        "state": (run.state, given.get("state")),
        "outcome": (run.outcome, given.get("outcome")),
        "flow_id": (run.flow_id, given.get("flow_id")),
        "node": (run.node, erase.node_after),
    }
    if before is not None:
        bound["the node before the erasure"] = (erase.node_before, before.node_after)
    if first_format >= FORMAT_DIGESTS:
        bound["flow version"] = (content_hash, steps[0].flow_hash)
    problems += [
        f"{name} is {_shown(stored)}; its steps say {_shown(recorded)}"
        for name, (stored, recorded) in bound.items()
        if stored != recorded
    ]
    if run.ref != given.get("ref", ""):
        problems.append("ref differs from what the erase step recorded")
    if run.request_id or run.close_reason or run.salt:
        problems.append("still holds its request_id, close reason or salt")
    if (run.engine_state or {}).get("values"):
        problems.append("still holds values")
    return problems


def _shown(value: object) -> str:
    return repr(iso(value)) if isinstance(value, datetime) else repr(value)


def erased_audit_records() -> dict[int, tuple[str, str]]:
    """Each audit record an erasure changed: its mark before and after (what the erase
    steps recorded), for the ledger's check of sealed records."""
    erased: dict[int, tuple[str, str]] = {}
    for given in Step.objects.filter(tool=ERASE).values_list("input", flat=True):
        if isinstance(given, Mapping):
            for record_id, before, after in given.get("audit") or ():
                erased[int(record_id)] = (str(before), str(after))
    return erased
