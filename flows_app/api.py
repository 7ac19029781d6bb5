"""The JSON API's flows: the live list, one flow with its nodes, its stored versions, and
how its runs of the last days went per node and edge. Read-only; mounted by ``guidepost.api``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from access_app.web import ERRORS, api_caller
from flowcore.common.limits import MAX_USAGE_DAYS, USAGE_DAYS, USAGE_MAX_RUNS
from flowcore.drawing.usage import LeakKind, flow_usage
from flowcore.flow.model import (
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Node,
    NodeKind,
    TellNode,
)
from flows_app import selectors
from flows_app.runs_port import flow_runs

router = Router(tags=["flows"])


class FlowRowOut(Schema):
    id: str
    title: str
    category: str
    summary: str
    version: str | None
    content_hash: str
    node_count: int


class EdgeDefOut(Schema):
    label: str | None = Field(
        description="the label (or __other__/__unknown__); null: the only next"
    )
    to: str


class SlotDefOut(Schema):
    name: str
    ask: str
    required: bool
    pattern: str | None
    hint: str | None


class NodeDefOut(Schema):
    id: str
    kind: NodeKind
    say: str
    accepts: dict[str, str] | None
    next: list[EdgeDefOut]
    slots: list[SlotDefOut] | None
    outcome: str | None
    on_unknown: Literal["broaden", "escalate"] | None
    on_stuck: str | None


class FlowOut(FlowRowOut):
    entry: str
    live: bool = Field(
        description="false: the flow left the flows directory; this is its last version"
    )
    on_unknown: Literal["broaden", "escalate"]
    nodes: list[NodeDefOut]
    source: str


class FlowVersionOut(Schema):
    content_hash: str
    flow_id: str
    title: str
    version: str | None
    created_at: datetime
    run_count: int
    live: bool


class NodeUsageOut(Schema):
    id: str
    reached: int
    waiting: int
    stalled: int
    completed: int
    leaks: int


class EdgeUsageOut(Schema):
    source: str
    label: str | None
    target: str
    runs: int


class LeakOut(Schema):
    node: str
    label: str
    kind: LeakKind
    count: int


class FlowUsageOut(Schema):
    flow_id: str
    content_hash: str
    days: int
    since: datetime
    runs: int
    capped: bool = Field(description=f"true: only the newest {USAGE_MAX_RUNS} runs")
    nodes: list[NodeUsageOut]
    edges: list[EdgeUsageOut]
    leaks: list[LeakOut]


class UsageIn(Schema):
    days: int = Field(USAGE_DAYS, ge=1, le=MAX_USAGE_DAYS)


def _version(flow: Flow) -> str | None:
    return None if flow.version is None else str(flow.version)


def _row(flow: Flow) -> FlowRowOut:
    return FlowRowOut(
        id=flow.id,
        title=flow.title,
        category=flow.category,
        summary=flow.display_summary,
        version=_version(flow),
        content_hash=flow.content_hash,
        node_count=len(flow.nodes),
    )


def _node(node: Node) -> NodeDefOut:
    accepts = slots = outcome = on_unknown = on_stuck = None
    edges: list[EdgeDefOut] = []
    if isinstance(node, AskNode):
        accepts = dict(node.accepts)
        edges = [EdgeDefOut(label=label, to=to) for label, to in node.next.items()]
        on_unknown, on_stuck = node.on_unknown, node.on_stuck
    elif isinstance(node, TellNode):
        edges = [EdgeDefOut(label=None, to=node.next)]
    elif isinstance(node, CollectNode):
        edges = [EdgeDefOut(label=None, to=node.next)]
        slots = [
            SlotDefOut(name=s.name, ask=s.ask, required=s.required, pattern=s.pattern, hint=s.hint)
            for s in node.slots
        ]
        on_unknown, on_stuck = node.on_unknown, node.on_stuck
    elif isinstance(node, CheckNode):
        # A condition's edge is labelled with the condition, the last with "else".
        edges = [EdgeDefOut(label=b.if_, to=b.next) for b in node.when]
        edges.append(EdgeDefOut(label="else", to=node.else_))
    elif isinstance(node, LookupNode):
        # Each label of returns, and __error__ for a failed call when the node has it.
        accepts = dict(node.returns)
        edges = [EdgeDefOut(label=label, to=to) for label, to in node.next.items()]
        on_stuck = node.on_stuck
    elif isinstance(node, EndNode):
        outcome = node.outcome
    return NodeDefOut(
        id=node.id,
        kind=node.kind,
        say=node.say,
        accepts=accepts,
        next=edges,
        slots=slots,
        outcome=outcome,
        on_unknown=on_unknown,
        on_stuck=on_stuck,
    )


@router.get("/flows", response={200: list[FlowRowOut], **ERRORS}, summary="List live flows")
def flows_list(request: HttpRequest) -> list[FlowRowOut]:
    api_caller(request, "flows.view")
    return [_row(flow) for flow in selectors.flows_live()]


@router.get("/flows/{flow_id}", response={200: FlowOut, **ERRORS}, summary="One flow")
def flow_detail(request: HttpRequest, flow_id: str) -> FlowOut:
    """The live flow (or, for a flow no longer live, its last stored version)."""
    api_caller(request, "flows.view")
    flow, _ = selectors.flow_for_page(flow_id)
    live = any(f.content_hash == flow.content_hash for f in selectors.flows_live())
    return FlowOut(
        **_row(flow).model_dump(),
        entry=flow.entry,
        live=live,
        on_unknown=flow.on_unknown,
        nodes=[_node(node) for node in flow.nodes.values()],
        source=flow.source,
    )


@router.get(
    "/flows/{flow_id}/versions",
    response={200: list[FlowVersionOut], **ERRORS},
    summary="A flow's stored versions",
)
def flow_versions(request: HttpRequest, flow_id: str) -> list[FlowVersionOut]:
    """Every version runs were pinned to, newest first, with how many runs each has."""
    api_caller(request, "flows.view")
    versions = selectors.flow_versions(flow_id)
    if not versions:
        selectors.flow_for_page(flow_id)  # NotFound unless the flow is live
    live = {f.content_hash for f in selectors.flows_live()}
    return [
        FlowVersionOut(
            content_hash=v.content_hash,
            flow_id=v.flow_id,
            title=v.title,
            version=v.version or None,
            created_at=v.created_at,
            run_count=getattr(v, "run_count", 0),
            live=v.content_hash in live,
        )
        for v in versions
    ]


@router.get(
    "/flows/{flow_id}/usage",
    response={200: FlowUsageOut, **ERRORS},
    summary="Per-node and per-edge counts of a flow's runs",
)
def flow_usage_counts(request: HttpRequest, flow_id: str, window: Query[UsageIn]) -> FlowUsageOut:
    """Runs started in the last ``days`` days, counted on the flow's current nodes: how
    many reached, wait at, stalled at or ended at each node, how many took each edge,
    and the answers that fell outside the labels, most frequent first."""
    api_caller(request, "flows.view")
    flow, _ = selectors.flow_for_page(flow_id)
    since = timezone.now() - timedelta(days=window.days)
    inputs = flow_runs().flow_usage_inputs(flow.id, since=since)
    usage = flow_usage(flow, inputs.states, inputs.rejected)
    return FlowUsageOut(
        flow_id=flow.id,
        content_hash=flow.content_hash,
        days=window.days,
        since=since,
        runs=usage.runs,
        capped=inputs.capped,
        nodes=[NodeUsageOut(id=nid, **vars(u)) for nid, u in usage.nodes.items()],
        edges=[
            EdgeUsageOut(
                source=source,
                label=label or None,
                target=_target(flow, source, label),
                runs=count,
            )
            for (source, label), count in sorted(usage.edges.items())
        ],
        leaks=[
            LeakOut(node=leak.node, label=leak.label, kind=leak.kind, count=leak.count)
            for leak in usage.leaks
        ],
    )


def _target(flow: Flow, source: str, label: str) -> str:
    node = flow.nodes[source]
    if isinstance(node, AskNode):
        return node.next[label]
    return node.next if isinstance(node, TellNode | CollectNode) else ""
