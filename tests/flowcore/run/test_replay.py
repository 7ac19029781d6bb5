"""replay_differences: a history the engine itself produced replays to no difference;
each edit of a stored result, status, node, input or state is named at its step."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.replay import StoredRun, StoredStep, replay_differences
from flowcore.run.results import closed_result, result_status, start_result, step_result
from flowcore.run.state import PathEntry, RunState

RUN_ID = "r_replay"
FLOW = """
id: replayed
title: Replayed
category: test
entry: a_kind
nodes:
  - id: a_kind
    kind: ask
    say: which kind
    accepts: {parcel: a parcel, letter: a letter}
    next: {parcel: c_weight, letter: t_stamp}
  - id: c_weight
    kind: collect
    say: weigh it
    slots:
      grams: {ask: weight in grams, required: true, pattern: "[0-9]{1,4}", hint: digits}
    next: e_sent
  - id: t_stamp
    kind: tell
    say: use a stamp
    next: e_sent
  - id: e_sent
    kind: end
    outcome: sent
    say: done
"""


@pytest.fixture(scope="module")
def flow() -> Flow:
    built, findings = build_flow(FLOW, categories={"test": Category("test", "Test")})
    assert built is not None, findings
    return built


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


def history(flow: Flow, calls: int = 6) -> tuple[StoredRun, list[StoredStep]]:
    """A run walked through the engine as the services walk it: start, the label parcel, a
    rejected weight, a weight, back, then close; the first ``calls`` of those steps."""
    steps: list[StoredStep] = []
    state: RunState | None = None
    states: list[RunState] = []

    def record(tool: str, given: dict[str, Any], new: RunState, result: dict[str, Any]) -> None:
        nonlocal state
        before = "" if state is None else state.node or ""
        steps.append(
            StoredStep(
                seq=len(steps) + 1,
                tool=tool,
                input=as_json(given),
                result=as_json(result),
                status=result_status(result),
                node_before=before,
                node_after=new.node or "",
            )
        )
        state = new
        states.append(new)

    started = engine.start(flow, None)
    record(
        "guide_start", {"flow_id": "replayed"}, started.state, start_result(RUN_ID, flow, started)
    )
    for given in (
        {"choice": "parcel"},
        {"values": {"grams": "heavy"}},
        {"values": {"grams": "250"}},
    ):
        assert state is not None
        moved = engine.answer(flow, state, choice=given.get("choice"), values=given.get("values"))
        record("guide_answer", given, moved.state, step_result(RUN_ID, moved))
    assert state is not None
    back = engine.back(flow, state, "a_kind")
    record("guide_back", {"to": "a_kind"}, back.state, step_result(RUN_ID, back))
    closed = engine.close(back.state)
    record("guide_close", {"reason": "left"}, closed, closed_result(RUN_ID, "left"))
    state = states[calls - 1]
    run = StoredRun(
        run_id=RUN_ID,
        engine_state=as_json(state.to_dict()),
        state=state.state,
        node=state.node or "",
        outcome=state.outcome or "",
    )
    return run, steps[:calls]


def test_a_history_the_engine_produced_replays_without_a_difference(flow: Flow) -> None:
    run, steps = history(flow)
    assert [s.status for s in steps] == [
        "advanced",
        "advanced",
        "unmatched",
        "completed",
        "advanced",
        "closed",
    ]
    assert replay_differences(flow, run, steps) == []


def legacy_form(state: dict[str, Any]) -> dict[str, Any]:
    """A stored state as runs stored it before ADR 0088: every field, path entries as
    mappings."""
    return {
        "values": {},
        "stamps": {},
        "unmatched": {},
        "outcome": None,
        "folded": False,
        "handoff": None,
        **state,
        "path": [PathEntry.from_stored(e).to_dict() for e in state.get("path", [])],
    }


def test_a_state_stored_in_the_earlier_form_replays_without_a_difference(flow: Flow) -> None:
    run, steps = history(flow)
    legacy = replace(run, engine_state=legacy_form(dict(run.engine_state)))
    assert legacy.engine_state != run.engine_state
    assert replay_differences(flow, legacy, steps) == []


def test_an_edited_state_in_the_earlier_form_is_named(flow: Flow) -> None:
    run, steps = history(flow)
    legacy = legacy_form(dict(run.engine_state))
    legacy["path"][0] = {**legacy["path"][0], "id": "a_elsewhere"}
    assert replay_differences(flow, replace(run, engine_state=legacy), steps) == [
        "the stored state differs from the replay of the steps"
    ]


def without_passed(state: dict[str, Any]) -> dict[str, Any]:
    """A stored state as runs stored it before a state carried its path's length."""
    return {key: value for key, value in state.items() if key != "passed"}


@pytest.mark.parametrize("form", [without_passed, lambda s: legacy_form(without_passed(s))])
def test_a_state_stored_before_it_carried_its_path_length_replays_without_a_difference(
    flow: Flow, form: Any
) -> None:
    run, steps = history(flow, calls=2)
    assert run.engine_state["passed"] == 1
    earlier = replace(run, engine_state=form(dict(run.engine_state)))
    assert replay_differences(flow, earlier, steps) == []
    earlier.engine_state["path"][0] = ["a_elsewhere", "ask", "asked", "parcel"]
    assert replay_differences(flow, earlier, steps) == [
        "the stored state differs from the replay of the steps"
    ]


def test_an_edited_path_length_is_named(flow: Flow) -> None:
    run, steps = history(flow, calls=2)
    edited = replace(run, engine_state={**run.engine_state, "passed": 2})
    assert replay_differences(flow, edited, steps) == [
        "the stored state differs from the replay of the steps"
    ]


def test_an_edited_result_is_named_at_its_step_with_the_keys_that_differ(flow: Flow) -> None:
    run, steps = history(flow)
    steps[3] = replace(steps[3], result={**steps[3].result, "outcome": "refunded"})

    assert replay_differences(flow, run, steps) == [
        "step 4 (guide_answer): the stored result differs from the replay in outcome"
    ]


def test_an_edited_input_shows_in_every_later_step_and_the_state(flow: Flow) -> None:
    run, steps = history(flow)
    steps[1] = replace(steps[1], input={"choice": "letter"})

    found = replay_differences(flow, run, steps)

    assert found[0].startswith("step 2 (guide_answer): the stored result differs")
    assert "step 2 (guide_answer): node_after is 'c_weight'; the replay gives 'e_sent'" in found


def test_an_edited_state_or_column_is_named(flow: Flow) -> None:
    run, steps = history(flow)
    values = {**run.engine_state.get("values", {}), "grams": "9999"}
    edited = replace(run, engine_state={**run.engine_state, "values": values}, node="e_sent")

    assert replay_differences(flow, edited, steps) == [
        "the stored state differs from the replay of the steps",
        "the run's node is 'e_sent'; the replay gives 'a_kind'",
    ]


def test_an_edited_status_or_node_before_is_named(flow: Flow) -> None:
    run, steps = history(flow)
    steps[2] = replace(steps[2], status="advanced", node_before="a_kind")

    assert replay_differences(flow, run, steps) == [
        "step 3 (guide_answer): status is 'advanced'; the replay gives 'unmatched'",
        "step 3 (guide_answer): node_before is 'a_kind'; the replay gives 'c_weight'",
    ]


def test_a_step_the_engine_now_refuses_stops_the_replay_there(flow: Flow) -> None:
    run, steps = history(flow)
    steps[4] = replace(steps[4], input={"to": "e_sent"})

    found = replay_differences(flow, run, steps)

    assert found == ["step 5 (guide_back): the engine refuses its input (node not on the path)"]


def test_a_missing_first_step_or_an_unknown_tool_cannot_be_replayed(flow: Flow) -> None:
    run, steps = history(flow)

    assert replay_differences(flow, run, steps[1:])[0] == (
        "step 2 (guide_answer): cannot be replayed (ValueError: the first step is not guide_start)"
    )
    renamed = [steps[0], replace(steps[1], tool="guide_jump")]
    assert replay_differences(flow, run, renamed)[0].startswith(
        "step 2 (guide_jump): cannot be replayed"
    )
    assert replay_differences(flow, run, []) == ["the run has no steps"]


ROUTED = """
id: routed
title: Routed
category: test
entry: a_reason
nodes:
  - id: a_reason
    kind: ask
    say: what went wrong
    accepts: {damaged: it arrived broken, late: it came late}
    next: {damaged: e_done, late: e_done, __other__: e_person}
  - id: e_done
    kind: end
    outcome: refunded
    say: refunded
  - id: e_person
    kind: end
    outcome: escalated
    say: a colleague takes it from here
"""


def routed_run(flow: Flow, rules: int) -> tuple[StoredRun, list[StoredStep]]:
    """A run started under ``rules`` whose answer is a phrase holding a label."""
    started = engine.start(flow, None, rules=rules)
    answered = engine.answer(flow, started.state, choice="Damaged item")
    steps = [
        StoredStep(
            1,
            "guide_start",
            {"flow_id": "routed"},
            as_json(start_result(RUN_ID, flow, started)),
            "advanced",
            "",
            "a_reason",
        ),
        StoredStep(
            2,
            "guide_answer",
            {"choice": "Damaged item"},
            as_json(step_result(RUN_ID, answered)),
            result_status(step_result(RUN_ID, answered)),
            "a_reason",
            answered.state.node or "",
        ),
    ]
    state = answered.state
    run = StoredRun(
        RUN_ID, as_json(state.to_dict()), state.state, state.node or "", state.outcome or ""
    )
    return run, steps


def test_a_run_replays_by_the_decision_rules_it_was_started_under() -> None:
    flow, findings = build_flow(ROUTED, categories={"test": Category("test", "Test")})
    assert flow is not None, findings
    # Under the first rules a phrase holding a label went down __other__; a run stored then
    # (its state has no "rules") still verifies, though today's rules decide otherwise.
    before, before_steps = routed_run(flow, rules=1)
    assert before.outcome == "escalated" and "rules" not in before.engine_state
    assert "other" not in before_steps[1].result  # as the first rules' results were
    assert replay_differences(flow, before, before_steps) == []
    now, now_steps = routed_run(flow, rules=engine.RULES)
    assert now_steps[1].status == "unmatched" and now.engine_state["rules"] == engine.RULES
    assert replay_differences(flow, now, now_steps) == []
    # The stored rules are what the replay follows: a run claiming the others differs.
    forged = replace(before, engine_state={**before.engine_state, "rules": engine.RULES})
    assert replay_differences(flow, forged, before_steps) != []


def test_a_start_gives_the_flows_version_as_text_and_a_run_of_before_replays_as_it_was() -> None:
    flow, findings = build_flow(
        ROUTED.replace("entry:", "version: 2\nentry:", 1),
        categories={"test": Category("test", "Test")},
    )
    assert flow is not None, findings
    now, now_steps = routed_run(flow, rules=engine.RULES)
    assert now_steps[0].result["flow"]["version"] == "2"
    assert replay_differences(flow, now, now_steps) == []
    # A run started under rules 2 was given the number as written, and verifies still.
    before, before_steps = routed_run(flow, rules=2)
    assert before_steps[0].result["flow"]["version"] == 2
    assert replay_differences(flow, before, before_steps) == []
