"""Check nodes in a flow's own tests (ADR 0117): a scenario gives values and a date and
expects the condition taken; coverage counts each condition and the ``else`` as edges;
guarantees are judged on every path, every branch of a check included."""

from __future__ import annotations

from datetime import date

from flowcore.checks.capture import RecordedStep, scenario_from_steps, scenario_text
from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests, report_lines
from flowcore.checks.guarantees import PassesGuarantee, check_guarantee
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.paths import FlowMoves
from flowcore.run.results import step_result

CHECKED = """\
id: checked
title: Checked refund
category: test
entry: n_amount
on_unknown: escalate
nodes:
  - id: n_amount
    kind: collect
    say: find the amount
    slots:
      amount: {ask: the amount, required: true, type: number}
      bought_on: {ask: the date of purchase, required: true, type: date}
    next: k_route
  - id: k_route
    kind: check
    say: big or old refunds go to a person
    when:
      - if: amount > 100.0
        next: n_review
      - if: bought_on < today - duration('720h')
        next: n_declined
    else: n_refund
  - id: n_refund
    kind: end
    say: refund
    outcome: refunded
  - id: n_declined
    kind: end
    say: too old
    outcome: declined
  - id: n_review
    kind: end
    say: a colleague reviews
    outcome: escalated
"""

BIG = """\
  - name: a big refund is reviewed
    today: "2026-03-01"
    start:
      values: {amount: "150", bought_on: "2026-02-20"}
      expect: {status: completed, checked: [amount > 100.0], outcome: escalated}
"""
OLD = """\
  - name: an old purchase is declined
    today: "2026-03-01"
    start:
      values: {amount: "50", bought_on: "2026-01-01"}
      expect: {checked: ["bought_on < today - duration('720h')"], outcome: declined}
"""
RECENT = """\
  - name: a small recent refund is paid
    today: "2026-03-01"
    start:
      values: {amount: "50", bought_on: "2026-02-20"}
      expect: {checked: [else], outcome: refunded}
"""


def flow() -> Flow:
    built, findings = build_flow(CHECKED, categories={"test": Category("test", "Test")})
    assert built is not None, findings
    return built


def lines(*scenarios: str, min_coverage: float | None = None) -> list[str]:
    tests = parse_flow_tests("scenarios:\n" + "".join(scenarios), flow_id="checked")
    return report_lines(check_flow_tests(flow(), tests), min_coverage=min_coverage)


def test_each_condition_and_the_else_is_an_edge() -> None:
    assert [str(edge) for edge in FlowMoves(flow()).edges()] == [
        "n_amount --> k_route",
        "k_route --amount > 100.0--> n_review",
        "k_route --bought_on < today - duration('720h')--> n_declined",
        "k_route --else--> n_refund",
    ]


def test_scenarios_that_take_every_branch_cover_the_flow() -> None:
    assert lines(BIG, OLD, RECENT, min_coverage=100)[-2:] == [
        "checked: 3/3 scenarios passed, 0/0 guarantees held",
        "  coverage: nodes 100% (5/5), edges 100% (4/4)",
    ]


def test_a_branch_no_scenario_takes_is_an_edge_never_taken() -> None:
    report = lines(BIG, RECENT, min_coverage=100)
    assert "k_route --bought_on < today - duration('720h')--> n_declined" in "\n".join(report)
    assert "  coverage: nodes 80% (4/5), edges 75% (3/4)" in report


def test_the_scenarios_date_decides_a_condition_that_reads_today() -> None:
    # The same purchase, a scenario dated two months later: now too old.
    later = RECENT.replace('today: "2026-03-01"', 'today: "2026-05-01"')
    report = "\n".join(lines(later))
    assert "checked: expected [else], got [\"bought_on < today - duration('720h')\"]" in report


def test_a_scenario_date_that_is_no_date_is_a_finding() -> None:
    report = "\n".join(lines(RECENT.replace('"2026-03-01"', '"March 1st"')))
    assert "today is the date of the scenario's steps, YYYY-MM-DD" in report


def test_a_guarantee_is_judged_on_every_branch_of_a_check() -> None:
    moves = FlowMoves(flow())
    # Every path to refunded passes the check (its else): held. Declined is reached without
    # n_review, along the check's second condition: broken, with that branch as the example.
    assert check_guarantee(moves, PassesGuarantee("g", ("refunded",), "k_route")).held
    broken = check_guarantee(moves, PassesGuarantee("g", ("declined",), "n_review"))
    assert broken.counterexample is not None
    assert broken.counterexample.lines() == [
        "n_amount    asked",
        "k_route     checked: bought_on < today - duration('720h') holds",
        "n_declined  completed: declined",
    ]


def test_a_captured_run_keeps_the_date_its_check_read() -> None:
    day = date(2026, 3, 1)
    started = engine.start(flow(), today=day)
    answered = engine.answer(
        flow(), started.state, values={"amount": "50", "bought_on": "2026-01-01"}, today=day
    )
    steps = [
        RecordedStep("guide_start", {}, step_result("r_1", started)),
        RecordedStep(
            "guide_answer",
            {"values": {"amount": "50", "bought_on": "2026-01-01"}, "today": day.isoformat()},
            step_result("r_1", answered),
        ),
    ]
    captured = scenario_from_steps("captured", steps)
    assert captured.data["today"] == "2026-03-01"
    assert captured.data["calls"][0]["expect"]["checked"] == [
        "bought_on < today - duration('720h')"
    ]
    # Read back and run, it passes: the date decides the check as it did.
    text = "scenarios:\n" + scenario_text(captured)
    assert "checked: 1/1 scenarios passed, 0/0 guarantees held" in lines_of(text)


def lines_of(text: str) -> list[str]:
    return report_lines(check_flow_tests(flow(), parse_flow_tests(text, flow_id="checked")))
