"""Folding plans: an undecided ask turned into its branches side by side.

Shared by the engine (folding at run time) and lint (the ``unfoldable``
warning), so both always agree on what folds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from flowcore.flow.model import (
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    TellNode,
)


class FoldStep(TypedDict):
    id: str
    kind: str
    say: str
    outcome: NotRequired[str]
    branches: NotRequired[list[FoldBranch]]


class FoldBranch(TypedDict):
    label: str
    when: str
    steps: list[FoldStep]


UnfoldableReason = Literal["fanout", "depth", "collect", "check", "lookup"]


class Unfoldable(Exception):
    """The node cannot be folded; ``reason`` and ``at`` say why and where."""

    def __init__(self, reason: UnfoldableReason, at: str) -> None:
        super().__init__(f"{reason} at {at}")
        self.reason: UnfoldableReason = reason
        self.at = at


@dataclass(frozen=True)
class Fold:
    branches: list[FoldBranch]
    common: str | None


def plan_fold(flow: Flow, node_id: str) -> Fold:
    """Fold an ask node of ``flow``. Raises Unfoldable."""
    node = flow.nodes[node_id]
    if not isinstance(node, AskNode):
        raise Unfoldable("collect", node_id)
    common = flow.ipdom[node_id]
    branches, _ = _branches(flow, node, common, flow.branch_depth)
    return Fold(branches=branches, common=common)


def _branches(
    flow: Flow, node: AskNode, stop: str | None, depth: int
) -> tuple[list[FoldBranch], int]:
    if len(node.accepts) > flow.max_branch_fanout:
        raise Unfoldable("fanout", node.id)
    branches: list[FoldBranch] = []
    deepest = 0
    for label, when in node.accepts.items():
        steps, used = _walk(flow, node.next[label], stop, depth)
        deepest = max(deepest, used)
        branches.append({"label": label, "when": when, "steps": steps})
    return branches, deepest


def _walk(flow: Flow, start: str, stop: str | None, depth: int) -> tuple[list[FoldStep], int]:
    steps: list[FoldStep] = []
    used = 0
    current: str | None = start
    while current is not None and current != stop:
        node = flow.nodes[current]
        if isinstance(node, CollectNode):
            raise Unfoldable("collect", current)
        if isinstance(node, CheckNode):
            # A check decides on values a folded branch never gathers.
            raise Unfoldable("check", current)
        if isinstance(node, LookupNode):
            # A folded branch is guidance for the agent: it calls no system of record.
            raise Unfoldable("lookup", current)
        if used >= depth:
            raise Unfoldable("depth", current)
        used += 1
        step: FoldStep = {"id": node.id, "kind": node.kind, "say": node.say}
        steps.append(step)
        if isinstance(node, EndNode):
            step["outcome"] = node.outcome
            break
        if isinstance(node, TellNode):
            current = node.next
            continue
        # A nested ask: fold it to its own common, then go on from there.
        inner_stop = flow.ipdom[current]
        step["branches"], inner_used = _branches(flow, node, inner_stop, depth - used)
        used += inner_used
        current = inner_stop
    return steps, used
