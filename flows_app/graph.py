"""Graph facts about a flow: order, post-dominators and folding plans.

Pure Python, shared by the engine (folding at run time) and lint (the
``unfoldable`` warning), so both always agree on what folds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from flows_app.model import AskNode, CollectNode, EndNode, Flow, TellNode


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


UnfoldableReason = Literal["fanout", "depth", "collect"]


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


def topological_order(succ: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes so that every edge goes forward. Raises ValueError on a cycle.

    >>> topological_order({"a": ["b", "c"], "b": ["c"], "c": []})
    ['a', 'b', 'c']
    """
    done: set[str] = set()
    active: set[str] = set()
    postorder: list[str] = []
    for root in succ:
        if root in done:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        active.add(root)
        while stack:
            node, i = stack[-1]
            children = succ.get(node, ())
            if i < len(children):
                stack[-1] = (node, i + 1)
                child = children[i]
                if child in active:
                    raise ValueError(f"cycle through {child}")
                if child not in done and child in succ:
                    active.add(child)
                    stack.append((child, 0))
            else:
                stack.pop()
                active.discard(node)
                done.add(node)
                postorder.append(node)
    return postorder[::-1]


def immediate_postdominators(succ: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """For each node of an acyclic graph, the nearest node every path to an exit passes.

    Nodes without successors lead to a virtual exit; ``None`` means only that exit
    post-dominates the node.

    >>> ipdom = immediate_postdominators({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []})
    >>> ipdom["a"], ipdom["b"], ipdom["d"]
    ('d', 'd', None)
    """
    pdom: dict[str, frozenset[str]] = {}
    ipdom: dict[str, str | None] = {}
    for node in reversed(topological_order(succ)):
        children = [c for c in succ[node] if c in pdom]
        if not children:
            pdom[node] = frozenset({node})
            ipdom[node] = None
            continue
        shared = frozenset.intersection(*(pdom[c] for c in children))
        pdom[node] = shared | {node}
        # Strict post-dominators form a chain; the nearest one is dominated by all the others.
        ipdom[node] = next((d for d in shared if len(pdom[d]) == len(shared)), None)
    return ipdom


class FlowGraph:
    """Post-dominators of one flow, computed once and reused for every fold."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.successors = {nid: node.successors() for nid, node in flow.nodes.items()}
        self.ipdom = immediate_postdominators(self.successors)

    def plan_fold(self, node_id: str) -> Fold:
        """Fold an ask node (contract 3.4). Raises Unfoldable."""
        node = self.flow.nodes[node_id]
        if not isinstance(node, AskNode):
            raise Unfoldable("collect", node_id)
        common = self.ipdom[node_id]
        branches, _ = self._branches(node, common, self.flow.branch_depth)
        return Fold(branches=branches, common=common)

    def _branches(
        self, node: AskNode, stop: str | None, depth: int
    ) -> tuple[list[FoldBranch], int]:
        if len(node.accepts) > self.flow.max_branch_fanout:
            raise Unfoldable("fanout", node.id)
        branches: list[FoldBranch] = []
        deepest = 0
        for label, when in node.accepts.items():
            steps, used = self._walk(node.next[label], stop, depth)
            deepest = max(deepest, used)
            branches.append({"label": label, "when": when, "steps": steps})
        return branches, deepest

    def _walk(self, start: str, stop: str | None, depth: int) -> tuple[list[FoldStep], int]:
        steps: list[FoldStep] = []
        used = 0
        current: str | None = start
        while current is not None and current != stop:
            node = self.flow.nodes[current]
            if isinstance(node, CollectNode):
                raise Unfoldable("collect", current)
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
            inner_stop = self.ipdom[current]
            step["branches"], inner_used = self._branches(node, inner_stop, depth - used)
            used += inner_used
            current = inner_stop
        return steps, used
