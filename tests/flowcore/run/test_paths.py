"""The symbolic paths of ``flowcore.run.paths`` are exactly the engine's runs.

Both directions, against the real engine: every run of random calls on a random
flow is a path of the model (nothing the engine does is missing), and every path
the model lists is played by the engine move for move (nothing listed is
impossible), on random flows and on every path of every bundled flow.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.common.errors import Refusal
from flowcore.flow.files import load_catalog
from flowcore.flow.model import (
    OTHER,
    UNKNOWN,
    AskNode,
    CollectNode,
    EndNode,
    Flow,
    Node,
    Slot,
    TellNode,
    frozen_mapping,
)
from flowcore.run import engine
from flowcore.run.engine import Transition
from flowcore.run.paths import FOLD, FlowMoves, Walk, moves
from flowcore.run.state import RunState
from tests.flowcore.path_runs import (
    JUNK,
    OTHER_VALUE,
    Run,
    check_values,
    drive,
    engine_moves,
    fold_shown,
    regex_value,
)
from tests.flowcore.run.engine.strategies import flows
from tests.support.paths import BUNDLED_FLOWS


@st.composite
def stuck_flows(draw: st.DrawFn, max_nodes: int = 8) -> Flow:
    """Random flows whose ``on_stuck`` texts vary: none, blank, or written, per node."""
    flow = draw(flows(max_nodes=max_nodes))
    texts = st.sampled_from([None, None, " ", "call a supervisor"])
    nodes = {
        node_id: replace(node, on_stuck=draw(texts))
        if isinstance(node, AskNode | CollectNode)
        else node
        for node_id, node in flow.nodes.items()
    }
    return replace(flow, nodes=frozen_mapping(nodes), on_stuck=draw(texts))


def alphabet(flow: Flow) -> list[str]:
    labels = sorted(
        {
            label
            for node in flow.nodes.values()
            if isinstance(node, AskNode)
            for label in node.accepts
        }
    )
    return [*labels, UNKNOWN, OTHER_VALUE, "7", JUNK]


def check_folds(flow: Flow, path: Walk, run: Run) -> None:
    """Each fold of the run shows exactly the nodes its move says it shows."""
    folds = [m for m in path if m.edge == FOLD]
    branched = [t.result for t in run.transitions if t.result["status"] == "branched"]
    assert [list(m.shown) for m in folds] == [fold_shown(r) for r in branched]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_run_of_the_engine_is_a_path_of_the_model(data: st.DataObject) -> None:
    flow = data.draw(stuck_flows())
    model = FlowMoves(flow)
    keys = [*flow.value_keys, "nope"]
    values = st.dictionaries(st.sampled_from(keys), st.sampled_from(alphabet(flow)), max_size=5)
    try:
        transition = engine.start(flow, data.draw(values))
    except Refusal:
        transition = engine.start(flow)
    engine_moves(flow, model, Run([transition]))
    for _ in range(data.draw(st.integers(min_value=1, max_value=14))):
        state = transition.state
        action = data.draw(st.sampled_from(["answer", "answer", "answer", "back", "back_to"]))
        try:
            if action == "answer":
                choice = data.draw(st.none() | st.sampled_from(alphabet(flow)))
                transition = engine.answer(flow, state, choice=choice, values=data.draw(values))
            elif action == "back":
                transition = engine.back(flow, state)
            else:
                on_path = [e.id for e in state.effective_path()] or [flow.entry]
                transition = engine.back(flow, state, data.draw(st.sampled_from(on_path)))
        except Refusal:
            continue
        path = engine_moves(flow, model, Run([transition]))
        for move in path:
            assert move in model.at[move.node]


def all_paths(model: FlowMoves, limit: int) -> list[Walk]:
    return list(model.paths(limit=limit))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_path_of_the_model_is_a_run_of_the_engine(data: st.DataObject) -> None:
    flow = data.draw(stuck_flows(max_nodes=7))
    model = FlowMoves(flow)
    paths = all_paths(model, 3000)
    chosen = paths if len(paths) <= 40 else data.draw(st.lists(st.sampled_from(paths), max_size=40))
    for path in chosen:
        run = drive(flow, path)
        assert engine_moves(flow, model, run) == path
        check_folds(flow, path, run)


def bundled_flows() -> list[Flow]:
    catalog = load_catalog(BUNDLED_FLOWS)
    return list(catalog.flows.values())


@pytest.mark.parametrize("flow", bundled_flows(), ids=lambda flow: flow.id)
def test_every_path_of_a_bundled_flow_is_a_run_of_the_engine(flow: Flow) -> None:
    model = FlowMoves(flow)
    count = 0
    for path in model.paths():
        run = drive(flow, path, check_values(flow, path, lambda slot: regex_value(slot.pattern)))
        assert engine_moves(flow, model, run) == path
        check_folds(flow, path, run)
        count += 1
    assert count > 200  # every bundled flow has a few hundred paths; all of them were played


def test_a_collect_with_only_an_unpatterned_optional_slot_never_stalls() -> None:
    flow = next(f for f in bundled_flows() if f.id == "refund_request")
    order = flow.nodes["n_order"]
    assert isinstance(order, CollectNode)
    loose = replace(
        order, slots=tuple(replace(s, required=False, pattern=None) for s in order.slots)
    )
    relaxed = replace(flow, nodes=frozen_mapping({**flow.nodes, "n_order": loose}))
    assert [(m.via, m.ending) for m in moves(relaxed, "n_order")] == [
        ("asked", None),
        ("skipped", None),
    ]
    assert [m.ending.state for m in moves(flow, "n_order") if m.ending] == ["stalled"]


def test_an_ask_with_an_unknown_route_neither_folds_nor_stalls() -> None:
    flow = next(f for f in bundled_flows() if f.id == "payment_failed")
    edges = [(m.via, m.edge) for m in moves(flow, "n_error_code")]
    assert edges == [
        ("asked", "E01"),
        ("asked", "E02"),
        ("asked", "__other__"),
        ("asked", "__unknown__"),
        ("skipped", "E01"),
        ("skipped", "E02"),
        ("skipped", "__other__"),
        ("skipped", "__unknown__"),
    ]


def shapes() -> list[Flow]:
    """One tiny flow per way a node can be written: the node under test is ``x``, entered
    first; every route leads to an end (or, for folds, to a common ask or end)."""
    end = EndNode("e1", "done", "ok")
    end2 = EndNode("e2", "other", "no")
    found: list[Flow] = []
    for required, pattern, policy, max_unmatched in itertools.product(
        (True, False), (None, "[0-9]+"), ("escalate", "broaden"), (1, 2)
    ):
        slots = (Slot("s", "ask s", required=required, pattern=pattern),)
        x = CollectNode("x", "collect", slots, "e1", on_unknown=policy)
        found.append(shape({"x": x, "e1": end}, max_unmatched=max_unmatched))
    for other, unknown, policy, common in itertools.product(
        (False, True), (False, True), ("escalate", "broaden"), ("none", "end", "ask", "wide")
    ):
        labels = ("a", "b", "c") if common == "wide" else ("a", "b")
        targets = {"a": "t", "b": "e2" if common == "none" else "t", "c": "t"}
        nexts = {label: targets[label] for label in labels}
        if other:
            nexts[OTHER] = "e2" if common == "none" else "t"
        if unknown:
            nexts[UNKNOWN] = "t"
        x = AskNode(
            "x",
            "ask",
            frozen_mapping({label: f"when {label}" for label in labels}),
            frozen_mapping(nexts),
            on_unknown=policy,
        )
        after = (
            AskNode("t", "then", frozen_mapping({"y": "y"}), frozen_mapping({"y": "e1"}))
            if common == "ask"
            else TellNode("t", "tell", "e1")
        )
        found.append(
            shape({"x": x, "t": after, "e1": end, "e2": end2}, fanout=2 if common == "wide" else 3)
        )
    return found


def shape(nodes: dict[str, Node], *, max_unmatched: int = 2, fanout: int = 3) -> Flow:
    return Flow(
        id="shape",
        title="Shape",
        category="test",
        entry="x",
        nodes=frozen_mapping(nodes),
        max_unmatched=max_unmatched,
        max_branch_fanout=fanout,
    )


def engine_transitions(flow: Flow, depth: int = 4) -> list[Transition]:
    """Every transition of runs of up to ``depth`` calls over a small alphabet of inputs
    at node x, each once. The engine is a function of (state, call), so a state reached
    along two histories is followed once: the same transitions as following every run
    (8 thousand states instead of 400 thousand runs over all shapes)."""
    inputs: list[dict[str, Any]] = [{"choice": v} for v in ["a", "b", UNKNOWN, OTHER_VALUE]]
    key = "s" if isinstance(flow.nodes["x"], CollectNode) else "x"
    inputs += [{"values": {key: v}} for v in ["7", JUNK, UNKNOWN, "a", OTHER_VALUE]]
    starts = [{}] + [{key: v} for v in ["7", JUNK, UNKNOWN, "a", "b", OTHER_VALUE]]
    found: dict[str, Transition] = {}
    followed: set[str] = set()

    def reached(transitions: list[Transition]) -> list[RunState]:
        for step in transitions:
            found.setdefault(repr(step), step)
        fresh = {repr(step.state): step.state for step in transitions}
        new = [state for seen, state in fresh.items() if seen not in followed]
        followed.update(fresh)
        return new

    frontier: list[RunState] = []
    for values in starts:
        try:
            frontier += reached([engine.start(flow, values)])
        except Refusal:
            continue
    for _ in range(depth):
        following: list[Transition] = []
        for state in frontier:
            for call in [*inputs, {"back": None}]:
                try:
                    if "back" in call:
                        following.append(engine.back(flow, state))
                    else:
                        following.append(engine.answer(flow, state, **call))
                except Refusal:
                    continue
        frontier = reached(following)
    return list(found.values())


@pytest.mark.parametrize("flow", shapes())
def test_every_node_shape_matches_the_engine_exhaustively(flow: Flow) -> None:
    model = FlowMoves(flow)
    for step in engine_transitions(flow):
        engine_moves(flow, model, Run([step]))
    for path in model.paths():
        run = drive(flow, path)
        assert engine_moves(flow, model, run) == path, path
        check_folds(flow, path, run)
