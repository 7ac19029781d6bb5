"""The compiled answer (ADRs 0093, 0094): a label alone, answered from the walk compiled
from the flow's ``label_walks()``, gives exactly the transition the engine's node-by-node
walk gives, and the common answer takes it."""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from flowcore.common.errors import ErrorObject, Refusal, error_object
from flowcore.flow.model import AskNode, EndNode, Flow, frozen_mapping
from flowcore.run import engine
from flowcore.run.engine import Transition
from flowcore.run.state import RunState
from tests.flowcore.run.engine.strategies import any_value, any_values, flows
from tests.flowcore.run.engine.test_properties import loaded, loaded_text

Outcome = Transition | ErrorObject  # what a call gives: a transition, or the refusal's object

# a_first's "yes" passes two tells and waits at a_second, its "no" ends the run;
# a_second's "yes" leads to c_details, whose required slot may be given in advance.
FLOW = """\
id: walks
title: Walks
category: test
entry: a_first
nodes:
  - id: a_first
    kind: ask
    say: ask the first thing
    accepts: {"yes": agrees, "no": disagrees}
    next: {"yes": t_one, "no": e_done}
  - id: t_one
    kind: tell
    say: say one thing
    next: t_two
  - id: t_two
    kind: tell
    say: say another
    next: a_second
  - id: a_second
    kind: ask
    say: ask the second thing
    accepts: {"yes": agrees, "no": disagrees}
    next: {"yes": c_details, "no": e_done}
  - id: c_details
    kind: collect
    say: collect the order
    slots:
      order: {ask: the order number, required: true, pattern: "[0-9]{4}"}
    next: e_done
  - id: e_done
    kind: end
    say: wrap up
    outcome: resolved
"""


def from_compiled_walk(flow: Flow, state: RunState, choice: object) -> Outcome | None:
    try:
        return engine._answered_by_walk(flow, state, choice)
    except Refusal as refused:
        return error_object(refused)


def node_by_node(flow: Flow, state: RunState, choice: object) -> Outcome:
    try:
        return engine._Call(flow, state, asked=state.node).run({}, choice=choice)  # type: ignore[arg-type]
    except Refusal as refused:
        return error_object(refused)


def same(compiled: Outcome, stepwise: Outcome) -> None:
    if not isinstance(compiled, Transition) or not isinstance(stepwise, Transition):
        assert compiled == stepwise
        return
    assert compiled.state == stepwise.state
    # The stored result is its exact text, so the keys' order counts too.
    assert json.dumps(compiled.result) == json.dumps(stepwise.result)


def a_reached_state(data: st.DataObject, flow: Flow) -> RunState:
    """A state the engine reaches by any mix of calls: values given in advance, answers,
    unmatched attempts, going back, a person's answer after a stall."""
    try:
        state = engine.start(flow, data.draw(any_values(flow))).state
    except Refusal:
        state = engine.start(flow).state
    for _ in range(data.draw(st.integers(min_value=0, max_value=8))):
        action = data.draw(st.sampled_from(["answer", "answer", "values", "back", "resolve"]))
        try:
            if action == "answer" and state.state == "active":
                state = engine.answer(flow, state, choice=data.draw(any_value(flow))).state
            elif action == "values" and state.state == "active":
                values = data.draw(any_values(flow))
                state = engine.answer(flow, state, values=values or {"nope": "x"}).state
            elif action == "back":
                state = engine.back(flow, state).state
            elif action == "resolve" and state.state == "stalled":
                node = flow.nodes[state.node or ""]
                labels = list(node.accepts) if isinstance(node, AskNode) else ["x"]
                choice = data.draw(st.sampled_from(labels))
                state = engine.resolve(flow, state, choice=choice).state
        except Refusal:
            continue
    return state


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_a_label_answered_from_the_compiled_walk_is_the_node_by_node_transition(
    data: st.DataObject,
) -> None:
    flow = loaded(data.draw(flows()))
    state = a_reached_state(data, flow)
    if state.state != "active":
        return
    node = flow.nodes[state.node or ""]
    labels = list(node.accepts) if isinstance(node, AskNode) else []
    choice = data.draw(st.sampled_from(labels) | any_value(flow) if labels else any_value(flow))
    compiled = from_compiled_walk(flow, state, choice)
    event("compiled" if compiled is not None else "node by node")
    if compiled is not None:
        same(compiled, node_by_node(flow, state, choice))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_state_the_engine_makes_carries_the_length_of_its_effective_path(
    data: st.DataObject,
) -> None:
    flow = loaded(data.draw(flows()))
    state = a_reached_state(data, flow)
    assert state.passed == len(state.effective_path())
    if state.state in ("active", "stalled"):
        closed = engine.close(state)
        assert closed.passed == len(closed.effective_path())


def test_a_label_leading_through_tells_to_a_question_or_an_end_takes_the_compiled_walk() -> None:
    flow = loaded_text(FLOW)
    waiting = engine.start(flow).state
    for label, status, reached in (("yes", "advanced", "a_second"), ("no", "completed", "e_done")):
        compiled = engine._answered_by_walk(flow, waiting, label)
        assert isinstance(compiled, Transition), label
        assert (compiled.result["status"], compiled.state.node) == (status, reached)
        same(compiled, node_by_node(flow, waiting, label))


def test_a_value_given_in_advance_for_the_node_reached_leaves_the_answer_node_by_node() -> None:
    flow = loaded_text(FLOW)
    given = engine.start(flow, {"a_second": "no"}).state
    assert given.node == "a_first"
    assert engine._answered_by_walk(flow, given, "yes") is None
    assert engine.answer(flow, given, choice="yes").state.state == "completed"


def test_a_collect_whose_required_slot_was_given_in_advance_is_passed_node_by_node() -> None:
    flow = loaded_text(FLOW)
    given = engine.start(flow, {"a_first": "yes", "order": "1234"}).state
    assert given.node == "a_second"
    assert engine._answered_by_walk(flow, given, "yes") is None
    answered = engine.answer(flow, given, choice="yes")
    assert (answered.result["status"], answered.state.node) == ("completed", "e_done")
    assert answered.result["skipped"] == ["c_details"]


def test_a_label_after_an_unmatched_attempt_clears_the_nodes_count() -> None:
    flow = loaded_text(FLOW)
    missed = engine.answer(flow, engine.start(flow).state, choice="perhaps").state
    assert dict(missed.unmatched) == {"a_first": 1}
    compiled = engine._answered_by_walk(flow, missed, "yes")
    assert isinstance(compiled, Transition)
    assert dict(compiled.state.unmatched) == {}
    same(compiled, node_by_node(flow, missed, "yes"))


# Labels lint refuses: reserved, or read as "__unknown__" (two of them, so neither is
# the label "__unknown__" stands for).
ODD_LABELS = [("__reserved", "fine"), (" __unknown__", "__unknown__ ")]


@pytest.mark.parametrize("labels", ODD_LABELS)
def test_a_label_only_a_flow_built_without_lint_can_have_is_answered_as_node_by_node(
    labels: tuple[str, str],
) -> None:
    flow = Flow(
        id="odd",
        title="Odd",
        category="test",
        entry="a_odd",
        nodes=frozen_mapping(
            {
                "a_odd": AskNode(
                    id="a_odd",
                    say="ask",
                    accepts=frozen_mapping({label: label for label in labels}),
                    next=frozen_mapping({label: "e_done" for label in labels}),
                ),
                "e_done": EndNode(id="e_done", say="wrap up", outcome="resolved"),
            }
        ),
    )
    waiting = engine.start(flow).state
    odd = labels[0]
    try:
        answered: Outcome = engine.answer(flow, waiting, choice=odd)
    except Refusal as refused:
        answered = error_object(refused)
    same(answered, node_by_node(flow, waiting, odd))
