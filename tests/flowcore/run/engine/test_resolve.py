"""A person resolves a stalled run: the engine takes the person's answer as
an agent's, from the state the run had when it reached the node, and marks the node
``via: "person"``; an answer that does not settle the node is refused and changes nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flowcore.common.errors import InvalidInput, StepNotAllowed
from flowcore.flow.model import UNKNOWN, CollectNode, Flow
from flowcore.run import engine
from flowcore.run.state import RunState
from tests.flowcore.run.engine.strategies import flows, valid_answers
from tests.flowcore.run.engine.test_transcripts import load_flow
from tests.support.paths import BUNDLED_FLOWS

ESCALATING = """\
id: escalating
title: Escalating
category: test
entry: a_kind
on_unknown: escalate
on_stuck: a colleague decides
nodes:
  - id: a_kind
    kind: ask
    say: ask what kind of problem it is
    accepts: {billing: about money, access: about logging in}
    next: {billing: c_ids, access: a_reset}
  - id: c_ids
    kind: collect
    say: collect the ids
    slots:
      invoice:
        ask: the invoice number
        required: true
        pattern: "I[0-9]{3}"
        hint: I and three digits
      note: anything else
    next: e_billing
  - id: a_reset
    kind: ask
    say: ask whether a reset helped
    accepts: {"yes": it helped, "no": it did not}
    next: {"yes": e_done, "no": e_done}
  - id: e_billing
    kind: end
    say: billing done
    outcome: billed
  - id: e_done
    kind: end
    say: wrap up
    outcome: resolved
"""


@pytest.fixture(scope="module")
def flow() -> Flow:
    return load_flow(ESCALATING)


def stalled_at_kind(flow: Flow) -> RunState:
    state = engine.start(flow).state
    transition = engine.answer(flow, state, choice=UNKNOWN)
    assert transition.result["status"] == "stalled"
    return transition.state


def test_a_person_answer_moves_a_stalled_run_on_with_via_person(flow: Flow) -> None:
    state = stalled_at_kind(flow)

    moved = engine.resolve(flow, state, choice="access")

    assert moved.state.state == "active"
    assert moved.state.node == "a_reset"
    assert [e.to_dict() for e in moved.state.path] == [
        {"id": "a_kind", "kind": "ask", "via": "person", "value": "access"}
    ]
    assert moved.state.values == {"a_kind": "access"}
    assert moved.state.handoff is None
    assert moved.result["status"] == "advanced"
    assert moved.result["next"].startswith("A person answered a_kind. ")


def test_after_a_person_answer_the_directive_says_so_then_what_to_do(flow: Flow) -> None:
    moved = engine.resolve(flow, stalled_at_kind(flow), choice="access")

    said = engine.directive(flow, moved.state)

    assert said.startswith("A person answered a_kind (access) and handed the run back")
    assert "call guide_answer" in said
    # Once the agent answers the next node, the note is gone.
    after = engine.answer(flow, moved.state, choice="yes").state
    assert "A person answered" not in engine.directive(flow, after)


def test_a_person_fills_a_collect_that_stalled_and_the_run_completes(flow: Flow) -> None:
    state = engine.answer(flow, engine.start(flow).state, choice="billing").state
    stalled = engine.answer(flow, state, values={"invoice": UNKNOWN}).state
    assert stalled.state == "stalled"

    done = engine.resolve(flow, stalled, values={"invoice": "I042"})

    assert done.state.state == "completed"
    assert done.state.outcome == "billed"
    assert done.state.path[-1].to_dict() == {"id": "c_ids", "kind": "collect", "via": "person"}
    assert engine.directive(flow, done.state).startswith(
        "A person answered c_ids and handed the run back to you. "
    )


def test_a_run_can_stall_again_further_on_and_be_answered_again(flow: Flow) -> None:
    state = engine.resolve(flow, stalled_at_kind(flow), choice="access").state
    again = engine.answer(flow, state, choice=UNKNOWN)
    assert again.result["status"] == "stalled"

    done = engine.resolve(flow, again.state, choice="no")

    assert done.state.state == "completed"
    assert [(e.id, e.via) for e in done.state.path] == [
        ("a_kind", "person"),
        ("a_reset", "person"),
    ]


@pytest.mark.parametrize(
    ("answer", "error", "candidates"),
    [
        ({"choice": "acess"}, "not a label", ["access"]),
        ({"choice": "refund"}, "not a label", ["billing", "access"]),
        # "unknown" points an agent to __unknown__, which a person cannot send: the labels.
        ({"choice": "unknown"}, "not a label", ["billing", "access"]),
        ({"choice": "billing, access"}, "not a label", ["billing", "access"]),
        ({"choice": "__unknown__"}, "a person must answer", None),
        ({"values": {"a_kind": " __unknown__ "}}, "a person must answer", None),
        ({}, "nothing to answer", None),
        ({"values": {"a_reset": "yes"}}, "node not answered", None),
    ],
)
def test_an_answer_that_does_not_settle_the_node_is_refused(
    flow: Flow, answer: dict[str, Any], error: str, candidates: list[str] | None
) -> None:
    state = stalled_at_kind(flow)

    with pytest.raises(InvalidInput) as refused:
        engine.resolve(flow, state, **answer)

    assert refused.value.error == error
    assert (list(refused.value.candidates) if refused.value.candidates else None) == candidates


def test_a_slot_that_does_not_fit_is_refused_with_its_hint(flow: Flow) -> None:
    state = engine.answer(flow, engine.start(flow).state, choice="billing").state
    stalled = engine.answer(flow, state, values={"invoice": UNKNOWN}).state

    with pytest.raises(InvalidInput) as refused:
        engine.resolve(flow, stalled, values={"invoice": "42"})

    assert refused.value.error == "value does not fit"
    assert refused.value.reason == "'42' does not fit invoice: I and three digits"


@pytest.mark.parametrize("how", ["active", "completed", "closed"])
def test_only_a_stalled_run_takes_a_person_answer(flow: Flow, how: str) -> None:
    state = engine.start(flow).state
    if how == "completed":
        state = engine.answer(flow, state, values={"a_kind": "access", "a_reset": "yes"}).state
    elif how == "closed":
        state = engine.close(state)

    with pytest.raises(StepNotAllowed) as refused:
        engine.resolve(flow, state, choice="access")

    assert refused.value.error == "run is not stalled"


def test_a_stall_after_running_out_of_attempts_starts_the_person_with_a_clean_count(
    flow: Flow,
) -> None:
    state = engine.start(flow).state
    for _ in range(flow.max_unmatched):
        transition = engine.answer(flow, state, choice="nonsense words")
        state = transition.state
    assert state.state == "stalled"

    moved = engine.resolve(flow, state, choice="billing")

    assert moved.state.unmatched == {}
    assert moved.state.node == "c_ids"


def test_bundled_refund_request_stalls_at_the_order_and_a_person_resolves_it() -> None:
    refund = load_flow((BUNDLED_FLOWS / "refund_request.yaml").read_text(encoding="utf-8"))
    stalled = engine.answer(
        refund, engine.start(refund).state, values={"order_number": UNKNOWN}
    ).state

    moved = engine.resolve(refund, stalled, values={"order_number": "A00118"})

    assert moved.state.node == "n_reason"
    assert moved.state.path[0].via == "person"


# --- properties -------------------------------------------------------------------------


def _walk_to_a_stall(flow: Flow, draw: st.DrawFn) -> tuple[Flow, RunState, str] | None:
    """Answer from the entry, sending ``__unknown__`` at one waiting node; the stalled
    state and that node when the run stalled there, else None."""
    flow = dataclasses.replace(flow, on_unknown="escalate")  # stalls rather than folds
    state = engine.start(flow).state
    for _ in range(len(flow.nodes) + 1):
        if state.state != "active":
            return None
        assert state.node is not None
        node = flow.nodes[state.node]
        if draw(st.booleans()):
            transition = engine.answer(flow, state, choice=UNKNOWN)
            if transition.state.state == "stalled":
                return flow, transition.state, node.id
            state = transition.state
            continue
        answers = valid_answers(flow, draw)
        keys = engine._keys_of(flow, node.id)
        given = {k: answers[k] for k in keys if k in answers}
        if not given:
            return None
        state = engine.answer(flow, state, values=given).state
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data(), flow=flows())
def test_a_person_answer_is_the_agent_answer_on_the_node_reached_again(
    data: st.DataObject, flow: Flow
) -> None:
    """Resolving a stalled run gives what the agent would have got by answering the node
    when the run reached it: the same state, but ``via: person`` on that node, and the
    same result, but for the opening sentence of ``next``."""
    found = _walk_to_a_stall(flow, data.draw)
    assume(found is not None)
    assert found is not None
    flow, stalled, node_id = found
    node = flow.nodes[node_id]
    answers = valid_answers(flow, data.draw)
    given = {k: answers[k] for k in engine._keys_of(flow, node_id) if k in answers}
    assume(given)
    if isinstance(node, CollectNode):
        assume(all(s.name in given for s in node.required_slots))

    by_person = engine.resolve(flow, stalled, values=given)
    by_agent = engine.answer(flow, engine._reopened(flow, stalled), values=given)

    assert by_person.state.state != "stalled" or by_person.state.node != node_id
    entry = next(e for e in by_person.state.path if e.id == node_id)
    assert entry.via == "person"
    swapped = tuple(
        e._replace(via="asked") if e.id == node_id and e.via == "person" else e
        for e in by_person.state.path
    )
    assert by_person.state._replace(path=swapped) == by_agent.state
    person_result = dict(by_person.result)
    assert person_result.pop("next") == f"A person answered {node_id}. " + by_agent.result["next"]
    agent_result = dict(by_agent.result)
    agent_result.pop("next")
    assert person_result == agent_result


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data(), flow=flows())
def test_a_refused_person_answer_leaves_the_run_as_it_was(data: st.DataObject, flow: Flow) -> None:
    found = _walk_to_a_stall(flow, data.draw)
    assume(found is not None)
    assert found is not None
    flow, stalled, node_id = found
    before = stalled.to_dict()
    choice = data.draw(st.sampled_from([UNKNOWN, "__nothing__", "zz-not-a-label-zz"]))

    try:
        engine.resolve(flow, stalled, choice=choice)
    except (InvalidInput, StepNotAllowed):
        pass

    assert stalled.to_dict() == before
