"""Engine runs for symbolic paths, and guarantees judged on what the engine did.

``drive`` plays a path of ``flowcore.run.paths`` through the real engine (values
given in advance for the moves that skip, answers for those asked, ``__unknown__``
for folds and stalls) and returns every transition; ``engine_path`` reads a state
back as moves. ``violates`` judges a guarantee on engine transitions alone, without
the checker's search, so the two can be compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import product

from flowcore.checks.guarantees import (
    Guarantee,
    HandoverGuarantee,
    OrderGuarantee,
    PassesGuarantee,
)
from flowcore.flow.conditions import holds, reads
from flowcore.flow.folding import FoldStep
from flowcore.flow.model import (
    ERROR,
    OTHER,
    UNKNOWN,
    AskNode,
    CheckNode,
    CollectNode,
    Flow,
    Slot,
)
from flowcore.flow.slot_types import fit
from flowcore.run import engine
from flowcore.run.engine import StepResult, Transition
from flowcore.run.lookups import Looked
from flowcore.run.paths import FOLD, FlowMoves, Move, Walk, edge_of
from flowcore.run.state import PathEntry, RunState

OTHER_VALUE = "zz_other"  # a value no generated or bundled flow has as a label
JUNK = "not valid!"  # fits none of the patterns used in tests: "[0-9]+" and the bundled ones

SlotValue = Callable[[Slot], str]


def digits(slot: Slot) -> str:
    """A value that fits the patterns of generated flows (``[0-9]+``) or no pattern."""
    assert slot.pattern in (None, "[0-9]+"), slot.pattern
    return "7"


def _value_of(move: Move) -> str:
    assert move.edge is not None
    if move.edge == OTHER:
        return OTHER_VALUE
    return UNKNOWN if move.edge in (UNKNOWN, FOLD) else move.edge


def _slot_values(node: CollectNode, valid: SlotValue, *, every: bool) -> dict[str, str]:
    slots = node.slots if every else node.required_slots
    return {slot.name: valid(slot) for slot in slots}


@dataclass
class Run:
    transitions: list[Transition]

    @property
    def state(self) -> RunState:
        return self.transitions[-1].state


def answers_of(path: Walk) -> dict[str, Looked]:
    """What each lookup on ``path`` came back with for the run to take the path's move:
    its label, or a failed call for ``__error__`` and a stall."""
    return {
        m.node: Looked(failed="the endpoint is down")
        if m.edge in (None, ERROR)
        else Looked(response=json.dumps({"label": m.edge}))
        for m in path
        if m.kind == "lookup"
    }


def drive(flow: Flow, path: Walk, valid: SlotValue = digits) -> Run:
    """Play ``path`` (a complete path of the model) through the engine."""
    looked = answers_of(path)
    prefill: dict[str, str] = {}
    for move in path:
        if move.via != "skipped":
            continue
        node = flow.nodes[move.node]
        if isinstance(node, AskNode):
            prefill[node.id] = _value_of(move)
        else:
            assert isinstance(node, CollectNode)
            prefill.update(_slot_values(node, valid, every=False))
    last = flow.nodes[path[-1].node]
    if path[-1].ending is not None and isinstance(last, CollectNode) and not last.required_slots:
        # Such a collect never waits by itself: a value that does not fit makes it stall.
        prefill[next(s for s in last.slots if s.pattern).name] = JUNK
    run = Run([engine.start(flow, prefill, lookups=looked)])
    passes = [m for m in path if m.passes]
    for _ in range(4 * len(path) + 8):
        state = run.state
        done = state.effective_path()
        if len(done) > len(passes):
            raise AssertionError(f"the engine passed more nodes than the path: {done}")
        reopen = None
        for entry, move in zip(done, passes, strict=False):
            if entry.id != move.node:
                raise AssertionError(f"the engine went to {entry.id}, the path to {move.node}")
            if entry.via == "skipped" and move.via == "asked":
                reopen = entry.id
                break
        if reopen is not None:
            # A collect that needs nothing passes at once; reopen it to answer it asked.
            node = flow.nodes[reopen]
            assert isinstance(node, CollectNode) and not node.required_slots
            later = {k: v for k, v in prefill.items() if flow.owner_of(k) != node.id}
            run.transitions.append(engine.back(flow, state, node.id))
            values = {**later, **_slot_values(node, valid, every=True)}
            run.transitions.append(engine.answer(flow, run.state, values=values, lookups=looked))
            continue
        if state.state != "active":
            return run
        node = flow.nodes[state.node or ""]
        move = path[len(done)]
        assert move.node == node.id, (move, state)
        assert isinstance(node, AskNode | CollectNode)
        if move.passes and move.via == "asked":
            if isinstance(node, AskNode):
                step = engine.answer(flow, state, choice=_value_of(move), lookups=looked)
            else:
                given = _slot_values(node, valid, every=True)
                step = engine.answer(flow, state, values=given, lookups=looked)
        elif move.via == "folded" or isinstance(node, AskNode):
            assert not move.passes or move.via == "folded", move
            step = engine.answer(flow, state, choice=UNKNOWN, lookups=looked)
        elif node.required_slots:
            step = engine.answer(flow, state, choice=UNKNOWN, lookups=looked)
        else:
            patterned = next(s for s in node.slots if s.pattern)
            step = engine.answer(flow, state, values={patterned.name: JUNK}, lookups=looked)
        run.transitions.append(step)
    raise AssertionError(f"the run did not end: {run.state}")


def engine_moves(flow: Flow, moves: FlowMoves, run: Run) -> Walk:
    """The model's moves that the engine's final effective path and ending correspond to.

    Raises AssertionError when the engine did something the model has no move for.
    """
    state = run.state
    found: list[Move] = []
    for entry in state.effective_path():
        edge = edge_of(flow, entry)
        match = [
            m for m in moves.at[entry.id] if m.via == entry.via and m.edge == edge and m.passes
        ]
        assert match, f"no move at {entry.id} via {entry.via} along {edge}"
        if found:
            assert found[-1].target == entry.id, f"{found[-1]} does not lead to {entry.id}"
        found.append(match[0])
    last = run.transitions[-1].result
    if state.state == "completed" and state.node is None:
        assert found and found[-1].edge == FOLD and found[-1].ending is not None
        assert state.folded
        return tuple(found)
    at = state.node
    assert at is not None
    if found:
        assert found[-1].target == at, f"{found[-1]} does not lead to {at}"
    else:
        assert at == flow.entry
    if state.state == "completed":
        (end,) = moves.at[at]
        assert end.ending is not None and end.ending.outcome == state.outcome
        return (*found, end)
    if state.state == "stalled":
        stalls = [m for m in moves.at[at] if m.ending and m.ending.state == "stalled"]
        assert stalls, f"the engine stalled at {at}, where the model has no stall"
        (stall,) = stalls
        assert stall.ending is not None
        assert stall.ending.reason == last.get("reason") and stall.ending.handoff == state.handoff
        return (*found, stall)
    return tuple(found)


def fold_shown(result: StepResult) -> list[str]:
    """Every node id a branched result shows in its branches (nested ones included)."""

    def walk(steps: Sequence[FoldStep]) -> list[str]:
        ids: list[str] = []
        for step in steps:
            ids.append(step["id"])
            for branch in step.get("branches", []):
                ids += walk(branch["steps"])
        return ids

    return [i for branch in result.get("branches", []) for i in walk(branch["steps"])]


def violates(flow: Flow, guarantee: Guarantee, run: Run) -> bool:
    """Whether the engine's run breaks ``guarantee``, judged on its transitions alone."""
    for transition in run.transitions:
        state, result = transition.state, transition.result
        passed = state.effective_path()

        def passed_before(
            node: str, count: int, asked: bool, passed: list[PathEntry] = passed
        ) -> bool:
            return any(e.id == node and (not asked or e.via == "asked") for e in passed[:count])

        if isinstance(guarantee, HandoverGuarantee):
            if state.state == "stalled":
                handoff = state.handoff or ""
                node = flow.nodes[state.node or ""]
                own = getattr(node, "on_stuck", None) or flow.on_stuck
                if not handoff.strip() or (guarantee.own_text and not own):
                    return True
        elif isinstance(guarantee, OrderGuarantee):
            target, before, asked = guarantee.target, guarantee.before, guarantee.asked
            for index, entry in enumerate(passed):
                if entry.id == target and not passed_before(before, index, asked):
                    return True
            reached_here = state.node == target or target in fold_shown(result)
            if reached_here and not passed_before(before, len(passed), asked):
                return True
        elif state.state == "completed":
            assert isinstance(guarantee, PassesGuarantee)
            outcomes = [state.outcome] if state.outcome is not None else []
            if state.folded and state.outcome is None:
                outcomes = [
                    flow.nodes[i].outcome for i in fold_shown(result) if flow.nodes[i].kind == "end"
                ]
            matched = any(fnmatchcase(o, p) for o in outcomes for p in guarantee.outcomes)
            at_end = state.node == guarantee.node and not guarantee.asked
            if (
                matched
                and not at_end
                and not passed_before(guarantee.node, len(passed), guarantee.asked)
            ):
                return True
    return False


def regex_value(pattern: str | None) -> str:
    """A value for the bundled flows' slot patterns (each is simple enough to fill by hand)."""
    if pattern is None:
        return "some text"
    samples = {
        "A[0-9]{5}": "A00118",
        "M[0-9]{8}": "M00012345",
        "[0-9]{6}": "123456",
        "R[0-9]{8}": "R20240117",
        "[A-Z]{3}-[0-9]{4}": "KTC-0412",
        "INC-[0-9]{4,6}": "INC-20417",
        "([01][0-9]|2[0-3]):[0-5][0-9]": "02:47",
        "[a-z][a-z0-9.]{1,30}": "jane.doe",
        "LT-[0-9]{5}": "LT-04211",
        "[0-9]{3}-?[0-9]{4}": "150-0041",
        "(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])": "1985-04-01",
        "[0-9]+": "7",
    }
    value = samples[pattern]
    assert re.fullmatch(pattern, value) and not re.fullmatch(pattern, JUNK)
    return value


# Values a typed slot is tried with when a path goes through a check that reads it.
_CANDIDATES = {
    "number": ("0", "50", "150", "100000"),
    "integer": ("0", "50", "150", "100000"),
    "boolean": ("true", "false"),
    "date": ("2000-01-01", "2100-01-01"),
}


def check_values(flow: Flow, path: Walk, base: SlotValue) -> SlotValue:
    """``base`` with the slots a check of ``path`` reads given values under which each
    check takes the edge the path takes (found by trying a few values of each type): a
    path through a check is a run only for the values that make its condition hold."""
    checks = [m for m in path if m.via == "check"]
    keys = frozenset(flow.key_types)
    read = {
        k
        for m in checks
        for branch in _check(flow, m.node).when
        for k in reads(branch.if_, keys).names
        if k in flow.slots
    }
    typed = sorted(name for name, slot in flow.slots.items() if slot.type != "text" or name in read)
    labels = {m.node: _value_of(m) for m in path if m.passes and m.kind == "ask"}
    tries = [
        _CANDIDATES.get(flow.slots[n].type, flow.slots[n].options or (base(flow.slots[n]),))
        for n in typed
    ]
    for chosen in product(*tries):
        given = dict(zip(typed, chosen, strict=True))
        values = {**labels, **{n: fit(flow.slots[n], v) for n, v in given.items()}}
        taken = []
        for move in checks:
            node = _check(flow, move.node)
            held = (b.if_ for b in node.when if holds(b.if_, flow.key_types, values, None))
            taken.append(next(held, "else") == move.edge)
        if all(taken):
            return lambda slot: given.get(slot.name) or base(slot)
    return lambda slot: _CANDIDATES.get(slot.type, (base(slot),))[0]


def _check(flow: Flow, node_id: str) -> CheckNode:
    node = flow.nodes[node_id]
    assert isinstance(node, CheckNode)
    return node
