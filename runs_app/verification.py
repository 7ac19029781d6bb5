"""What ``verify`` checks (ADR 0067), for each run and for the ledger:

1. the run's hash chain (``chain.steps_verify``): no step edited, removed or forged;
2. the run's fields against what its steps recorded (``chain.run_differences``): owner,
   ``ref``, ``request_id``, close reason, times, flow and version;
3. the run against the seals that listed it and, with heads stored elsewhere, against
   those heads (``ledger``): no run deleted, no history rewritten;
4. the run's replay (``flowcore.run.replay``): its steps' inputs, applied again
   through the engine on its pinned flow version (from a ``move`` step on, the version it
   moved to, ADR 0083), give back each stored result and the run's state, node, outcome
   and engine state;
5. the events the run's steps wrote (``event_problems``): each at the time of a step of
   the run, saying what that step did;
6. without run ids, the ledger itself: the seals' chain, every sealed audit record, and
   that nothing older than the sealing window is left out of it.

An erased run (ADR 0086) cannot be replayed: its chain and fields are checked by
``erasure.erased_run_problems`` instead of 1, 2 and 4, and a note says who erased it,
when and why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from events_app.models import Event
from flowcore.common.errors import Refusal
from flowcore.run.replay import replay_differences
from flowcore.run.results import MOVE
from flows_app.selectors import flow_of_hash
from runs_app import selectors
from runs_app.chain import iso, run_differences, steps_verify
from runs_app.erasure import erased_audit_records, erased_run_problems, is_erased, run_erasure
from runs_app.ledger import (
    Heads,
    LedgerCheck,
    Listing,
    heads_problems,
    ledger_check,
    run_heads_problems,
    run_ledger_problems,
)
from runs_app.models import Run, Seal, Step


@dataclass
class Verdict:
    """Every problem found (``"SUBJECT: what"``, the subject a run id, ``seal N`` or
    ``audit record N``), notes that are not problems, and what was checked."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: int = 0
    erased: int = 0  # runs checked as erased
    ledger: LedgerCheck | None = None

    @property
    def subjects(self) -> list[str]:
        """Each subject that has a problem, once, in order."""
        return list(dict.fromkeys(line.split(": ", 1)[0] for line in self.problems))


def verify(
    run_ids: Sequence[str] | None = None,
    *,
    since: Heads | None = None,
    now: datetime | None = None,
) -> Verdict:
    """Check the runs ``run_ids`` (with their lines in the ledger), or without them every
    run, the ledger and the audit records, as of ``now`` (default: the clock's); with
    ``since``, also that nothing recorded before those heads changed."""
    verdict = Verdict()
    events = _run_events(run_ids)
    if run_ids:
        listings, until = ledger_listings()
        runs: Iterator[tuple[str, Run | None]] = ((i, _run(i)) for i in run_ids)
    else:
        check = verdict.ledger = ledger_check(erased_audit_records(), now=now)
        verdict.problems += check.problems
        verdict.notes += check.notes
        listings, until = check.listings, check.until
        if since is not None:
            verdict.problems += heads_problems(since, check)
        runs = ((run.public_id, run) for run in _all_runs())
    seen: set[str] = set()
    for run_id, run in runs:
        seen.add(run_id)
        verdict.runs += 1
        if run is None:
            problems = ["no such run"]
            if run_id in listings:
                problems.append(f"deleted (listed by seal {listings[run_id][0].seq})")
        else:
            pinned = since.runs.get(run_id) if since is not None else None
            problems = run_problems(
                run, listings.get(run_id, ()), until, pinned, since, events.pop(run_id, ())
            )
            erasure = run_erasure(run)
            if erasure is not None:
                verdict.erased += 1
                verdict.notes.append(f"{run_id}: {erasure.line()}")
        verdict.problems += [f"{run_id}: {problem}" for problem in problems]
    if not run_ids:
        for run_id, listed in listings.items():
            if run_id not in seen:
                verdict.problems.append(f"{run_id}: deleted (listed by seal {listed[0].seq})")
                seen.add(run_id)
        if since is not None:
            verdict.problems += [
                f"{run_id}: deleted since the heads of {since.written_at}"
                for run_id in since.runs
                if run_id not in seen
            ]
        verdict.problems += [
            f"event {event.message_id}: {event.kind} of {run_id}, which does not exist"
            for run_id, orphans in events.items()
            for event in orphans
        ]
    return verdict


def run_problems(
    run: Run,
    listings: Sequence[Listing] = (),
    until: datetime | None = None,
    pinned: tuple[int, str] | None = None,
    since: Heads | None = None,
    events: Sequence[Event] = (),
) -> list[str]:
    """Everything wrong with ``run``'s stored history; empty when it verifies."""
    steps: list[Step] = list(run.steps.order_by("seq"))
    erased = is_erased(run, steps)
    problems = event_problems(run, steps, events, erased=erased)
    if erased:
        problems += erased_run_problems(run, steps, run.flow_version.content_hash)
        problems += run_ledger_problems(run, steps, listings, until)
        if pinned is not None and since is not None:
            problems += run_heads_problems(steps, pinned, since.written_at)
        return problems
    broken = steps_verify(run, steps)
    if broken is not None:
        problems.append(f"the hash chain breaks at step {broken}")
    problems += run_differences(run, steps, run.flow_version.content_hash)
    problems += run_ledger_problems(run, steps, listings, until)
    if pinned is not None and since is not None:
        problems += run_heads_problems(steps, pinned, since.written_at)
    moved_from = next((str(s.input.get("from")) for s in steps if s.tool == MOVE), None)
    try:
        flow = selectors.run_flow(run) if moved_from is None else flow_of_hash(moved_from)
    except Refusal as refusal:
        return [*problems, f"its flow version cannot be replayed ({refusal.error})"]
    stored, history = selectors.run_history(run, steps)
    return problems + replay_differences(flow, stored, history, flow_of_hash)


# The state a run is in once an event of this kind was recorded, when the kind says it.
_STATE_OF = {"run.stalled": "stalled", "run.completed": "completed", "run.closed": "closed"}
# What an event keeps of an erased run (``events_app.services.events_erase_runs``).
_ERASED_KEYS = {"run_id", "flow", "state", "node", "outcome", "url", "erased"}


def event_problems(
    run: Run, steps: Sequence[Step], events: Sequence[Event], *, erased: bool
) -> list[str]:
    """How the events of ``run`` (what webhooks were or will be sent) differ from the steps
    that wrote them: each was written with a step, at its time, and says the state, node,
    outcome and reason that step left. An erased run's events keep none of its words."""
    by_time = {step.created_at: step for step in steps}
    problems = []
    for event in events:
        where = f"event {event.message_id}"
        step = by_time.get(event.created_at)
        if step is None:
            problems.append(f"{where}: {event.kind} at {iso(event.created_at)}, no step's time")
            continue
        state = result_state(step)
        if _STATE_OF.get(event.kind, state) != state:
            problems.append(f"{where}: {event.kind}, but step {step.seq} left the run {state}")
        said = {
            "run_id": (event.data.get("run_id"), run.public_id),
            "flow": ((event.data.get("flow") or {}).get("id"), run.flow_id),
            "state": (event.data.get("state"), state),
            "node": (event.data.get("node"), step.node_after or None),
        }
        problems += [
            f"{where}: its {key} differs from step {step.seq}"
            for key, (got, expected) in said.items()
            if got != expected
        ]
        if erased:  # its steps' results are gone with its words
            kept = set(event.data) - _ERASED_KEYS
            if kept or event.values is not None or not event.data.get("erased"):
                problems.append(f"{where}: holds what the erased run's people said")
            continue
        result = step.result
        if state == "completed" and event.data.get("outcome") != result.get("outcome"):
            problems.append(f"{where}: its outcome differs from step {step.seq}")
        if state in ("stalled", "closed") and event.data.get("reason") != result.get("reason"):
            problems.append(f"{where}: its reason differs from step {step.seq}")
    return problems


def result_state(step: Step) -> str:
    """The run's state once ``step`` was taken, as its status says."""
    return step.status if step.status in ("stalled", "completed", "closed") else "active"


def _run_events(run_ids: Sequence[str] | None) -> dict[str, list[Event]]:
    """The events of runs (of ``run_ids``, or of every run), by run id."""
    events = Event.objects.filter(kind__startswith="run.").order_by("id")
    if run_ids:
        events = events.filter(data__run_id__in=list(run_ids))
    found: dict[str, list[Event]] = {}
    for event in events.iterator(chunk_size=500):
        found.setdefault(str(event.data.get("run_id")), []).append(event)
    return found


def ledger_listings() -> tuple[dict[str, list[Listing]], datetime | None]:
    """Each run's lines in the seals, and where the sealed time ends (no other check)."""
    listings: dict[str, list[Listing]] = {}
    until: datetime | None = None
    for seq, runs, block_until in Seal.objects.order_by("seq").values_list("seq", "runs", "until"):
        for public_id, revision, head_hash in runs:
            listings.setdefault(public_id, []).append(Listing(seq, revision, head_hash))
        until = block_until
    return listings, until


def _run(run_id: str) -> Run | None:
    return Run.objects.select_related("flow_version").filter(public_id=run_id).first()


def _all_runs() -> Iterator[Run]:
    return Run.objects.select_related("flow_version").order_by("id").iterator(chunk_size=200)
