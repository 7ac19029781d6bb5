"""Reads of runs. ``run_get`` is the one place that decides whether a caller may see a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flows_app.domain import engine
from flows_app.domain.capture import RecordedStep
from flows_app.domain.errors import Refusal
from flows_app.domain.model import Flow
from flows_app.domain.names import closest
from flows_app.domain.state import RunState
from flows_app.selectors import flow_of_version, flow_summary
from runs_app.callers import Caller
from runs_app.chain import iso
from runs_app.models import Run, Step

# How many of the caller's recent runs a "run not found" looks through for candidates.
RECENT_RUNS_FOR_CANDIDATES = 200


def run_get(caller: Caller, run_id: str) -> Run:
    """The run ``run_id`` as ``caller`` may see it. Raises Refusal ("run not found")."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        own = Run.objects.filter(owner=caller.key).order_by("-updated_at")
        recent = list(own.values_list("public_id", flat=True)[:RECENT_RUNS_FOR_CANDIDATES])
        raise Refusal(
            "run not found",
            f"no run has id {run_id!r}",
            "Check the run_id from guide_start's result, or start a new run with guide_start.",
            candidates=closest(run_id, recent),
        )
    return run


def run_flow(run: Run) -> Flow:
    """The exact flow content the run started on."""
    return flow_of_version(run.flow_version)


def run_state(run: Run) -> RunState:
    return RunState.from_dict(run.engine_state)


def run_status(*, caller: Caller, run_id: str) -> dict[str, Any]:
    """guide_status: where the run is, how it got there, and what to do now.

    Raises Refusal for a run the caller cannot see.
    """
    run = run_get(caller, run_id)
    flow = run_flow(run)
    state = run_state(run)
    status: dict[str, Any] = {
        "run_id": run.public_id,
        "flow": flow_summary(flow),
        "state": state.state,
    }
    node = flow.nodes.get(state.node) if state.node else None
    if node is not None:
        status["node"] = engine.node_view(flow, node, state)
    status["path"] = [entry.to_dict() for entry in state.path]
    # In the flow's own order (the order of index), whatever order they were given in.
    status["values"] = {k: state.values[k] for k in flow.value_keys if k in state.values}
    if state.outcome is not None or state.folded:
        status["outcome"] = state.outcome
    if state.handoff:
        status["handoff"] = state.handoff
    if run.ref:
        status["ref"] = run.ref
    status["started_at"] = iso(run.started_at)
    status["updated_at"] = iso(run.updated_at)
    status["next"] = engine.directive(flow, state)
    return status


def last_answer_at(run: Run, node: str) -> Step | None:
    """The run's most recent guide_answer given while it waited at ``node``."""
    return run.steps.filter(tool="guide_answer", node_before=node).order_by("-seq").first()


@dataclass(frozen=True)
class RunRecording:
    """A run as it was recorded: its pinned flow version and every accepted call."""

    run_id: str
    flow_id: str
    content_hash: str  # the flow version the run is pinned to
    version: str  # that version's own ``version`` key ("" when none)
    ref: str
    state: str
    started_at: str
    steps: tuple[RecordedStep, ...]


def run_recording(*, run_id: str) -> RunRecording:
    """A run and its steps, for operators (the ``capture`` command, the admin): no caller
    is involved, so no ownership applies. Raises Refusal ("run not found")."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        recent = Run.objects.order_by("-updated_at").values_list("public_id", flat=True)
        raise Refusal(
            "run not found",
            f"no run has id {run_id!r}",
            "Copy the run id from the admin's run list or from guide_start's result.",
            candidates=closest(run_id, list(recent[:RECENT_RUNS_FOR_CANDIDATES])),
        )
    steps = tuple(
        RecordedStep(tool=step.tool, input=step.input, result=step.result)
        for step in run.steps.order_by("seq")
    )
    return RunRecording(
        run_id=run.public_id,
        flow_id=run.flow_id,
        content_hash=run.flow_version.content_hash,
        version=run.flow_version.version,
        ref=run.ref,
        state=run.state,
        started_at=iso(run.started_at),
        steps=steps,
    )
