"""Refusals the transcripts cannot express, pinned as the error object an agent gets:
a run entering a node twice (only a flow that bypassed lint can), a closed run, and
more values in one call than the limit."""

from __future__ import annotations

import pytest

from flowcore.common.errors import InvalidInput, StepNotAllowed, error_object
from flowcore.common.limits import MAX_VALUES_PER_CALL
from flowcore.flow.model import AskNode, EndNode, Flow, TellNode, frozen_mapping
from flowcore.run import engine
from tests.flowcore.run.engine.test_transcripts import load_flow

# Lint refuses this flow (a_again leads back to t_hello); built by hand to reach the
# engine's own guard.
LOOP = Flow(
    id="loop",
    title="Loop",
    category="test",
    entry="t_hello",
    nodes=frozen_mapping(
        {
            "t_hello": TellNode(id="t_hello", say="greet them", next="a_again"),
            "a_again": AskNode(
                id="a_again",
                say="ask whether to start over",
                accepts=frozen_mapping({"again": "start over", "stop": "stop"}),
                next=frozen_mapping({"again": "t_hello", "stop": "e_done"}),
            ),
            "e_done": EndNode(id="e_done", say="wrap up", outcome="resolved"),
        }
    ),
)
CYCLE = {
    "error": "flow has a cycle",
    "reason": "t_hello would be entered twice",
    "next": "Report the flow to its authors; hand the conversation to a human.",
    "retryable": False,
}

LINEAR = """\
id: linear
title: Linear
category: test
entry: a_first
nodes:
  - id: a_first
    kind: ask
    say: ask the first thing
    accepts: {"yes": agrees, "no": disagrees}
    next: {"yes": e_done, "no": e_done}
  - id: e_done
    kind: end
    say: wrap up
    outcome: resolved
"""


def test_a_run_that_would_enter_a_node_twice_is_refused_as_a_cycle() -> None:
    waiting = engine.start(LOOP)
    assert waiting.state.node == "a_again"
    with pytest.raises(StepNotAllowed) as caught:
        engine.answer(LOOP, waiting.state, choice="again")
    assert error_object(caught.value) == CYCLE
    with pytest.raises(StepNotAllowed) as caught:
        engine.start(LOOP, {"a_again": "again"})
    assert error_object(caught.value) == CYCLE
    # The other label leaves the loop.
    assert engine.answer(LOOP, waiting.state, choice="stop").result["status"] == "completed"


@pytest.mark.parametrize(
    ("action", "refused"),
    [
        ("answer", "it takes no more answers"),
        ("back", "a closed run cannot be reopened"),
        ("close", "it is closed already"),
    ],
)
def test_a_closed_run_refuses_every_call_saying_it_was_closed(action: str, refused: str) -> None:
    flow = load_flow(LINEAR)
    closed = engine.close(engine.start(flow).state)
    assert closed.state == "closed"
    with pytest.raises(StepNotAllowed) as caught:
        if action == "answer":
            engine.answer(flow, closed, choice="yes")
        elif action == "back":
            engine.back(flow, closed)
        else:
            engine.close(closed)
    assert error_object(caught.value) == {
        "error": "run is closed",
        "reason": f"the run was closed with guide_close: {refused}",
        "next": "Start a new run with guide_start if the person still needs the procedure.",
        "retryable": False,
    }
    assert engine.directive(flow, closed) == (
        "The run is closed. Start a new run with guide_start if the person needs the procedure."
    )


def test_more_values_in_one_call_than_the_limit_are_refused() -> None:
    flow = load_flow(LINEAR)
    limit = MAX_VALUES_PER_CALL
    at_limit = {f"key_{i}": "x" for i in range(limit)}
    # At the limit the call is taken (every key unknown to the flow is ignored).
    taken = engine.start(flow, at_limit)
    assert len(taken.result["ignored"]) == limit
    over = {**at_limit, "a_first": "yes"}
    too_many = {
        "error": "too many values",
        "reason": f"{limit + 1} keys in one call; the limit is {limit}",
        "next": "Send only the keys of index that the person has answered.",
        "retryable": True,
    }
    with pytest.raises(InvalidInput) as caught:
        engine.start(flow, over)
    assert error_object(caught.value) == too_many
    with pytest.raises(InvalidInput) as caught:
        engine.answer(flow, taken.state, values=over)
    assert error_object(caught.value) == too_many
