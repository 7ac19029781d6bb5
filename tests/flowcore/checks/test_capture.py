"""Recorded runs written as scenarios, appended to a tests file as text."""

from __future__ import annotations

from typing import Any

import pytest

from flowcore.checks.capture import (
    CapturedScenario,
    RecordedStep,
    append_scenario,
    scenario_from_steps,
    scenario_text,
)
from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests
from flowcore.common.errors import Refusal
from flowcore.run import engine
from flowcore.run.results import ADOPT, adopted_result
from tests.flowcore.checks.test_guarantees import small


def recorded_run() -> list[RecordedStep]:
    """A run of the small flow as the services would record it (inputs and results)."""
    flow = small()
    steps: list[RecordedStep] = []
    start = engine.start(flow, {"order": "A100", "nope": "x"})
    steps.append(
        RecordedStep(
            "guide_start",
            {"flow_id": flow.id, "values": {"order": "A100", "nope": "x"}},
            dict(start.result),
        )
    )
    first = engine.answer(flow, start.state, choice="damaged")
    steps.append(RecordedStep("guide_answer", {"choice": "damaged"}, dict(first.result)))
    back = engine.back(flow, first.state)
    steps.append(RecordedStep("guide_back", {}, dict(back.result)))
    second = engine.answer(flow, back.state, values={"n_reason": "unwanted"})
    steps.append(
        RecordedStep("guide_answer", {"values": {"n_reason": "unwanted"}}, dict(second.result))
    )
    return steps


def test_a_recorded_run_becomes_the_scenario_that_replays_it() -> None:
    captured = scenario_from_steps("run r_1", recorded_run(), ["captured from r_1"])
    assert scenario_text(captured) == (
        "  # captured from r_1\n"
        "  - name: run r_1\n"
        "    start:\n"
        "      values: {order: A100, nope: x}\n"
        "      expect: {status: advanced, node: n_reason, ignored: [nope], skipped: [n_order]}\n"
        "    calls:\n"
        "      - answer: damaged\n"
        "        expect: {status: advanced, node: n_identity}\n"
        "      - back: {}\n"
        "        expect: {status: advanced, node: n_reason}\n"
        "      - answer: {values: {n_reason: unwanted}}\n"
        "        expect: {status: completed, node: n_refund, tell: [n_policy], outcome: refunded}\n"
    )


def test_a_run_handed_to_another_owner_is_captured_as_the_same_scenario() -> None:
    """An ``adopt`` step changes who owns the run, not its path: it adds no call."""
    steps = recorded_run()
    adopted = [
        *steps[:2],
        RecordedStep(ADOPT, {"owner": "key:platform"}, adopted_result("r_1", "key:platform")),
        *steps[2:],
    ]

    assert scenario_from_steps("run r_1", adopted) == scenario_from_steps("run r_1", steps)


def test_a_captured_scenario_passes_on_the_flow_it_was_recorded_on() -> None:
    text = append_scenario(
        None, scenario_from_steps("run r_1", recorded_run()), flow_id="small_refund"
    )
    report = check_flow_tests(small(), parse_flow_tests(text, flow_id="small_refund"))
    assert report.ok and [r.scenario.name for r in report.scenarios] == ["run r_1"]


def item(name: str, **expect: Any) -> CapturedScenario:
    return CapturedScenario(
        name, {"name": name, "start": {"expect": {"status": "advanced", **expect}}}
    )


def test_a_new_file_gets_a_header_and_the_scenario() -> None:
    assert append_scenario(None, item("a"), flow_id="small_refund") == (
        "# Scenarios and guarantees of the flow small_refund: `guidepost-mcp test small_refund` "
        "runs\n"
        '# them (docs/authoring.md, "Testing a flow").\n'
        "scenarios:\n"
        "  - name: a\n"
        "    start:\n"
        "      expect: {status: advanced}\n"
    )


EXISTING = """\
# Hand-written; keep this comment.
scenarios:
    - name: first   # four spaces, on purpose
      start: {expect: {status: advanced}}

    # a scenario for later:
    # - name: second

# Guarantees below.
guarantees:
  - {name: g, every_stall_hands_over: true}   # trailing comment
"""


def test_appending_keeps_every_byte_and_goes_after_the_last_scenario() -> None:
    text = append_scenario(EXISTING, item("new"), flow_id="small_refund")
    head, tail = EXISTING.split("\n# Guarantees below.\n")
    assert text == (
        head + "\n    - name: new\n"
        "      start:\n"
        "        expect: {status: advanced}\n"
        "\n# Guarantees below.\n" + tail
    )
    tests = parse_flow_tests(text, flow_id="small_refund")
    assert [s.name for s in tests.scenarios] == ["first", "new"]
    assert [g.name for g in tests.guarantees] == ["g"] and not tests.findings


def test_appending_follows_an_indentless_list_and_a_file_without_scenarios() -> None:
    text = append_scenario("scenarios:\n- name: a\n", item("b"), flow_id="x")
    assert text == "scenarios:\n- name: a\n\n- name: b\n  start:\n    expect: {status: advanced}\n"
    text = append_scenario("guarantees: []\n", item("b"), flow_id="x")
    assert text.startswith("guarantees: []\nscenarios:\n  - name: b\n")
    text = append_scenario("# only a comment\n", item("b"), flow_id="x")
    assert text.startswith("# only a comment\nscenarios:\n  - name: b\n")


def test_text_that_needs_quoting_reads_back_exactly() -> None:
    odd = {"a": "yes", "b": "3.10", "c": "返金: 済み #1", "d": "line\nbreak", "e": " x", "f": "~"}
    scenario = CapturedScenario("odd", {"name": "odd", "start": {"values": odd}})
    text = append_scenario(None, scenario, flow_id="x")  # verified by reading it back
    assert parse_flow_tests(text, flow_id="x").scenarios[0].start.values == odd


def test_a_scenario_of_the_same_name_is_refused() -> None:
    with pytest.raises(Refusal, match="already has a scenario named 'first'"):
        append_scenario(EXISTING, item("first"), flow_id="small_refund")


def test_a_layout_that_text_cannot_extend_is_refused_and_nothing_is_returned() -> None:
    with pytest.raises(Refusal) as refused:
        append_scenario("scenarios: []\nguarantees: []\n", item("b"), flow_id="x")
    assert refused.value.error == "tests file layout"
    with pytest.raises(Refusal, match="does not parse"):
        append_scenario("scenarios:\n  - name: [a\n", item("b"), flow_id="x")
