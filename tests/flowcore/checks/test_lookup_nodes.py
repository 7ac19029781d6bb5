"""Lookup nodes in a flow's own tests: a scenario stubs the endpoints by name and expects
the labels its lookups took; coverage counts each label and ``__error__`` as edges; paths
take every label, and a failed call (``__error__``, or a stall without it); a captured
run's lookups become the stubs of their endpoints."""

from __future__ import annotations

from flowcore.checks.capture import RecordedStep, scenario_from_steps, scenario_text
from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests, report_lines
from flowcore.checks.guarantees import PassesGuarantee, check_guarantee
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.lookups import LOOKUPS_KEY, Looked
from flowcore.run.paths import FlowMoves, describe_move, moves
from flowcore.run.results import step_result

LOOKED = """\
id: looked
title: Order status
category: test
entry: n_order
on_unknown: escalate
nodes:
  - id: n_order
    kind: collect
    say: find the order
    slots:
      order_id: {ask: the order number, required: true}
    next: n_status
  - id: n_status
    kind: lookup
    say: look up the order's status
    call: orders
    send: [order_id]
    returns:
      shipped: the order has left the warehouse
      pending: the order is still being prepared
    sets:
      shipped_on: date
    next:
      shipped: n_shipped
      pending: n_pending
      __error__: n_human
  - id: n_shipped
    kind: end
    say: it is on its way
    outcome: shipped
  - id: n_pending
    kind: end
    say: it is being prepared
    outcome: pending
  - id: n_human
    kind: end
    say: a colleague looks it up
    outcome: escalated
"""

SHIPPED = """\
  - name: a shipped order says when
    endpoints:
      orders: {label: shipped, values: {shipped_on: "2024-03-01"}}
    start:
      values: {order_id: A-1}
      expect:
        status: completed
        looked_up: [shipped]
        values: {n_status: shipped, shipped_on: "2024-03-01"}
        outcome: shipped
"""
PENDING = """\
  - name: a pending order is being prepared
    endpoints:
      orders: {label: pending}
    start:
      values: {order_id: A-2}
      expect: {looked_up: [pending], outcome: pending}
"""
FAILED = """\
  - name: a failed call goes to a colleague
    endpoints:
      orders: {fail: timed out}
    start:
      values: {order_id: A-3}
      expect: {looked_up: [__error__], outcome: escalated}
"""

CATEGORIES = {"test": Category("test", "Test")}


def flow(text: str = LOOKED) -> Flow:
    built, findings = build_flow(text, categories=CATEGORIES)
    assert built is not None, findings
    return built


def without_error_route() -> Flow:
    human = LOOKED.index("  - id: n_human")
    return flow(LOOKED[:human].replace("      __error__: n_human\n", ""))


def lines(*scenarios: str, min_coverage: float | None = None, of: Flow | None = None) -> list[str]:
    tests = parse_flow_tests("scenarios:\n" + "".join(scenarios), flow_id="looked")
    return report_lines(check_flow_tests(of or flow(), tests), min_coverage=min_coverage)


def test_each_label_and_the_error_route_is_an_edge() -> None:
    assert [str(edge) for edge in FlowMoves(flow()).edges()] == [
        "n_order --> n_status",
        "n_status --shipped--> n_shipped",
        "n_status --pending--> n_pending",
        "n_status --__error__--> n_human",
    ]


def test_lookup_without_error_route_stalls_path() -> None:
    found = moves(without_error_route(), "n_status")
    assert [(m.edge, m.target) for m in found] == [
        ("shipped", "n_shipped"),
        ("pending", "n_pending"),
        (None, None),
    ]
    stall = found[-1].ending
    assert stall is not None
    assert (stall.state, stall.reason) == ("stalled", "lookup_failed")
    assert describe_move(found[-1]).startswith("stalled (lookup_failed), handoff: ")


def test_scenarios_that_take_every_label_and_the_error_route_cover_the_flow() -> None:
    assert lines(SHIPPED, PENDING, FAILED, min_coverage=100)[-2:] == [
        "looked: 3/3 scenarios passed, 0/0 guarantees held",
        "  coverage: nodes 100% (5/5), edges 100% (4/4)",
    ]


def test_an_error_route_no_scenario_takes_is_an_edge_never_taken() -> None:
    report = lines(SHIPPED, PENDING, min_coverage=100)
    assert "n_status --__error__--> n_human" in "\n".join(report)
    assert "  coverage: nodes 80% (4/5), edges 75% (3/4)" in report


def test_a_scenario_expecting_another_label_fails_with_the_label_taken() -> None:
    report = "\n".join(lines(PENDING.replace("{label: pending}", "{label: shipped}")))
    assert "looked_up: expected [pending], got [shipped]" in report


def test_an_answer_that_does_not_fit_is_a_failed_call() -> None:
    # shipped_on is a date: the endpoint's answer does not fit, so the call failed.
    report = lines(SHIPPED.replace('"2024-03-01"}}', '"soon"}}'))
    assert "looked_up: expected [shipped], got [__error__]" in "\n".join(report)


def test_a_lookup_whose_endpoint_the_scenario_does_not_stub_names_the_endpoint() -> None:
    report = "\n".join(
        lines(PENDING.replace("    endpoints:\n      orders: {label: pending}\n", ""))
    )
    assert (
        "the run reached n_status, which calls the endpoint 'orders', and the scenario "
        "stubs no endpoint of that name"
    ) in report


def test_a_stub_of_an_endpoint_the_flow_never_calls_is_a_finding() -> None:
    report = "\n".join(lines(PENDING.replace("orders: {label", "order: {label")))
    assert "looked calls no endpoint 'order': did you mean 'orders'?" in report


def test_a_stub_that_is_no_answer_is_a_finding() -> None:
    report = "\n".join(lines(PENDING.replace("{label: pending}", "{fail: 3}")))
    assert "what orders answers is the JSON object an endpoint sends" in report


def test_a_failed_call_without_an_error_route_stalls_the_scenarios_run() -> None:
    stalled = FAILED.replace(
        "{looked_up: [__error__], outcome: escalated}",
        "{status: stalled, reason: lookup_failed, looked_up: [__error__], node: n_status}",
    )
    assert "looked: 1/1 scenarios passed, 0/0 guarantees held" in lines(
        stalled, of=without_error_route()
    )


def test_a_guarantee_is_judged_on_every_label_and_on_a_failed_call() -> None:
    moves_ = FlowMoves(flow())
    assert check_guarantee(moves_, PassesGuarantee("g", ("shipped",), "n_status")).held
    broken = check_guarantee(moves_, PassesGuarantee("g", ("escalated",), "n_shipped"))
    assert broken.counterexample is not None
    assert broken.counterexample.lines() == [
        "n_order   asked",
        "n_status  looked up: the call failed (__error__)",
        "n_human   completed: escalated",
    ]


def captured_run(looked: Looked) -> list[str]:
    """The scenario captured from a run whose lookup came back with ``looked``, as text."""
    started = engine.start(flow())
    given = {"values": {"order_id": "A-1"}}
    answered = engine.answer(
        flow(), started.state, values=given["values"], lookups={"n_status": looked}
    )
    steps = [
        RecordedStep("guide_start", {}, step_result("r_1", started)),
        RecordedStep(
            "guide_answer",
            {**given, LOOKUPS_KEY: {"n_status": looked.recorded("0" * 64)}},
            step_result("r_1", answered),
        ),
    ]
    captured = scenario_from_steps("captured", steps, flow=flow())
    return scenario_text(captured).splitlines()


def test_a_captured_run_stubs_its_endpoint_with_what_it_answered() -> None:
    text = captured_run(Looked(response='{"label":"shipped","values":{"shipped_on":"2024-03-01"}}'))
    assert text[1] == (
        '    endpoints: {orders: {label: shipped, values: {shipped_on: "2024-03-01"}}}'
    )
    # Read back and run, it passes: the stub answers as the endpoint did.
    assert "looked: 1/1 scenarios passed, 0/0 guarantees held" in lines("\n".join(text) + "\n")


def test_a_captured_failed_call_is_a_stub_that_fails_alike() -> None:
    for looked in (Looked(failed="timed out"), Looked(response="not json")):
        text = captured_run(looked)
        assert "looked: 1/1 scenarios passed, 0/0 guarantees held" in lines(
            "\n".join(text) + "\n"
        ), text
