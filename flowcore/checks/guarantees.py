"""Guarantees: properties of a flow checked over every path the engine can take.

A guarantee (its three kinds are described for authors in docs/authoring.md) holds when
no path of ``paths`` breaks it, values given in advance and folds included. The check is
a shortest-path search over the flow's moves for a path that breaks it, so it takes time
about linear in the size of the flow however many paths there are; the path it finds
(the most ordinary one, see ``check_guarantee``) is printed as the counterexample.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from flowcore.checks.scenarios import Reader, inline
from flowcore.common.names import closest, missing_hint
from flowcore.common.text import a_kind
from flowcore.flow.findings import Finding
from flowcore.flow.model import ERROR, OTHER, AskNode, CollectNode, EndNode, Flow, frozen_mapping
from flowcore.flow.yaml_safe import key_line_of, line_of
from flowcore.run.paths import FlowMoves, Move, Walk, describe_move
from flowcore.run.state import RunState

PASSES_KEYS = ("name", "every_path_to", "passes", "asked")
ORDER_KEYS = ("name", "never_reaches", "without", "asked")
HANDOVER_KEYS = ("name", "every_stall_hands_over", "own_text")
KIND_KEYS = ("every_path_to", "never_reaches", "every_stall_hands_over")


@dataclass(frozen=True)
class PassesGuarantee:
    """Every path to an outcome matching ``outcomes`` passes ``node`` (asked, if ``asked``)."""

    name: str
    outcomes: tuple[str, ...]  # glob patterns (``*``, ``?``, ``[...]``)
    node: str
    asked: bool = False
    line: int | None = None
    key_lines: Mapping[str, int] = field(default_factory=frozen_mapping, compare=False)

    def statement(self) -> str:
        how = " asked" if self.asked else ""
        return f"every path to {' or '.join(self.outcomes)} passes {self.node}{how}"


@dataclass(frozen=True)
class OrderGuarantee:
    """``target`` is never reached unless ``before`` was passed (asked, if ``asked``) first."""

    name: str
    target: str
    before: str
    asked: bool = False
    line: int | None = None
    key_lines: Mapping[str, int] = field(default_factory=frozen_mapping, compare=False)

    def statement(self) -> str:
        how = " asked" if self.asked else ""
        return f"{self.target} is never reached without {self.before}{how} before it"


@dataclass(frozen=True)
class HandoverGuarantee:
    """Every stall hands over with a text (``own_text``: the authors' own ``on_stuck``)."""

    name: str
    own_text: bool = False
    line: int | None = None
    key_lines: Mapping[str, int] = field(default_factory=frozen_mapping, compare=False)

    def statement(self) -> str:
        own = " of the flow's own" if self.own_text else ""
        return f"every stall hands over with a text{own}"


Guarantee = PassesGuarantee | OrderGuarantee | HandoverGuarantee


@dataclass(frozen=True)
class Counterexample:
    """A path the engine can take that breaks a guarantee."""

    moves: Walk
    why: str

    def lines(self) -> list[str]:
        if not self.moves:
            return []
        width = max(len(move.node) for move in self.moves)
        return [f"{move.node:<{width}}  {describe_move(move)}" for move in self.moves]


@dataclass(frozen=True)
class GuaranteeResult:
    guarantee: Guarantee
    counterexample: Counterexample | None = None
    problems: tuple[Finding, ...] = ()  # mistakes against the flow: not checked

    @property
    def held(self) -> bool:
        return self.counterexample is None and not self.problems


# --- reading ------------------------------------------------------------------------------


def read_guarantee(reader: Reader, item: object, index: int, line: int | None) -> Guarantee | None:
    """One guarantee of a tests file, or None (with findings) when it cannot be read."""
    label = f"guarantees[{index}]"
    usage = (
        "a guarantee is a mapping with a name and one of every_path_to (with passes), "
        "never_reaches (with without) or every_stall_hands_over"
    )
    if not isinstance(item, dict):
        reader.error([label], usage, line)
        return None
    name = item.get("name")
    named = isinstance(name, str) and bool(name.strip())
    if named:
        label = str(name)
    else:
        reader.error([label], "a guarantee needs a name (text): say what must hold", line_of(item))
    kinds = [key for key in KIND_KEYS if key in item]
    if len(kinds) != 1:
        reader.error(
            [label], usage + (f", not {' and '.join(kinds)}" if kinds else ""), line_of(item)
        )
        return None
    kind = kinds[0]
    allowed = {
        "every_path_to": PASSES_KEYS,
        "never_reaches": ORDER_KEYS,
        "every_stall_hands_over": HANDOVER_KEYS,
    }[kind]
    ok = reader.unknown_keys(item, allowed, [label]) and named
    lines = frozen_mapping({str(k): v for k, v in getattr(item, "key_lines", {}).items()})
    flags: dict[str, bool] = {}
    for flag in ("asked", "own_text", "every_stall_hands_over"):
        value = item.get(flag, False) if flag in allowed else False
        if not isinstance(value, bool):
            reader.error([label, flag], f"{flag} is true or false", key_line_of(item, flag))
            ok = False
        flags[flag] = value is True
    if kind == "every_stall_hands_over":
        if item.get(kind) is False:
            reader.error(
                [label, kind],
                "every_stall_hands_over: false states nothing: remove the guarantee",
                key_line_of(item, kind),
            )
            ok = False
        return HandoverGuarantee(str(name), flags["own_text"], line_of(item), lines) if ok else None
    if kind == "every_path_to":
        outcomes = _read_outcomes(reader, item, label)
        node = _read_node(reader, item, "passes", label, "the node every such path passes")
        if outcomes is None or node is None or not ok:
            return None
        return PassesGuarantee(str(name), outcomes, node, flags["asked"], line_of(item), lines)
    target = _read_node(reader, item, "never_reaches", label, "the node never reached too early")
    before = _read_node(reader, item, "without", label, "the node that must come first")
    if target is None or before is None or not ok:
        return None
    if target == before:
        reader.error([label], "never_reaches and without name the same node", line_of(item))
        return None
    return OrderGuarantee(str(name), target, before, flags["asked"], line_of(item), lines)


def _read_outcomes(
    reader: Reader, item: dict[object, object], label: str
) -> tuple[str, ...] | None:
    raw = item.get("every_path_to")
    patterns = [raw] if isinstance(raw, str) else raw
    if isinstance(patterns, list) and patterns and all(isinstance(p, str) and p for p in patterns):
        return tuple(str(p) for p in patterns)
    reader.error(
        [label, "every_path_to"],
        "every_path_to is an outcome or a list of them (`*` matches any text): "
        "`every_path_to: [refunded, credited]`",
        key_line_of(item, "every_path_to"),
    )
    return None


def _read_node(
    reader: Reader, item: dict[object, object], key: str, label: str, what: str
) -> str | None:
    value = item.get(key)
    if isinstance(value, str) and value:
        return value
    reader.error(
        [label, key], f"{key} is a node id: {what}", key_line_of(item, key) or line_of(item)
    )
    return None


def check_guarantee_names(flow: Flow, guarantee: Guarantee, reader: Reader) -> list[Finding]:
    """Mistakes of a guarantee against ``flow``: nodes it does not have, ``asked`` on a node
    that is never asked, outcome patterns that match no end (the guarantee would hold
    for nothing)."""
    before = len(reader.findings)
    label = guarantee.name

    def line(key: str) -> int | None:
        return guarantee.key_lines.get(key, guarantee.line)

    names: list[tuple[str, str]] = []
    asked_node: str | None = None
    if isinstance(guarantee, PassesGuarantee):
        names.append(("passes", guarantee.node))
        asked_node = guarantee.node if guarantee.asked else None
        outcomes = sorted({n.outcome for n in flow.nodes.values() if isinstance(n, EndNode)})
        for pattern in guarantee.outcomes:
            if not any(fnmatchcase(outcome, pattern) for outcome in outcomes):
                near = closest(pattern, outcomes, n=1)
                hint = (
                    f"did you mean {near[0]!r}?" if near else "its outcomes: " + ", ".join(outcomes)
                )
                reader.error(
                    [label, "every_path_to"],
                    f"no end of {flow.id} has an outcome matching {pattern!r}, so the guarantee "
                    f"would hold for nothing: {hint}",
                    line("every_path_to"),
                )
    elif isinstance(guarantee, OrderGuarantee):
        names += [("never_reaches", guarantee.target), ("without", guarantee.before)]
        asked_node = guarantee.before if guarantee.asked else None
    for key, node_id in names:
        if node_id not in flow.nodes:
            hint = missing_hint(node_id, list(flow.nodes), "nodes")
            reader.error([label, key], f"{flow.id} has no node {node_id!r}{hint}", line(key))
    node = flow.nodes.get(asked_node) if asked_node else None
    if node is not None and not isinstance(node, AskNode | CollectNode):
        reader.error(
            [label, "asked"],
            f"{node.id} is {a_kind(node.kind)} node, which is never asked: "
            "asked: true applies to ask and collect nodes",
            line("asked"),
        )
    return reader.findings[before:]


# --- checking -----------------------------------------------------------------------------


def check_guarantee(
    moves: FlowMoves, guarantee: Guarantee, *, start: str | None = None
) -> GuaranteeResult:
    """Search every path of the flow for one that breaks ``guarantee``; with ``start``,
    every path on from that node (where a run that would move waits).

    The counterexample is the most ordinary such path: the fewest moves off the usual
    road (a value given in advance, a fold, an answer that is no label), then the
    fewest moves, then the author's order. The guarantee's names must exist in the
    flow (``check_guarantee_names``).
    """
    flow = moves.flow
    if start is None and isinstance(guarantee, OrderGuarantee) and flow.entry == guarantee.target:
        starts = f"the run starts at {guarantee.target}, with nothing before it"
        return GuaranteeResult(guarantee, Counterexample((), starts))
    # Dijkstra over nodes; a broken move is queued as its own item, so the cheapest wins.
    order = itertools.count()
    queue: list[tuple[int, int, int, str | None, Walk, str | None]] = [
        (0, 0, next(order), start or flow.entry, (), None)
    ]
    settled: set[str] = set()
    while queue:
        unusual, length, _, node_id, path, broken = heapq.heappop(queue)
        if broken is not None:
            return GuaranteeResult(guarantee, Counterexample(path, broken))
        assert node_id is not None
        if node_id in settled:
            continue
        settled.add(node_id)
        for move in moves.at[node_id]:
            if _kept(flow, guarantee, move):
                continue  # every path through this move keeps the guarantee
            walked = (*path, move)
            cost = unusual + _unusual(move)
            why = _broken(flow, guarantee, move)
            if why is None and isinstance(guarantee, OrderGuarantee):
                if move.target == guarantee.target:
                    how = " asked" if guarantee.asked else ""
                    why = f"the run reaches {move.target} without passing {guarantee.before}{how}"
            if why is not None:
                heapq.heappush(queue, (cost, length + 1, next(order), None, walked, why))
            elif move.target is not None and move.target not in settled:
                heapq.heappush(queue, (cost, length + 1, next(order), move.target, walked, None))
    return GuaranteeResult(guarantee)


def _unusual(move: Move) -> int:
    """1 for a move off the usual road: given in advance, folded, an unlisted answer, or a
    lookup whose call failed."""
    return int(move.via in ("skipped", "folded") or move.edge in (OTHER, ERROR))


def _kept(flow: Flow, guarantee: Guarantee, move: Move) -> bool:
    """Whether ``move`` settles the guarantee for every path through it."""
    if isinstance(guarantee, HandoverGuarantee):
        return False
    node = guarantee.node if isinstance(guarantee, PassesGuarantee) else guarantee.before
    if move.node != node:
        return False
    if guarantee.asked:
        return move.via == "asked"
    return move.passes or move.kind == "end"


def _broken(flow: Flow, guarantee: Guarantee, move: Move) -> str | None:
    """Why ``move`` breaks the guarantee on every path that reaches it, or None."""
    ending = move.ending
    if isinstance(guarantee, PassesGuarantee):
        if ending is None or ending.state != "completed":
            return None
        matched = [o for o in ending.outcomes if any(fnmatchcase(o, p) for p in guarantee.outcomes)]
        if not matched:
            return None
        how = " asked" if guarantee.asked else ""
        return f"the run reaches {matched[0]} without passing {guarantee.node}{how}"
    if isinstance(guarantee, OrderGuarantee):
        if guarantee.target in move.shown:
            how = " asked" if guarantee.asked else ""
            return (
                f"a fold at {move.node} shows {guarantee.target} without {guarantee.before}"
                f"{how} before it"
            )
        return None
    if ending is None or ending.state != "stalled":
        return None
    handoff = ending.handoff or ""
    if not handoff.strip():
        return f"the stall at {move.node} hands over with a blank text ({inline(handoff)})"
    node = flow.nodes[move.node]
    own = node.on_stuck if isinstance(node, AskNode | CollectNode) else None
    if guarantee.own_text and not (own or flow.on_stuck):
        return (
            f"the stall at {move.node} hands over with the generic text: "
            f"neither {move.node} nor the flow sets on_stuck"
        )
    return None


def guarantee_lines(result: GuaranteeResult) -> list[str]:
    """What the runner prints under a guarantee that does not hold."""
    if result.counterexample is None:
        return []
    example = result.counterexample
    lines = [f"{example.why}; counterexample:"]
    lines += [f"  {line}" for line in example.lines()]
    return lines


def path_refusal(
    flow: Flow, guarantees: Sequence[Guarantee]
) -> Callable[[RunState], str | None] | None:
    """Why a run moved onto ``flow`` in a state would break one of ``guarantees`` on its
    path (``migration.plan_move``'s ``refuse_path``); None when there are none to keep."""
    if not guarantees:
        return None
    moves = FlowMoves(flow)

    def refuse(state: RunState) -> str | None:
        for guarantee in guarantees:
            broken = guarantee_on_path(moves, guarantee, state)
            if broken is not None:
                return f"guarantee {guarantee.name!r} would not hold on its path: {broken}"
        return None

    return refuse


def guarantee_on_path(moves: FlowMoves, guarantee: Guarantee, state: RunState) -> str | None:
    """Why ``guarantee`` would not hold for a run in ``state`` on ``moves.flow`` (on the
    path it has taken, then on any path on from where it waits), or None when it holds.
    A guarantee naming a node the flow does not have says nothing about it."""
    flow = moves.flow
    passed = state.effective_path()
    if isinstance(guarantee, PassesGuarantee | OrderGuarantee):
        node = guarantee.node if isinstance(guarantee, PassesGuarantee) else guarantee.before
        named = [node] if isinstance(guarantee, PassesGuarantee) else [node, guarantee.target]
        if any(n not in flow.nodes for n in named):
            return None
        if any(e.id == node and (not guarantee.asked or e.via == "asked") for e in passed):
            return None  # its path already keeps it, whatever comes next
        if isinstance(guarantee, OrderGuarantee) and guarantee.target in {
            *(e.id for e in passed),
            state.node,
        }:
            how = " asked" if guarantee.asked else ""
            return f"the run reaches {guarantee.target} without passing {guarantee.before}{how}"
    elif not isinstance(guarantee, HandoverGuarantee):  # pragma: no cover - every kind above
        return None
    if state.node is None:
        return None
    result = check_guarantee(moves, guarantee, start=state.node)
    if result.counterexample is None:
        return None
    return result.counterexample.why
