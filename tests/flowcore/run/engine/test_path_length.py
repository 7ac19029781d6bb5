"""A state carries the length of its effective path (``RunState.passed``): stored with
the run and compared by the replay, so every state the engine makes must hold the true
count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.common.errors import Refusal
from flowcore.flow.model import AskNode, Flow
from flowcore.run import engine
from flowcore.run.state import RunState
from tests.flowcore.run.engine.strategies import any_value, any_values, flows
from tests.flowcore.run.engine.test_properties import loaded


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
