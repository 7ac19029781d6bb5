"""Properties of the engine over random valid flows (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flows_app.domain import engine
from flows_app.domain.building import build_flow
from flows_app.domain.engine import Transition
from flows_app.domain.errors import Refusal
from flows_app.domain.findings import has_errors
from flows_app.domain.model import UNKNOWN, AskNode, Category, CollectNode, Flow
from flows_app.domain.state import RunState
from tests.engine.strategies import any_value, any_values, flow_to_yaml, flows, valid_answers

STATUSES = {"advanced", "completed", "unmatched", "branched", "stalled"}


def answer_for(flow: Flow, state: RunState, answers: dict[str, str]) -> Transition:
    """Answer the node the run waits at, as a person would, one node per call."""
    assert state.node is not None
    node = flow.nodes[state.node]
    if isinstance(node, AskNode):
        return engine.answer(flow, state, choice=answers[node.id])
    assert isinstance(node, CollectNode)
    return engine.answer(flow, state, values={s.name: answers[s.name] for s in node.slots})


def walk(flow: Flow, answers: dict[str, str]) -> list[Transition]:
    steps = [engine.start(flow)]
    while steps[-1].state.state == "active":
        steps.append(answer_for(flow, steps[-1].state, answers))
        assert len(steps) <= len(flow.nodes) + 1, "the run must end within one call per node"
    return steps


def essence(state: RunState) -> tuple[Any, ...]:
    """A state without its history: what decides every later transition."""
    return (
        state.state,
        state.node,
        dict(state.values),
        dict(state.stamps),
        dict(state.unmatched),
        state.outcome,
        state.folded,
        state.handoff,
        [(e.id, e.via, e.value) for e in state.effective_path()],
    )


def assert_invariants(flow: Flow, state: RunState) -> None:
    passed = [e.id for e in state.effective_path()]
    assert len(passed) == len(set(passed)), "a node was entered twice"
    if state.state == "active":
        assert state.node is not None and state.node not in passed
        assert isinstance(flow.nodes[state.node], AskNode | CollectNode)
    for key in state.values:
        assert flow.owner_of(key) is not None
    assert set(state.stamps) == set(state.values)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_prefilling_a_paths_values_ends_where_answering_step_by_step_ends(
    data: st.DataObject,
) -> None:
    flow = data.draw(flows())
    answers = valid_answers(flow, data.draw)
    by_steps = walk(flow, answers)[-1]
    prefilled = engine.start(flow, answers)
    assert prefilled.state.state == by_steps.state.state == "completed"
    assert prefilled.state.node == by_steps.state.node
    assert prefilled.state.outcome == by_steps.state.outcome
    assert [e.id for e in prefilled.state.effective_path()] == [
        e.id for e in by_steps.state.effective_path()
    ]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_back_then_the_same_answer_gives_the_same_state(data: st.DataObject) -> None:
    flow = data.draw(flows())
    answers = valid_answers(flow, data.draw)
    steps = walk(flow, answers)
    if len(steps) < 2:
        return
    k = data.draw(st.integers(min_value=0, max_value=len(steps) - 2))
    before, after = steps[k], steps[k + 1]
    assert before.state.node is not None
    reopened = engine.back(flow, after.state, before.state.node)
    assert essence(reopened.state)[:-1] == essence(before.state)[:-1]
    again = answer_for(flow, reopened.state, answers)
    assert essence(again.state) == essence(after.state)
    assert again.result == after.result


def loaded(flow: Flow) -> Flow:
    """The generated flow written out as YAML and read back by the real loader, lint-clean."""
    text = flow_to_yaml(flow)
    built, findings = build_flow(text, categories={"test": Category("test", "Test")})
    assert built is not None and not has_errors(findings), findings
    return built


@settings(max_examples=100, deadline=None)
@given(flows())
def test_generated_flows_lint_clean_and_load_back_identically(flow: Flow) -> None:
    assert loaded(flow) == flow


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_input_crashes_the_engine_or_enters_a_node_twice(data: st.DataObject) -> None:
    flow = loaded(data.draw(flows()))
    try:
        transition = engine.start(flow, data.draw(any_values(flow)))
    except Refusal:
        transition = engine.start(flow)
    state = transition.state
    for _ in range(data.draw(st.integers(min_value=1, max_value=12))):
        action = data.draw(st.sampled_from(["answer", "answer", "back", "back_to", "close"]))
        try:
            if action == "answer":
                choice = data.draw(st.none() | any_value(flow))
                transition = engine.answer(
                    flow, state, choice=choice, values=data.draw(any_values(flow))
                )
            elif action == "back":
                transition = engine.back(flow, state)
            elif action == "back_to":
                transition = engine.back(flow, state, data.draw(st.sampled_from(list(flow.nodes))))
            else:
                state = engine.close(state)
                continue
        except Refusal as refused:
            assert refused.error and refused.reason and refused.next
            continue
        assert transition.result["status"] in STATUSES
        state = transition.state
        assert_invariants(flow, state)
        assert RunState.from_dict(state.to_dict()) == state


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_unknown_everywhere_ends_in_a_fold_a_stall_or_an_end(data: st.DataObject) -> None:
    flow = data.draw(flows())
    values = {key: UNKNOWN for key in flow.value_keys}
    transition = engine.start(flow, values)
    assert transition.result["status"] in {"branched", "stalled", "completed", "advanced"}
    if transition.result["status"] == "stalled":
        assert transition.state.state == "stalled"
        assert transition.result["reason"] in {"escalate", "unfoldable"}
        assert transition.result["handoff"]
