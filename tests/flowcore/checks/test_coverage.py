"""Coverage of the small refund flow, counted by hand.

The flow (tests/flowcore/checks/test_guarantees.py) has 6 nodes and 8 edges a run can take:
n_order --> n_reason; n_reason along damaged, unwanted, __other__ and its fold (the flow
is broaden, n_reason has no __unknown__ route and folds, with no common node);
n_identity along ok and fail (it escalates, so no fold); n_policy --> n_refund.
"""

from __future__ import annotations

from flowcore.checks.coverage import coverage_of
from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests, report_lines
from flowcore.run import engine
from flowcore.run.paths import FlowMoves
from flowcore.run.state import PathEntry
from tests.flowcore.checks.test_guarantees import small
from tests.flowcore.run.engine.test_properties import loaded_text

UNWANTED = """\
  - name: not wanted, refunded
    start: {values: {order: A100}}
    calls:
      - answer: unwanted
"""
# Damaged goes to n_identity, is taken back, and ends unwanted: the damaged edge was taken.
DAMAGED_THEN_BACK = """\
  - name: damaged, corrected to not wanted
    start: {values: {order: A100}}
    calls:
      - answer: damaged
      - back: n_reason
      - answer: unwanted
"""
STALL = """\
  - name: damaged, identity unknown
    start: {values: {order: A100, n_reason: damaged}}
    calls:
      - answer: __unknown__
"""
FOLD = """\
  - name: nobody knows why
    start: {values: {order: A100}}
    calls:
      - answer: __unknown__
"""


def lines(*scenarios: str, min_coverage: float | None = None) -> list[str]:
    tests = parse_flow_tests("scenarios:\n" + "".join(scenarios), flow_id="small_refund")
    return report_lines(check_flow_tests(small(), tests), min_coverage=min_coverage)


def test_the_small_flow_has_the_edges_counted_by_hand() -> None:
    assert [str(edge) for edge in FlowMoves(small()).edges()] == [
        "n_order --> n_reason",
        "n_reason --damaged--> n_identity",
        "n_reason --unwanted--> n_policy",
        "n_reason --__other__--> n_review",
        "n_reason --fold--> (run ends)",
        "n_identity --ok--> n_refund",
        "n_identity --fail--> n_review",
        "n_policy --> n_refund",
    ]


def test_one_scenario_takes_four_nodes_and_three_edges() -> None:
    # n_order (skipped), n_reason, n_policy, n_refund; n_order's next, unwanted, n_policy's next.
    assert lines(UNWANTED) == [
        "small_refund: 1/1 scenarios passed, 0/0 guarantees held",
        "  coverage: nodes 66.6% (4/6), edges 37.5% (3/8)",
        "  edges never taken:",
        "    n_reason --damaged--> n_identity",
        "    n_reason --__other__--> n_review",
        "    n_reason --fold--> (run ends)",
        "    n_identity --ok--> n_refund",
        "    n_identity --fail--> n_review",
    ]


def test_an_edge_taken_back_still_counts_and_a_stall_takes_its_node() -> None:
    # + n_identity (reached, then taken back) and the damaged edge.
    assert lines(DAMAGED_THEN_BACK)[1] == "  coverage: nodes 83.3% (5/6), edges 50% (4/8)"
    # The stall reaches n_identity without leaving it: no ok/fail edge.
    assert lines(UNWANTED, STALL)[1] == "  coverage: nodes 83.3% (5/6), edges 50% (4/8)"


def test_a_fold_takes_its_own_edge_but_not_the_nodes_it_shows() -> None:
    assert lines(UNWANTED, STALL, FOLD)[1:] == [
        "  coverage: nodes 83.3% (5/6), edges 62.5% (5/8)",
        "  edges never taken:",
        "    n_reason --__other__--> n_review",
        "    n_identity --ok--> n_refund",
        "    n_identity --fail--> n_review",
    ]


def test_min_coverage_fails_a_flow_under_it_and_passes_one_at_it() -> None:
    assert lines(UNWANTED, STALL, FOLD, min_coverage=70)[-1] == (
        "FAIL small_refund coverage is under 70%"
    )
    assert lines(UNWANTED, STALL, FOLD, min_coverage=62.5)[-1].startswith("    n_identity")


def test_no_scenarios_take_nothing() -> None:
    assert lines()[1] == "  coverage: nodes 0% (0/6), edges 0% (0/8)"


def test_a_run_stalled_at_a_collect_takes_the_node_but_not_its_next() -> None:
    flow = loaded_text(
        """\
id: slots
title: Slots
category: test
entry: n_get
on_unknown: escalate
nodes:
  - id: n_get
    kind: collect
    say: get the order
    slots:
      order: {ask: the order number, required: true}
    next: n_done
  - id: n_done
    kind: end
    say: done
    outcome: done
"""
    )
    stalled = engine.start(flow, {"order": "__unknown__"}).state
    assert stalled.path[-1] == PathEntry("n_get", "collect", "skipped", "__unknown__")
    reopened = engine.back(flow, stalled).state  # the stall entry stays in the history

    for state in (stalled, reopened):
        covered = coverage_of(FlowMoves(flow), [state])
        assert "n_get" in covered.nodes_taken
        assert covered.edges_taken == frozenset()
