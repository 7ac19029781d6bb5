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
5. without run ids, the ledger itself: the seals' chain and every sealed audit record.

An erased run (ADR 0086) cannot be replayed: its chain and fields are checked by
``erasure.erased_run_problems`` instead of 1, 2 and 4, and a note says who erased it,
when and why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from flowcore.common.errors import Refusal
from flowcore.run.replay import replay_differences
from flowcore.run.results import MOVE
from flows_app.selectors import flow_of_hash
from runs_app import selectors
from runs_app.chain import run_differences, steps_verify
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


def verify(run_ids: Sequence[str] | None = None, *, since: Heads | None = None) -> Verdict:
    """Check the runs ``run_ids`` (with their lines in the ledger), or without them every
    run, the ledger and the audit records; with ``since``, also that nothing recorded
    before those heads changed."""
    verdict = Verdict()
    if run_ids:
        listings, until = ledger_listings()
        runs: Iterator[tuple[str, Run | None]] = ((i, _run(i)) for i in run_ids)
    else:
        check = verdict.ledger = ledger_check(erased_audit_records())
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
            problems = run_problems(run, listings.get(run_id, ()), until, pinned, since)
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
    return verdict


def run_problems(
    run: Run,
    listings: Sequence[Listing] = (),
    until: datetime | None = None,
    pinned: tuple[int, str] | None = None,
    since: Heads | None = None,
) -> list[str]:
    """Everything wrong with ``run``'s stored history; empty when it verifies."""
    steps: list[Step] = list(run.steps.order_by("seq"))
    if is_erased(run, steps):
        problems = erased_run_problems(run, steps, run.flow_version.content_hash)
        problems += run_ledger_problems(run, steps, listings, until)
        if pinned is not None and since is not None:
            problems += run_heads_problems(steps, pinned, since.written_at)
        return problems
    problems = []
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
