"""Reads of runs. ``run_get`` is the one place that decides whether a caller may see a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from flows_app.domain import engine
from flows_app.domain.capture import RecordedStep
from flows_app.domain.errors import NotFound, Refusal
from flows_app.domain.model import Flow
from flows_app.domain.names import closest
from flows_app.domain.state import RunState
from flows_app.models import FlowVersion
from flows_app.selectors import flow_of_version, flow_summary
from runs_app.callers import Caller
from runs_app.chain import iso
from runs_app.models import Run, Step

# How many of the caller's recent runs a "run not found" looks through for candidates.
RECENT_RUNS_FOR_CANDIDATES = 200


def run_get(caller: Caller, run_id: str) -> Run:
    """The run ``run_id`` as ``caller`` may see it. Raises NotFound ("run not found")."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        own = Run.objects.filter(owner=caller.key).order_by("-updated_at")
        recent = list(own.values_list("public_id", flat=True)[:RECENT_RUNS_FOR_CANDIDATES])
        raise NotFound(
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


# --- lists and pages for people (the run pages and the JSON API) -------------------------------

RUNS_PER_PAGE = 50
MAX_RUNS_PER_PAGE = 200
# How far back the flow pages count runs, and at most how many runs they read to do it.
USAGE_DAYS = 30
USAGE_MAX_RUNS = 5000
RECENT_RUNS = 20

# The columns a run list shows: never the engine state nor the flow's source text.
_LIST_COLUMNS = (
    "public_id",
    "flow_id",
    "state",
    "node",
    "outcome",
    "ref",
    "owner",
    "revision",
    "started_at",
    "updated_at",
    "flow_version__title",
    "flow_version__version",
    "flow_version__content_hash",
)


@dataclass(frozen=True)
class RunFilters:
    """What a run list is narrowed to: a state, a flow, and a run id or ref to look for."""

    state: str | None = None
    flow_id: str | None = None
    q: str | None = None


@dataclass(frozen=True)
class RunsPage:
    items: list[Run]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def runs_filtered(filters: RunFilters) -> QuerySet[Run]:
    """Runs matching ``filters``, most recent activity first, with only the listed columns.

    A run's step count is its ``revision``: every accepted call appends exactly one
    step and bumps it (``steps_verify`` checks that they agree).
    """
    runs = Run.objects.select_related("flow_version").only(*_LIST_COLUMNS)
    if filters.state:
        runs = runs.filter(state=filters.state)
    if filters.flow_id:
        runs = runs.filter(flow_id=filters.flow_id)
    if filters.q:
        q = filters.q.strip()
        runs = runs.filter(Q(public_id__startswith=q) | Q(ref__icontains=q))
    return runs.order_by("-updated_at", "-id")


def runs_page(filters: RunFilters, *, page: int, per_page: int = RUNS_PER_PAGE) -> RunsPage:
    """One page of ``runs_filtered``: two queries (a count and the rows) for any page size.

    ``page`` past the last one gives an empty page; ``per_page`` is clamped to
    1..MAX_RUNS_PER_PAGE.
    """
    per_page = min(max(per_page, 1), MAX_RUNS_PER_PAGE)
    page = max(page, 1)
    runs = runs_filtered(filters)
    total = runs.count()
    start = (page - 1) * per_page
    items = list(runs[start : start + per_page]) if start < total else []
    return RunsPage(items=items, total=total, page=page, per_page=per_page)


def runs_stalled_count() -> int:
    """How many runs wait for a person now."""
    return Run.objects.filter(state=Run.State.STALLED).count()


def run_flow_ids() -> list[str]:
    """Every flow id some run or version was recorded for, for filters."""
    ids = FlowVersion.objects.order_by("flow_id").values_list("flow_id", flat=True).distinct()
    return list(ids)


def run_steps(run: Run, *, after: int = 0) -> list[Step]:
    """The run's steps after seq ``after``, in order (one query)."""
    return list(run.steps.filter(seq__gt=after).order_by("seq"))


def flow_runs_recent(flow_id: str, *, limit: int = RECENT_RUNS) -> list[Run]:
    return list(runs_filtered(RunFilters(flow_id=flow_id))[:limit])


@dataclass(frozen=True)
class UsageInputs:
    """What the flow pages aggregate: run states, answers rejected per node, and whether
    the window held more runs than were read."""

    states: list[RunState]
    rejected: list[tuple[str, str | None, int]]
    capped: bool


def flow_usage_inputs(
    flow_id: str, *, since: datetime, max_runs: int = USAGE_MAX_RUNS
) -> UsageInputs:
    """The states of the flow's runs started since ``since`` (newest first, at most
    ``max_runs``) and its unmatched answers grouped in the database: two queries."""
    raw = list(
        Run.objects.filter(flow_id=flow_id, started_at__gte=since)
        .order_by("-started_at")
        .values_list("engine_state", flat=True)[: max_runs + 1]
    )
    rejected = (
        Step.objects.filter(run__flow_id=flow_id, run__started_at__gte=since, status="unmatched")
        .values("node_after", "input__choice")
        .annotate(n=Count("id"))
        .order_by()
    )
    return UsageInputs(
        states=[RunState.from_dict(data) for data in raw[:max_runs]],
        rejected=[(r["node_after"], _label(r["input__choice"]), r["n"]) for r in rejected],
        capped=len(raw) > max_runs,
    )


def _label(choice: object) -> str | None:
    return choice if isinstance(choice, str) else None


def runs_by_flow(*, since: datetime) -> dict[str, tuple[int, int]]:
    """Per flow id: (runs started since ``since``, runs stalled now among them); one query."""
    rows = (
        Run.objects.filter(started_at__gte=since)
        .values("flow_id")
        .annotate(n=Count("id"), stalled=Count("id", filter=Q(state=Run.State.STALLED)))
        .order_by()
    )
    return {r["flow_id"]: (r["n"], r["stalled"]) for r in rows}


def run_counts_by_version(version_ids: Iterable[int]) -> dict[int, int]:
    """How many runs each flow version served (versions with none are absent)."""
    rows = (
        Run.objects.filter(flow_version_id__in=list(version_ids))
        .values("flow_version_id")
        .annotate(runs=Count("pk"))
        .values_list("flow_version_id", "runs")
        .order_by()
    )
    return dict(rows)


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
