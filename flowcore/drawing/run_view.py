"""A run as the pages draw it: each node's state on the run, the edges it took, its folds,
and one line per step. Pure: a flow and a run state in, plain data out.

The node states are the names ``diagram.render_svg`` knows:

- ``current``: the run waits here (or waited here when it was closed);
- ``answered``: the agent asked it and the answer moved the run on;
- ``prefilled``: passed by a value given in advance (``skipped`` in results);
- ``told``: a tell the run delivered;
- ``checked``: a check that decided where the run went;
- ``looked_up``: a lookup whose endpoint's answer (or failed call) decided where it went;
- ``folded``: nobody knew the answer, so its branches were given side by side;
- ``fold_branch``: a node on a branch of such a fold, given as guidance;
- ``stalled``: where the run was handed to a person;
- ``completed``: the end the run reached;
- ``unvisited``: everything else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from flowcore.flow.folding import FoldStep, Unfoldable, plan_fold
from flowcore.flow.model import (
    OTHER,
    UNKNOWN,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    TellNode,
)
from flowcore.run.results import ADOPT, MOVE
from flowcore.run.state import PathEntry, RunState

NodeState = Literal[
    "current",
    "answered",
    "prefilled",
    "told",
    "checked",
    "looked_up",
    "folded",
    "fold_branch",
    "stalled",
    "completed",
    "unvisited",
]
# An edge is named as render_svg names it: (source node, label); "" for a tell's or
# a collect's single next.
EdgeKey = tuple[str, str]

_VIA_STATE: Mapping[str, NodeState] = {
    "asked": "answered",
    "skipped": "prefilled",
    "told": "told",
    "check": "checked",
    "lookup": "looked_up",
    "folded": "folded",
}


@dataclass(frozen=True)
class FoldBranchView:
    label: str
    when: str
    nodes: tuple[str, ...]  # every node the branch's guidance names, nested folds included


@dataclass(frozen=True)
class FoldView:
    node: str
    branches: tuple[FoldBranchView, ...]
    common: str | None


@dataclass(frozen=True)
class RunView:
    """Where a run stands on its flow: a state for every node, the edges it took."""

    node_states: Mapping[str, NodeState]
    taken: frozenset[EdgeKey]
    folds: tuple[FoldView, ...]

    def taken_pairs(self) -> list[list[str]]:
        return [list(edge) for edge in sorted(self.taken)]


def edge_keys(flow: Flow) -> list[EdgeKey]:
    """Every edge of ``flow`` as the diagram names it, in author order."""
    keys: list[EdgeKey] = []
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            keys += [(node.id, label) for label in node.next]
        elif isinstance(node, TellNode | CollectNode):
            keys.append((node.id, ""))
        elif isinstance(node, CheckNode):
            keys += [(node.id, label) for label, _ in node.edges()]
        elif isinstance(node, LookupNode):
            keys += [(node.id, label) for label in node.next]
    return keys


def run_view(flow: Flow, state: RunState) -> RunView:
    """Each node's state on the run, the edges its effective path took, and its folds.

    Node ids of ``state`` that ``flow`` lacks are ignored, so a run on another version
    of a flow can be counted on this one (the flow page does that).
    """
    states: dict[str, NodeState] = {}
    folds: list[FoldView] = []
    passed = [e for e in state.effective_path() if e.id in flow.nodes]
    for entry in passed:
        states[entry.id] = _VIA_STATE.get(entry.via, "answered")
        if entry.via == "folded":
            fold = _fold_view(flow, entry.id)
            if fold is not None:
                folds.append(fold)
    if state.node is not None and state.node in flow.nodes:
        states[state.node] = _stop_state(flow, state)
    for fold in folds:
        for branch in fold.branches:
            for node_id in branch.nodes:
                states.setdefault(node_id, "fold_branch")
    ordered = {nid: states.get(nid, "unvisited") for nid in flow.nodes}
    return RunView(
        node_states=ordered, taken=frozenset(_taken(flow, state, passed)), folds=tuple(folds)
    )


def _stop_state(flow: Flow, state: RunState) -> NodeState:
    node = flow.nodes[state.node or ""]
    if state.state == "active":
        return "current"
    if state.state == "stalled":
        return "stalled"
    if isinstance(node, EndNode):
        return "completed"
    # A closed run keeps the node it was at; the handoff says whether it had stalled there.
    return "stalled" if state.handoff else "current"


def _taken(flow: Flow, state: RunState, passed: list[PathEntry]) -> set[EdgeKey]:
    ids = [e.id for e in passed]
    if state.node is not None and state.node in flow.nodes:
        ids.append(state.node)
    taken: set[EdgeKey] = set()
    for entry, target in zip(passed, ids[1:], strict=False):
        if entry.via == "folded":
            continue  # a fold jumps to the common node; no single edge was taken
        edge = _edge_to(flow, entry, target)
        if edge is not None:
            taken.add(edge)
    return taken


def _edge_to(flow: Flow, entry: PathEntry, target: str) -> EdgeKey | None:
    node = flow.nodes[entry.id]
    if isinstance(node, TellNode | CollectNode):
        return (node.id, "") if node.next == target else None
    if isinstance(node, CheckNode):
        took = entry.value or ""
        return (node.id, took) if dict(node.edges()).get(took) == target else None
    if isinstance(node, LookupNode):
        took = entry.value or ""
        return (node.id, took) if node.next.get(took) == target else None
    if isinstance(node, AskNode):
        labels = [label for label, to in node.next.items() if to == target]
        if not labels:
            return None
        value = entry.value or ""
        chosen = value if value in node.accepts else UNKNOWN if value == UNKNOWN else OTHER
        return (node.id, chosen if chosen in labels else labels[0])
    return None


def _fold_view(flow: Flow, node_id: str) -> FoldView | None:
    try:
        fold = plan_fold(flow, node_id)
    except Unfoldable:
        return None  # the run folded on a flow that folds; another version may not
    return FoldView(
        node=node_id,
        branches=tuple(
            FoldBranchView(b["label"], b["when"], tuple(_step_ids(b["steps"])))
            for b in fold.branches
        ),
        common=fold.common,
    )


def _step_ids(steps: Iterable[FoldStep]) -> list[str]:
    ids: list[str] = []
    for step in steps:
        ids.append(step["id"])
        for branch in step.get("branches", []):
            ids.extend(_step_ids(branch["steps"]))
    return ids


# --- the timeline -----------------------------------------------------------------------------


def step_summary(tool: str, result: Mapping[str, Any]) -> str:
    """One line saying what a step did, from its stored result.

    >>> step_summary("guide_answer", {"status": "advanced", "node": {"id": "n_b"}})
    'waits at n_b'
    >>> step_summary("guide_close", {"state": "closed", "reason": "left"})
    'closed: left'
    >>> step_summary("adopt", {"status": "adopted", "owner": "key:platform"})
    'handed to key:platform'
    >>> step_summary("move", {"from": "a" * 64, "to": "b" * 64, "node": {"id": "n_b"}})
    'moved from revision aaaaaaaaaaaa to bbbbbbbbbbbb; waits at n_b'
    """
    if tool == "guide_close":
        return f"closed: {result.get('reason', '')}".rstrip(": ")
    if tool == ADOPT:
        return f"handed to {result.get('owner')}"
    if tool == MOVE:
        node = result.get("node") or {}
        return (
            f"moved from revision {str(result.get('from'))[:12]} to "
            f"{str(result.get('to'))[:12]}; waits at {node.get('id')}"
        )
    status = result.get("status")
    node = result.get("node") or {}
    where = str(node.get("id", "")) if isinstance(node, Mapping) else ""
    if status == "advanced":
        parts = [f"waits at {where}"]
    elif status == "completed":
        parts = [f"completed at {where} (outcome: {result.get('outcome')})"]
    elif status == "unmatched":
        parts = [
            f"rejected {_quote(result.get('rejected'))} at {where} "
            f"(attempt {result.get('attempt')} of {result.get('max_unmatched')})"
        ]
    elif status == "branched":
        labels = " / ".join(str(b.get("label")) for b in result.get("branches") or [])
        then = f"then waits at {where}" if where else f"ends (outcome: {result.get('outcome')})"
        if where and node.get("kind") == "end":
            then = f"ends at {where} (outcome: {result.get('outcome')})"
        parts = [f"folded into branches {labels}; {then}"]
    elif status == "stalled":
        parts = [f"stalled at {where} ({result.get('reason')})"]
    else:
        parts = [str(status)]
    checked = [f"{c.get('id')} ({c.get('took')})" for c in result.get("checked") or []]
    if checked:
        parts.append("checked " + ", ".join(checked))
    looked = [f"{c.get('id')} ({c.get('took')})" for c in result.get("looked_up") or []]
    if looked:
        parts.append("looked up " + ", ".join(looked))
    told = [str(t.get("id")) for t in result.get("tell") or []]
    if told:
        parts.append("told " + ", ".join(told))
    if result.get("skipped"):
        parts.append("skipped " + ", ".join(str(s) for s in result["skipped"]))
    if result.get("ignored"):
        parts.append("ignored " + ", ".join(str(i.get("key")) for i in result["ignored"]))
    if result.get("repeated"):
        parts.append("a repeated call")
    return "; ".join(parts)


def _quote(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
