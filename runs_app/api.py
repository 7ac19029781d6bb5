"""The JSON API's runs: a filtered list, one run with its path, values, node states and
steps, and a person resolving a stalled run. Mounted under /api/ by
``guidepost.api``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from pydantic import JsonValue

from access_app.web import ERRORS, ErrorOut, api_caller
from flowcore.common.limits import (
    MAX_ID_LENGTH,
    MAX_LABEL_LENGTH,
    MAX_RESOLVE_NOTE_LENGTH,
    MAX_RUN_QUERY_LENGTH,
    MAX_RUNS_PER_PAGE,
    RUNS_PER_PAGE,
)
from flowcore.drawing.run_view import NodeState, run_view, step_summary
from flowcore.flow.model import Value
from flowcore.run.personal import mask, masked_step, masked_values
from flowcore.run.state import Via
from runs_app import resolve, selectors
from runs_app.erasure import ERASED, run_erasure, step_erased
from runs_app.models import Run, Step
from runs_app.selectors import RunFilters

router = Router(tags=["runs"])

RunStateName = Literal["active", "completed", "stalled", "closed"]


class FlowVersionRef(Schema):
    id: str
    title: str
    version: str | None
    content_hash: str


class ErasureOut(Schema):
    """Who erased the run's values, when and why (ADR 0086)."""

    by: str
    at: datetime
    reason: str


class RunRowOut(Schema):
    run_id: str
    flow: FlowVersionRef
    state: RunStateName
    node: str | None = Field(description="where the run waits, stalled or ended")
    outcome: str | None
    ref: str | None
    owner: str = Field(description="the agent that started the run")
    step_count: int
    started_at: datetime
    updated_at: datetime
    stalled_at: datetime | None = Field(
        None, description="while the run waits for a person: when it stalled (the inbox's order)"
    )
    erased_at: datetime | None = Field(
        None,
        description="when the run's values were erased (its values, ref and reasons "
        "are gone; its path, statuses, times and who acted stay)",
    )


class RunListOut(Schema):
    items: list[RunRowOut]
    count: int
    page: int
    per_page: int
    pages: int


class RunFiltersIn(Schema):
    state: RunStateName | None = None
    flow: str | None = Field(None, max_length=MAX_ID_LENGTH)
    q: str | None = Field(
        None, max_length=MAX_RUN_QUERY_LENGTH, description="a run id (or its start) or a ref"
    )
    page: int = Field(1, ge=1)
    per_page: int = Field(RUNS_PER_PAGE, ge=1, le=MAX_RUNS_PER_PAGE)


class PathEntryOut(Schema):
    id: str
    kind: str
    via: Via
    value: str | None = None
    # A check's entry: the values its conditions read (None: the run had none); a
    # lookup's, the values it sent.
    read: dict[str, Value | None] | None = None


class StepInputOut(Schema):
    """A step's arguments as stored (arguments not given are absent)."""

    flow_id: str | None = None
    values: dict[str, JsonValue] | None = None
    ref: str | None = None
    choice: str | None = None
    to: str | None = None
    reason: str | None = None
    note: str | None = Field(None, description="a person's note with their answer (resolve)")
    erased: bool | None = Field(None, description="true when the step's input was erased")


class SlotOut(Schema):
    ask: str
    required: bool
    hint: str | None = None


class NodeOut(Schema):
    id: str
    kind: str
    say: str
    accepts: dict[str, str] | None = None
    slots: dict[str, SlotOut] | None = None
    outcome: str | None = None


class TellOut(Schema):
    id: str
    say: str


class IgnoredOut(Schema):
    key: str
    reason: str
    candidates: list[str] | None = None


class FoldStepOut(Schema):
    id: str
    kind: str
    say: str
    outcome: str | None = None
    branches: list[FoldBranchOut] | None = None


class FoldBranchOut(Schema):
    label: str
    when: str
    steps: list[FoldStepOut]


class CommonOut(Schema):
    id: str
    kind: str
    say: str


class FlowSummaryOut(Schema):
    id: str
    title: str
    version: str | int | None = None


class StepResultOut(Schema):
    """The result the agent received (spec §5), as it was recorded."""

    run_id: str | None = None
    status: str | None = None
    state: str | None = None
    next: str | None = Field(None, description="absent only on an erased step")
    erased: bool | None = Field(None, description="true when the step's result was erased")
    flow: FlowSummaryOut | None = None
    node: NodeOut | None = None
    tell: list[TellOut] | None = None
    skipped: list[str] | None = None
    ignored: list[IgnoredOut] | None = None
    outcome: str | None = None
    attempt: int | None = None
    max_unmatched: int | None = None
    rejected: str | None = None
    branches: list[FoldBranchOut] | None = None
    common: CommonOut | None = None
    reason: str | None = None
    handoff: str | None = None
    index: dict[str, str] | None = None
    repeated: bool | None = None


class StepOut(Schema):
    seq: int
    created_at: datetime
    tool: str
    input: StepInputOut
    status: str
    summary: str
    node_before: str | None
    node_after: str | None
    result: StepResultOut
    hash: str


class RunOut(RunRowOut):
    erasure: ErasureOut | None = Field(None, description="who erased the run, when and why")
    path: list[PathEntryOut]
    values: dict[str, Value]
    handoff: str | None
    close_reason: str | None
    node_states: dict[str, NodeState] = Field(
        description="every node of the pinned flow version and its state on this run"
    )
    steps: list[StepOut]


def _row(run: Run) -> RunRowOut:
    version = run.flow_version
    return RunRowOut(
        run_id=run.public_id,
        flow=FlowVersionRef(
            id=run.flow_id,
            title=version.title,
            version=version.version or None,
            content_hash=version.content_hash,
        ),
        state=run.state,  # type: ignore[arg-type]  # a Run.State value
        node=run.node or None,
        outcome=run.outcome or None,
        ref=run.ref or None,
        owner=run.owner,
        step_count=run.revision,
        started_at=run.started_at,
        updated_at=run.updated_at,
        stalled_at=run.stalled_at,
        erased_at=run.erased_at,
    )


def _step(step: Step, hidden: frozenset[str] = frozenset()) -> dict[str, object]:
    """A step as StepOut's input. Plain dicts, not schema instances: ninja reads a nested
    instance back field by field and it would lose which keys were set (a run's answer
    leaves out the keys a step's result lacks, as the agent saw it). ``hidden``: the
    personal keys to mask."""
    result = step.result
    given = step.input
    if hidden:
        given, result = masked_step(given, result, hidden, step.node_before)
    erased = step_erased(step)
    return {
        "seq": step.seq,
        "created_at": step.created_at,
        "tool": step.tool,
        "input": {"erased": True} if erased else given,
        "status": step.status,
        "summary": ERASED if erased else step_summary(step.tool, result),
        "node_before": step.node_before or None,
        "node_after": step.node_after or None,
        "result": {"status": step.status, "erased": True} if erased else result,
        "hash": step.hash,
    }


def _entry(entry: dict[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """A path entry, its value masked at a personal ask node (an ``__other__`` answer is
    the person's own words), and the personal values a check read masked."""
    if entry["id"] in hidden and "value" in entry:
        return {**entry, "value": mask(entry["value"])}
    if "read" in entry and hidden:
        return {**entry, "read": masked_values(entry["read"], hidden)}
    return entry


@router.get("/runs", response={200: RunListOut, **ERRORS}, summary="List runs")
def runs_list(request: HttpRequest, filters: Query[RunFiltersIn]) -> RunListOut:
    """Runs, most recent activity first; the same filters as the runs page. With an agent
    key, only the runs that key started."""
    caller = api_caller(request, "runs.view")
    page = selectors.runs_page(
        RunFilters(
            state=filters.state,
            flow_id=filters.flow,
            q=filters.q,
            owner=selectors.owner_scope(caller),
        ),
        page=filters.page,
        per_page=filters.per_page,
    )
    return RunListOut(
        items=[_row(run) for run in page.items],
        count=page.total,
        page=page.page,
        per_page=page.per_page,
        pages=page.pages,
    )


@router.get(
    "/runs/{run_id}",
    response={200: RunOut, **ERRORS},
    summary="One run with its steps",
    exclude_unset=True,
)
def run_detail(request: HttpRequest, run_id: str) -> RunOut:
    """A run on the flow version it is pinned to: path, values, each node's state, steps."""
    caller = api_caller(request, "runs.view")
    run = selectors.run_get(caller, run_id)
    flow = selectors.run_flow(run)
    state = selectors.run_state(run)
    steps = selectors.run_steps(run)
    erasure = run_erasure(run, steps)
    hidden = selectors.personal_hidden(caller, flow)
    values = {k: state.values[k] for k in flow.value_keys if k in state.values}
    return RunOut.model_validate(
        {
            **_row(run).model_dump(),
            "path": [_entry(entry.to_dict(), hidden) for entry in state.path],
            "values": masked_values(values, hidden),
            "handoff": state.handoff,
            "close_reason": run.close_reason or None,
            "node_states": dict(run_view(flow, state).node_states),
            "steps": [_step(step, hidden) for step in steps],
            **({"erasure": erasure.__dict__} if erasure is not None else {}),
        }
    )


class ResolveIn(Schema):
    """What a person sends to resolve a stalled run: an answer to the node where it waits,
    and a note."""

    choice: str | None = Field(
        None,
        max_length=MAX_LABEL_LENGTH,
        description="a label of the ask node where the run stalled",
    )
    values: dict[str, JsonValue] | None = Field(
        None,
        description="values by key, as guide_answer takes them: the slots of the collect "
        "node where the run stalled, and any later node's",
    )
    note: str = Field(
        max_length=MAX_RESOLVE_NOTE_LENGTH,
        description="what the person decided and why; recorded with the answer",
        examples=["Checked the order in the back office: the item arrived damaged."],
    )


@router.post(
    "/runs/{run_id}/resolve",
    response={200: StepResultOut, 409: ErrorOut, **ERRORS},
    summary="Resolve a stalled run",
    exclude_unset=True,
)
def run_resolve(request: HttpRequest, run_id: str, answer: ResolveIn) -> dict[str, object]:
    """A person resolves a stalled run: answers the node where it waits, as the agent
    would have. The step records the person and the note, and the run goes on
    (``active`` or ``completed``); the agent sees it with guide_status. Needs the
    permission to resolve runs (the Ops and Support lead groups) and, with the admin's
    session, a CSRF token (the ``X-CSRFToken`` header). Refused (409) when the run is not
    stalled or another person has claimed it; 422 for an answer that does not settle the
    node."""
    caller = api_caller(request, "runs.resolve")
    return resolve.run_resolve(
        caller=caller,
        run_id=run_id,
        choice=answer.choice,
        values=answer.values,
        note=answer.note,
    )
