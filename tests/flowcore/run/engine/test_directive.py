"""guide_status's ``next``: what an agent resuming a run is told to do, for each state.

``engine.directive`` is reached in-process only here (guide_status is otherwise tested
over HTTP); the sentences are written out, since a wrong one is the bug: an active run
told it is closed, a completed run not told its outcome.
"""

from __future__ import annotations

from flowcore.flow.building import build_flow
from flowcore.flow.findings import has_errors
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.state import RunState

FLOW = """\
id: status_demo
title: Status demo
category: test
entry: a_kind
nodes:
  - id: a_kind
    kind: ask
    say: Which kind
    accepts: {hw: hardware, sw: software}
    next: {hw: c_details, sw: e_done}
  - id: c_details
    kind: collect
    say: Details
    slots:
      serial:
        ask: The serial number
        required: true
    next: e_done
  - id: e_done
    kind: end
    say: Done.
    outcome: resolved
"""

ASK = (
    "Ask what node.say asks, in your own words. Map the reply to one label of node.accepts "
    'and call guide_answer with choice=<label> (choice="__unknown__" if they do not know).'
)
COLLECT = (
    "Collect what node.say describes: ask for the slots in node.slots and call guide_answer "
    'with values={slot: value} ("__unknown__" for a required slot they cannot give).'
)


def flow() -> Flow:
    built, findings = build_flow(FLOW, categories={"test": Category("test", "Test")})
    assert built is not None and not has_errors(findings), findings
    return built


def test_an_active_run_at_an_ask_is_told_to_ask_and_send_a_label() -> None:
    state = engine.start(flow()).state

    assert (state.state, state.node) == ("active", "a_kind")
    assert engine.directive(flow(), state) == ASK


def test_an_active_run_at_a_collect_is_told_to_collect_the_slots() -> None:
    state = engine.answer(flow(), engine.start(flow()).state, choice="hw").state

    assert (state.state, state.node) == ("active", "c_details")
    assert engine.directive(flow(), state) == COLLECT


def test_a_completed_run_is_told_it_is_finished_with_its_outcome() -> None:
    state = engine.answer(flow(), engine.start(flow()).state, choice="sw").state

    assert (state.state, state.outcome) == ("completed", "resolved")
    assert engine.directive(flow(), state) == (
        "The procedure is finished (outcome: resolved); nothing is left to ask. "
        "Use guide_back only if the person corrects an earlier answer."
    )


def test_a_completed_run_without_an_outcome_names_none() -> None:
    state = RunState(state="completed", node=None)

    assert engine.directive(flow(), state) == (
        "The procedure is finished; nothing is left to ask. "
        "Use guide_back only if the person corrects an earlier answer."
    )


def test_a_stalled_run_is_told_to_hand_over_with_the_handoff_note() -> None:
    state = engine.start(flow()).state._replace(state="stalled")

    assert engine.directive(flow(), state) == (
        "The run is waiting for a human: hand the conversation over with the handoff note. "
        "guide_back reopens a node if the missing answer turns up."
    )


def test_a_closed_run_is_told_to_start_a_new_one() -> None:
    state = engine.close(engine.start(flow()).state)

    assert state.state == "closed"
    assert engine.directive(flow(), state) == (
        "The run is closed. Start a new run with guide_start if the person needs the procedure."
    )
