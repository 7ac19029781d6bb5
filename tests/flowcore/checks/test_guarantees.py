"""Guarantees: each kind holding and broken (with its counterexample) on a small flow, and
the checker's verdict equal to the engine's own runs over every path of random flows."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings

from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests, report_lines
from flowcore.checks.guarantees import (
    Guarantee,
    HandoverGuarantee,
    OrderGuarantee,
    PassesGuarantee,
    check_guarantee,
)
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, EndNode, Flow
from flowcore.run.paths import FlowMoves, Move
from tests.flowcore.path_runs import drive, violates
from tests.flowcore.run.test_paths import stuck_flows

SMALL = """\
id: small_refund
title: Small refund
category: test
entry: n_order
on_unknown: broaden
nodes:
  - id: n_order
    kind: collect
    say: find the order
    on_unknown: escalate
    on_stuck: look the order up by the customer's email
    slots:
      order: {ask: the order number, required: true, pattern: "A[0-9]+"}
    next: n_reason
  - id: n_reason
    kind: ask
    say: why a refund
    accepts: {damaged: it is broken, unwanted: they do not want it}
    next: {damaged: n_identity, unwanted: n_policy, __other__: n_review}
  - id: n_identity
    kind: ask
    say: did the identity check pass
    on_unknown: escalate
    accepts: {ok: verified, fail: not verified}
    next: {ok: n_refund, fail: n_review}
  - id: n_policy
    kind: tell
    say: explain the 30-day policy
    next: n_refund
  - id: n_refund
    kind: end
    say: refund
    outcome: refunded
  - id: n_review
    kind: end
    say: a colleague reviews
    outcome: escalated
"""


def small(text: str = SMALL) -> Flow:
    flow, findings = build_flow(text, categories={"test": Category("test", "Test")})
    assert flow is not None, findings
    return flow


def check(guarantee: Guarantee, flow: Flow | None = None) -> list[str] | None:
    """None when the guarantee holds, else its counterexample as lines."""
    result = check_guarantee(FlowMoves(flow or small()), guarantee)
    if result.counterexample is None:
        return None
    return [result.counterexample.why, *result.counterexample.lines()]


def test_passes_holds_when_every_path_to_the_outcome_passes_the_node() -> None:
    assert check(PassesGuarantee("order first", ("refunded",), "n_order")) is None


def test_passes_is_broken_by_a_path_around_the_node() -> None:
    assert check(PassesGuarantee("identity first", ("refunded",), "n_identity")) == [
        "the run reaches refunded without passing n_identity",
        "n_order   asked",
        "n_reason  asked: unwanted",
        "n_policy  told",
        "n_refund  completed: refunded",
    ]


def test_passes_asked_is_broken_by_a_value_given_in_advance() -> None:
    flow = small(SMALL.replace("on_unknown: broaden", "on_unknown: escalate"))
    assert check(PassesGuarantee("order asked", ("refunded",), "n_order", asked=True), flow) == [
        "the run reaches refunded without passing n_order asked",
        "n_order     skipped (given in advance)",
        "n_reason    asked: damaged",
        "n_identity  asked: ok",
        "n_refund    completed: refunded",
    ]


def test_passes_counts_a_fold_that_ends_the_run_as_reaching_the_outcomes_it_shows() -> None:
    # n_reason folds (broaden) with no common node: the run completes with both ends shown.
    assert check(PassesGuarantee("review asked", ("escalated",), "n_identity", asked=True)) == [
        "the run reaches escalated without passing n_identity asked",
        "n_order   asked",
        "n_reason  folded (nobody knew), shows n_identity, n_refund, n_review, n_policy, "
        "n_refund; the run completes with no common node (outcomes shown: refunded, escalated)",
    ]


def test_the_counterexample_is_the_most_ordinary_path() -> None:
    # A fold (2 moves) also breaks it, but answered questions make the better example.
    assert check(PassesGuarantee("policy", ("refunded",), "n_policy")) == [
        "the run reaches refunded without passing n_policy",
        "n_order     asked",
        "n_reason    asked: damaged",
        "n_identity  asked: ok",
        "n_refund    completed: refunded",
    ]


def test_passes_with_a_glob_matches_every_outcome_it_covers() -> None:
    assert check(PassesGuarantee("anything", ("*",), "n_order")) is None
    assert check(PassesGuarantee("ref*", ("ref*",), "n_reason")) is None


def test_order_holds_when_the_node_always_comes_first() -> None:
    assert check(OrderGuarantee("order before identity", "n_identity", "n_order")) is None


def test_order_is_broken_by_reaching_the_node_first() -> None:
    flow = small(SMALL.replace("on_unknown: broaden", "on_unknown: escalate"))
    assert check(OrderGuarantee("identity before refund", "n_refund", "n_identity"), flow) == [
        "the run reaches n_refund without passing n_identity",
        "n_order   asked",
        "n_reason  asked: unwanted",
        "n_policy  told",
    ]


def test_order_is_broken_by_a_fold_that_shows_the_node() -> None:
    flow = small(SMALL.replace(", __other__: n_review", ""))
    assert check(OrderGuarantee("identity before review", "n_review", "n_identity"), flow) == [
        "a fold at n_reason shows n_review without n_identity before it",
        "n_order   asked",
        "n_reason  folded (nobody knew), shows n_identity, n_refund, n_review, n_policy, "
        "n_refund; the run completes with no common node (outcomes shown: refunded, escalated)",
    ]


def test_order_asked_is_broken_by_a_value_given_in_advance() -> None:
    assert check(OrderGuarantee("order asked", "n_reason", "n_order", asked=True)) == [
        "the run reaches n_reason without passing n_order asked",
        "n_order  skipped (given in advance)",
    ]


def test_order_is_broken_at_once_when_the_node_is_the_entry() -> None:
    assert check(OrderGuarantee("entry", "n_order", "n_reason")) == [
        "the run starts at n_order, with nothing before it"
    ]


def test_every_stall_hands_over_holds_with_a_generic_text() -> None:
    assert check(HandoverGuarantee("texts")) is None


def test_every_stall_hands_over_own_text_is_broken_by_the_generic_text() -> None:
    assert check(HandoverGuarantee("own texts", own_text=True)) == [
        "the stall at n_identity hands over with the generic text: "
        "neither n_identity nor the flow sets on_stuck",
        "n_order     asked",
        "n_reason    asked: damaged",
        'n_identity  stalled (escalate), handoff: "The procedure cannot go on from here: take '
        "over the conversation, read the run's path and values, and decide the next step.\"",
    ]


def test_every_stall_hands_over_is_broken_by_a_blank_text() -> None:
    flow = small(SMALL.replace("on_unknown: broaden", "on_unknown: broaden\non_stuck: ' '"))
    assert check(HandoverGuarantee("texts"), flow) == [
        'the stall at n_identity hands over with a blank text (" ")',
        "n_order     asked",
        "n_reason    asked: damaged",
        'n_identity  stalled (escalate), handoff: " "',
    ]
    assert check(HandoverGuarantee("own"), replace(flow, on_stuck="ask a lead")) is None


def test_a_broken_guarantee_is_printed_with_its_counterexample_and_file_line() -> None:
    tests = parse_flow_tests(
        "guarantees:\n"
        "  - name: identity before money\n"
        "    every_path_to: refunded\n"
        "    passes: n_identity\n",
        flow_id="small_refund",
        file="tests/small_refund.yaml",
    )
    report = check_flow_tests(small(), tests)
    assert not report.ok
    assert report_lines(report)[:6] == [
        "BROKEN small_refund › guarantee 'identity before money': every path to refunded "
        "passes n_identity (tests/small_refund.yaml:2)",
        "    the run reaches refunded without passing n_identity; counterexample:",
        "      n_order   asked",
        "      n_reason  asked: unwanted",
        "      n_policy  told",
        "      n_refund  completed: refunded",
    ]


def every_guarantee(flow: Flow) -> list[Guarantee]:
    """Every guarantee that can be stated about ``flow`` (one name each)."""
    nodes = list(flow.nodes)
    outcomes = sorted({n.outcome for n in flow.nodes.values() if isinstance(n, EndNode)})
    found: list[Guarantee] = [HandoverGuarantee("g"), HandoverGuarantee("g", own_text=True)]
    for asked in (False, True):
        for node in nodes:
            for pattern in [*outcomes, "*"]:
                found.append(PassesGuarantee("g", (pattern,), node, asked))
            for target in nodes:
                if target != node:
                    found.append(OrderGuarantee("g", target, node, asked))
    return found


def completed(model: FlowMoves, path: tuple[Move, ...]) -> tuple[Move, ...]:
    """``path`` followed along first moves until the run ends (a counterexample may stop
    where the guarantee broke)."""
    while not path or path[-1].target is not None:
        at = path[-1].target if path else model.flow.entry
        assert at is not None
        path = (*path, model.at[at][0])
    return path


@settings(max_examples=150, deadline=None)
@given(stuck_flows(max_nodes=7))
def test_the_checker_agrees_with_the_engine_on_every_path(flow: Flow) -> None:
    model = FlowMoves(flow)
    paths = list(model.paths(limit=800))
    runs = [drive(flow, path) for path in paths]
    for guarantee in every_guarantee(flow):
        result = check_guarantee(model, guarantee)
        broken = any(violates(flow, guarantee, run) for run in runs)
        if len(paths) < 800:  # every path was played: the verdicts must agree
            assert (result.counterexample is None) == (not broken), guarantee
        if result.counterexample is not None:
            # The counterexample is a run the engine makes, and that run breaks it.
            run = drive(flow, completed(model, result.counterexample.moves))
            assert violates(flow, guarantee, run), (guarantee, result.counterexample)
