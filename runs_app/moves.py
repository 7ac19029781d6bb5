"""Moving a flow's open runs onto its live version (``moveruns``, the admin's action).

The plan of each run is the core's (``flowcore.run.migration.plan_move``); this module
reads and locks each run, records its ``move`` step, and reports what it did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils import timezone

from flowcore.checks.guarantees import path_refusal
from flowcore.flow.model import Flow
from flowcore.run.migration import MovePlan, plan_move
from flowcore.run.results import MOVE, moved_result
from flowcore.run.state import RunState
from flows_app.selectors import flow_guarantees, flow_live
from flows_app.services import flow_version_pin
from runs_app import step_store
from runs_app.models import OPEN_STATES, Run
from runs_app.recording import act_audit, step_record, write_transaction
from runs_app.selectors import run_history, run_state


@dataclass(frozen=True)
class MoveReport:
    """What ``runs_move`` did (or, in a dry run, would do): one plan per run considered."""

    flow_id: str
    live: str  # the live version's content hash
    plans: list[MovePlan]
    dry_run: bool

    @property
    def moving(self) -> list[MovePlan]:
        return [plan for plan in self.plans if plan.moves]

    def lines(self) -> list[str]:
        """One line per run, then the summary."""
        return [plan.line() for plan in self.plans] + [self.summary()]

    def summary(self) -> str:
        moving, staying = len(self.moving), len(self.plans) - len(self.moving)
        if not self.plans:
            return f"no active or stalled run of {self.flow_id} is on an older version"
        verb = ("would move", "would stay") if self.dry_run else ("moved", "stayed")
        tail = " (dry run: nothing changed)" if self.dry_run else ""
        return (
            f"{len(self.plans)} run{'s' if len(self.plans) != 1 else ''} of {self.flow_id} "
            f"on older versions: {moving} {verb[0]} to revision {self.live[:12]}, "
            f"{staying} {verb[1]}{tail}"
        )


def runs_move(
    *, flow_id: str, by: str, run_ids: Sequence[str] = (), dry_run: bool = False
) -> MoveReport:
    """Move the active and stalled runs of ``flow_id`` pinned to older versions (or only
    ``run_ids``) onto its live version, each that can (``migration.plan_move``): one
    ``move`` step in its chain (old and new content hash, ``by``, the time) and one audit
    record each. ``dry_run`` plans and changes nothing.

    Each run is decided under its lock, in a transaction of its own, from its steps as
    they are then: an answer that commits first is replayed with the others, one that
    comes after applies to the moved run; never half (every step locks the same row). A
    named run that is not an open run of an older version stays, with why.

    Raises NotFound for a flow that is not live.
    """
    flow = flow_live(flow_id)
    refuse_path = path_refusal(flow, flow_guarantees(flow))
    older = (
        Run.objects.filter(flow_id=flow.id, state__in=OPEN_STATES)
        .exclude(flow_version__content_hash=flow.content_hash)
        .order_by("started_at", "id")
    )
    plans: list[MovePlan] = []
    if run_ids:
        found = set(older.filter(public_id__in=list(run_ids)).values_list("public_id", flat=True))
        chosen = [run_id for run_id in dict.fromkeys(run_ids)]
    else:
        chosen = list(older.values_list("public_id", flat=True))
        found = set(chosen)
    for run_id in chosen:
        if run_id not in found:
            plans.append(MovePlan(run_id, None, _not_movable(flow_id, flow.content_hash, run_id)))
            continue
        if dry_run:
            run = Run.objects.select_related("flow_version").get(public_id=run_id)
            plans.append(_plan(run, flow, refuse_path))
        else:
            plans.append(_move_one(run_id, flow, refuse_path, by))
    return MoveReport(flow.id, flow.content_hash, plans, dry_run)


PathRefusal = Callable[[RunState], str | None] | None


def _plan(run: Run, flow: Flow, refuse_path: PathRefusal) -> MovePlan:
    stored, steps = run_history(run)
    return plan_move(flow, run.public_id, run_state(run), steps, refuse_path)


def _move_one(
    run_id: str,
    flow: Flow,
    refuse_path: PathRefusal,
    by: str,
) -> MovePlan:
    with write_transaction():
        run = step_store.run_locked(run_id, step_store.Visibility(every=True))
        if run is None or run.state not in OPEN_STATES:
            state = "gone" if run is None else run.state
            return MovePlan(run_id, None, f"it is {state} now: only active and stalled runs move")
        old = run.flow_version.content_hash
        if old == flow.content_hash:
            return MovePlan(run_id, None, "it is on the live version already")
        plan = _plan(run, flow, refuse_path)
        if plan.state is None:
            return plan
        now = timezone.now()
        run.flow_version = flow_version_pin(flow=flow, now=now)
        run.moved_from = old
        result = moved_result(
            run.public_id,
            old=old,
            new=flow.content_hash,
            state=plan.state.state,
            node=plan.state.node or "",
            replayed=plan.replayed,
        )
        step_record(
            run,
            by,
            plan.state,
            flow=None,
            tool=MOVE,
            call={"from": old, "to": flow.content_hash},
            result=result,
            node_before=run.node,
            now=now,
            columns=("flow_version", "moved_from"),
        )
        act_audit("move run", "moved", caller=by, run_id=run.public_id)
        return plan


def _not_movable(flow_id: str, live: str, run_id: str) -> str:
    """Why a run named for a move is not one of the runs that can move."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        return "no such run"
    if run.flow_id != flow_id:
        return f"it is a run of {run.flow_id}, not {flow_id}"
    if run.flow_version.content_hash == live:
        return "it is on the live version already"
    return f"it is {run.state}: only active and stalled runs move"
