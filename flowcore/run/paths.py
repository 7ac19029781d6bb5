"""Every path the engine can take through a flow, as the *moves* a run can make at each node.

A move passes the node one way (``asked``, ``skipped`` by a value given in advance,
``told``, ``folded``) along one edge, or ends the run there (an end, a stall). A flow is
acyclic and the moves are context-free (unmatched answers only wait, one fold per call
only defers the next undecided node, ``back`` restores a node's first arrival exactly),
so every path of moves is a run the engine can produce, and the reverse
(``tests/flowcore/run/test_paths.py`` checks both against the engine). Slot patterns
are assumed to accept some value and to reject some value.

A check's conditions are not read: each of its branches is a move (its condition, and
``else``), as though any could hold. Two checks on one path may exclude each other (the
same value above 100 and not above 100), so the paths cover every run of a flow with
checks and may hold some no run takes: a guarantee that holds on every path holds on
every run, and a counterexample through two checks is worth reading against their
conditions.

A lookup's answer is not known either: each label of ``returns`` is a move, and a failed
call is one too, along ``__error__`` when the node has it and else a stall (the run
waits for a person to answer for the system of record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from flowcore.flow.folding import FoldStep, Unfoldable, plan_fold
from flowcore.flow.model import (
    ELSE,
    ERROR,
    OTHER,
    UNKNOWN,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    NodeKind,
    TellNode,
)
from flowcore.run.state import PathEntry

PassVia = Literal["asked", "skipped", "told", "folded", "check", "lookup"]
EndState = Literal["completed", "stalled"]
StallReason = Literal["escalate", "unfoldable", "lookup_failed"]

NEXT = "next"  # the edge of a tell or a collect
_ASKED_OR_SKIPPED: tuple[PassVia, PassVia] = ("asked", "skipped")
FOLD = "fold"  # the edge of a folded ask


@dataclass(frozen=True)
class Ending:
    """How a run ends with a move: completed (at an end, or by a fold) or stalled."""

    state: EndState
    outcome: str | None = None  # the run's outcome (None: a stall, or a fold without common)
    outcomes: tuple[str, ...] = ()  # outcomes the run reaches: its own, or those a fold shows
    reason: StallReason | None = None
    handoff: str | None = None


@dataclass(frozen=True)
class Move:
    """One thing a run can do at ``node``: pass it (``via``, ``edge``) or end there."""

    node: str
    kind: NodeKind
    via: PassVia | None  # None: the move does not pass the node (an end, a stall)
    edge: str | None  # a label, OTHER, UNKNOWN, ERROR, NEXT or FOLD; None when not passing
    target: str | None  # where the run goes on; None when the move ends the run
    ending: Ending | None = None
    shown: tuple[str, ...] = ()  # nodes a fold shows in its branches, in order

    @property
    def passes(self) -> bool:
        return self.via is not None


Walk = tuple[Move, ...]  # a path through the flow, move by move


@dataclass(frozen=True)
class Edge:
    """An edge a run can take: ``node`` left along ``key`` (label, reserved key, next, fold)."""

    node: str
    key: str
    target: str | None  # None: a fold that ends the run

    def __str__(self) -> str:
        to = self.target or "(run ends)"
        if self.key == NEXT:
            return f"{self.node} --> {to}"
        return f"{self.node} --{self.key}--> {to}"


def moves(flow: Flow, node_id: str) -> tuple[Move, ...]:
    """The moves a run can make at ``node_id``, asked before skipped, passes before endings."""
    node = flow.nodes[node_id]
    if isinstance(node, EndNode):
        done = Ending("completed", outcome=node.outcome, outcomes=(node.outcome,))
        return (Move(node.id, "end", None, None, None, done),)
    if isinstance(node, TellNode):
        return (Move(node.id, "tell", "told", NEXT, node.next),)
    if isinstance(node, CheckNode):
        return tuple(Move(node.id, "check", "check", key, to) for key, to in node.edges())
    if isinstance(node, LookupNode):
        return lookup_moves(flow, node)
    found: list[Move] = []
    if isinstance(node, CollectNode):
        for via in _ASKED_OR_SKIPPED:
            found.append(Move(node.id, "collect", via, NEXT, node.next))
        if collect_can_stall(node):
            reason: StallReason = (
                "escalate" if flow.on_unknown_at(node) == "escalate" else "unfoldable"
            )
            found.append(_stall(flow, node, reason))
        return tuple(found)
    assert isinstance(node, AskNode)
    routes = [*node.accepts, *(key for key in (OTHER, UNKNOWN) if key in node.next)]
    for via in _ASKED_OR_SKIPPED:
        for key in routes:
            found.append(Move(node.id, "ask", via, key, node.next[key]))
    if UNKNOWN in node.next:
        return tuple(found)
    if flow.on_unknown_at(node) == "escalate":
        found.append(_stall(flow, node, "escalate"))
        return tuple(found)
    try:
        fold = plan_fold(flow, node.id)
    except Unfoldable:
        found.append(_stall(flow, node, "unfoldable"))
        return tuple(found)
    shown = tuple(_shown([s for b in fold.branches for s in b["steps"]]))
    ending: Ending | None = None
    if fold.common is None:
        outcomes = tuple(
            dict.fromkeys(
                n.outcome for n in (flow.nodes[i] for i in shown) if isinstance(n, EndNode)
            )
        )
        ending = Ending("completed", outcome=None, outcomes=outcomes)
    found.append(Move(node.id, "ask", "folded", FOLD, fold.common, ending, shown))
    return tuple(found)


def lookup_moves(flow: Flow, node: LookupNode) -> tuple[Move, ...]:
    """Each label of ``returns``, then a failed call: ``__error__``, or a stall."""
    found = [Move(node.id, "lookup", "lookup", label, node.next[label]) for label in node.returns]
    if ERROR in node.next:
        found.append(Move(node.id, "lookup", "lookup", ERROR, node.next[ERROR]))
    else:
        found.append(_stall(flow, node, "lookup_failed"))
    return tuple(found)


def collect_can_stall(node: CollectNode) -> bool:
    """Whether a collect can stall: a required slot can be unknown (given as unknown, or a
    patterned one rejected up to max_unmatched). An optional slot never stalls the run:
    unknown or rejected to the limit, it is left empty."""
    return any(slot.required for slot in node.slots)


def _stall(flow: Flow, node: AskNode | CollectNode | LookupNode, reason: StallReason) -> Move:
    ending = Ending("stalled", reason=reason, handoff=flow.handoff_at(node))
    return Move(node.id, node.kind, None, None, None, ending)


def _shown(steps: list[FoldStep]) -> Iterator[str]:
    for step in steps:
        yield step["id"]
        for branch in step.get("branches", []):
            yield from _shown(branch["steps"])


class FlowMoves:
    """The moves of every node of one flow, computed once."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.at = {node_id: moves(flow, node_id) for node_id in flow.nodes}

    def edges(self) -> list[Edge]:
        """Every edge a run can take, in the author's order of nodes and routes."""
        found: dict[tuple[str, str], Edge] = {}
        for node_moves in self.at.values():
            for move in node_moves:
                if move.edge is not None:
                    found.setdefault(
                        (move.node, move.edge), Edge(move.node, move.edge, move.target)
                    )
        return list(found.values())

    def paths(self, limit: int | None = None) -> Iterator[Walk]:
        """Every complete path from the entry (depth first, author order), at most ``limit``."""
        count = 0
        stack: list[tuple[str, Walk]] = [(self.flow.entry, ())]
        while stack:
            node_id, path = stack.pop()
            for move in reversed(self.at[node_id]):
                walked = (*path, move)
                if move.target is None:
                    yield walked
                    count += 1
                    if limit is not None and count >= limit:
                        return
                else:
                    stack.append((move.target, walked))


def edge_of(flow: Flow, entry: PathEntry) -> str | None:
    """The edge a path entry of the engine took (the inverse of a passing move's edge);
    None for the entry of the node where the run stalled, which it did not pass."""
    node = flow.nodes[entry.id]
    stalled = entry.value == UNKNOWN and entry.via in _ASKED_OR_SKIPPED
    if isinstance(node, CollectNode):
        return None if stalled else NEXT
    if isinstance(node, CheckNode):
        return entry.value
    if isinstance(node, LookupNode):
        # A failed call without __error__ stalled the run there; a person's label passes it.
        return None if entry.value == ERROR and ERROR not in node.next else entry.value
    if not isinstance(node, AskNode):
        return NEXT
    if entry.via == "folded":
        return FOLD
    if stalled and UNKNOWN not in node.next:
        return None
    if entry.value is not None and entry.value in node.accepts:
        return entry.value
    return UNKNOWN if entry.value == UNKNOWN else OTHER


def describe_move(move: Move) -> str:
    """How a move passed (or ended at) its node, for a counterexample path."""
    if move.ending is not None and move.via is None:
        ending = move.ending
        if ending.state == "stalled":
            handoff = json.dumps(ending.handoff, ensure_ascii=False)
            return f"stalled ({ending.reason}), handoff: {handoff}"
        return f"completed: {ending.outcome}"
    if move.via == "told":
        return "told"
    if move.via == "check":
        return "checked: else" if move.edge == ELSE else f"checked: {move.edge} holds"
    if move.via == "lookup":
        return (
            f"looked up: the call failed ({ERROR})"
            if move.edge == ERROR
            else (f"looked up: {move.edge}")
        )
    if move.via == "folded":
        text = "folded (nobody knew)"
        if move.shown:
            text += ", shows " + ", ".join(move.shown)
        if move.ending is not None:
            outcomes = ", ".join(move.ending.outcomes) or "none"
            text += f"; the run completes with no common node (outcomes shown: {outcomes})"
        return text
    how = "asked" if move.via == "asked" else "skipped (given in advance)"
    if move.kind == "collect":
        return how
    if move.edge == OTHER:
        return f"{how}: a code outside the labels (__other__)"
    return f"{how}: {move.edge}"
