"""Scenarios: the runner (one passing and one failing scenario per kind of expectation),
how failures read, and mistakes in a tests file reported as findings with file:line."""

from __future__ import annotations

import ast
import doctest

import pytest

from flowcore.checks import capture, coverage, flow_tests, scenarios
from flowcore.checks.flow_tests import check_flow_tests, parse_flow_tests, report_lines
from flowcore.flow.findings import format_finding
from tests.flowcore.checks.test_guarantees import small

FILE = "tests/small_refund.yaml"
ANSWER_ORDER = "- answer: {values: {order: A100}}"


def run(text: str) -> list[str]:
    """The runner's lines for a tests file over the small flow (summary lines left out)."""
    report = check_flow_tests(small(), parse_flow_tests(text, flow_id="small_refund", file=FILE))
    return [
        line
        for line in report_lines(report)
        if not line.startswith(("small_refund: ", "  coverage", "  edges", "    n_"))
    ]


def scenario(calls: str, start: str = "") -> str:
    return (
        "scenarios:\n"
        "  - name: the one\n" + (f"    start: {start}\n" if start else "") + "    calls:\n" + calls
    )


# Each kind of expectation: the calls before it, the call it checks, the value that holds,
# a value that does not, and the runner's line for the latter.
CASES = [
    (
        "status",
        "",
        ANSWER_ORDER,
        "advanced",
        "completed",
        "status: expected completed, got advanced",
    ),
    ("state", "", "- close: they left", "closed", "active", "state: expected active, got closed"),
    (
        "node",
        "",
        ANSWER_ORDER,
        "n_reason",
        "n_identity",
        "node: expected n_identity, got n_reason",
    ),
    (
        "tell",
        ANSWER_ORDER + "\n",
        "- answer: unwanted",
        "[n_policy]",
        "[]",
        "tell: expected [], got [n_policy]",
    ),
    (
        "skipped",
        "",
        "- answer: {values: {order: A100, n_reason: damaged}}",
        "[n_reason]",
        "[]",
        "skipped: expected [], got [n_reason]",
    ),
    (
        "ignored",
        "",
        "- answer: {values: {order: A100, nope: x}}",
        "[nope]",
        "[]",
        "ignored: expected [], got [nope]",
    ),
    (
        "outcome",
        ANSWER_ORDER + "\n",
        "- answer: unwanted",
        "refunded",
        "escalated",
        "outcome: expected escalated, got refunded",
    ),
    (
        "branches",
        ANSWER_ORDER + "\n",
        "- answer: __unknown__",
        "[damaged, unwanted]",
        "[damaged]",
        "branches: expected [damaged], got [damaged, unwanted]",
    ),
    (
        "common",
        ANSWER_ORDER + "\n",
        "- answer: __unknown__",
        "null",
        "n_refund",
        "common: expected n_refund, got null",
    ),
    (
        "reason",
        ANSWER_ORDER + "\n- answer: damaged\n",
        "- answer: __unknown__",
        "escalate",
        "unfoldable",
        "reason: expected unfoldable, got escalate",
    ),
    (
        "handoff",
        "",
        "- answer: __unknown__",
        "look the order up by the customer's email",
        "call a lead",
        'handoff: expected "call a lead", got "look the order up by the customer\'s email"',
    ),
    ("attempt", "", "- answer: {values: {order: B1}}", "1", "2", "attempt: expected 2, got 1"),
    (
        "rejected",
        "",
        "- answer: {values: {order: B1}}",
        "B1",
        "B2",
        "rejected: expected B2, got B1",
    ),
    (
        "values",
        "",
        "- answer: {values: {order: A100, n_reason: damaged}}",
        "{order: A100, n_reason: damaged, n_identity: null}",
        "{n_reason: unwanted}",
        "values.n_reason: expected unwanted, got damaged",
    ),
    (
        "path",
        "",
        "- answer: {values: {order: A100, n_reason: damaged}}",
        "[n_order, n_reason]",
        "[n_order]",
        "path: expected [n_order], got [n_order, n_reason]",
    ),
    (
        "folded",
        ANSWER_ORDER + "\n",
        "- answer: __unknown__",
        "true",
        "false",
        "folded: expected false, got true",
    ),
    (
        "error",
        ANSWER_ORDER + "\n- answer: unwanted\n",
        "- answer: damaged",
        "run is completed",
        "node not on the path",
        'refused, but with another error: expected "node not on the path", got run is completed (',
    ),
]


def call_with(before: str, call: str, key: str, value: str) -> str:
    lines = [f"      {line}" for line in before.splitlines()]
    lines.append(f"      {call}")
    lines.append(f"        expect: {{{key}: {value}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("key", "before", "call", "holds", "fails", "message"), CASES, ids=[case[0] for case in CASES]
)
def test_an_expectation_passes_when_it_holds_and_names_both_values_when_not(
    key: str, before: str, call: str, holds: str, fails: str, message: str
) -> None:
    assert run(scenario(call_with(before, call, key, holds))) == []
    lines = run(scenario(call_with(before, call, key, fails)))
    number = before.count("\n") + 1
    line = 3 + number
    assert lines[0].startswith(f"FAIL small_refund › the one › call {number}: ")
    assert lines[0].endswith(f" ({FILE}:{line})")
    assert len(lines) == 2 and lines[1].startswith(f"    {message}")


def test_a_values_expectation_with_null_fails_when_the_key_holds_a_value() -> None:
    text = scenario(call_with("", ANSWER_ORDER, "values", "{order: null}"))
    assert run(text)[1:] == ["    values.order: expected nothing, got A100"]


def test_the_start_is_checked_too() -> None:
    text = (
        "scenarios:\n"
        "  - name: prefilled to the end\n"
        "    start:\n"
        "      values: {order: A100, n_reason: unwanted}\n"
        "      expect: {status: completed, outcome: escalated}\n"
    )
    assert run(text) == [
        "FAIL small_refund › prefilled to the end › start: "
        f"start {{values: {{order: A100, n_reason: unwanted}}}} ({FILE}:4)",
        "    outcome: expected escalated, got refunded",
    ]


def test_a_refusal_the_scenario_did_not_expect_fails_it() -> None:
    text = scenario("      - back: n_reason\n")
    assert run(text) == [
        f"FAIL small_refund › the one › call 1: back to n_reason ({FILE}:4)",
        "    refused: node not on the path ('n_reason' is not an ask or collect node this run "
        "has reached)",
    ]


def test_expecting_a_refusal_of_an_accepted_call_fails() -> None:
    text = scenario("      - answer: {values: {order: A100}}\n        expect: {error: x}\n")
    assert run(text)[1:] == [
        "    expected a refusal (x), but the call was accepted",
    ]


def test_a_scenario_stops_at_its_first_failing_call() -> None:
    text = scenario(
        "      - answer: {values: {order: A100}}\n"
        "        expect: {status: completed, node: n_refund}\n"
        "      - answer: damaged\n"
        "        expect: {status: stalled}\n"
    )
    assert run(text) == [
        f"FAIL small_refund › the one › call 1: answer {{values: {{order: A100}}}} ({FILE}:4)",
        "    status: expected completed, got advanced",
        "    node: expected n_refund, got n_reason",
    ]


def test_calls_after_a_refusal_it_expected_go_on_from_the_same_state() -> None:
    text = scenario(
        "      - answer: {values: {order: A100}}\n"
        "      - back: n_policy\n"
        "        expect: {error: node not on the path}\n"
        "      - answer: unwanted\n"
        "        expect: {status: completed, outcome: refunded, tell: [n_policy]}\n"
    )
    assert run(text) == []


def findings(text: str) -> list[str]:
    tests = parse_flow_tests(text, flow_id="small_refund", file=FILE)
    report = check_flow_tests(small(), tests)
    problems = [f for r in report.scenarios for f in r.problems]
    problems += [f for r in report.guarantees for f in r.problems]
    return [format_finding(f) for f in [*report.findings, *problems]]


def test_mistakes_in_a_tests_file_are_findings_with_file_and_line() -> None:
    text = (
        "scenario:\n"  # 1
        "  - name: x\n"
        "scenarios:\n"  # 3
        "  - name: fine\n"
        "    calls:\n"
        "      - answer: damaged\n"  # 6
        "        back: n_reason\n"
        "      - answer: {choise: E01}\n"  # 8
        "      - answer: damaged\n"
        "        expect: {stauts: advanced, node: n_reasn, outcome: refundd}\n"  # 10
        "      - answer: damaged\n"
        "        expect: {status: done, attempt: 0}\n"  # 12
        "  - name: fine\n"  # 13
        "  - calls: []\n"  # 14
        "  - just text\n"  # 15
        "guarantees:\n"
        "  - name: g\n"  # 17
        "    every_path_to: refundd\n"
        "    passes: n_idenity\n"
        "  - name: h\n"  # 20
        "    never_reaches: n_refund\n"
        "  - name: i\n"  # 22
        "    every_stall_hands_over: true\n"
        "    asked: yes\n"
    )
    where = "error schema tests/small_refund"
    assert findings(text) == [
        f"{where}: unknown key 'scenario': did you mean 'scenarios'? ({FILE}:1)",
        f"{where}/fine/call 1: a call is a mapping with one of answer, back or close, and an "
        f"optional expect, not answer and back ({FILE}:6)",
        f"{where}/fine/call 2/answer: unknown key 'choise': did you mean 'choice'? ({FILE}:8)",
        f"{where}/fine/call 2/answer: an answer needs a choice or values ({FILE}:8)",
        f"{where}/fine/call 3/expect: unknown key 'stauts': did you mean 'status'? ({FILE}:10)",
        f"{where}/fine/call 4/expect/status: status must be one of advanced, completed, "
        f"unmatched, branched, stalled, not done ({FILE}:12)",
        f"{where}/fine/call 4/expect/attempt: attempt must be a whole number from 1, not 0 "
        f"({FILE}:12)",
        f"{where}/scenarios[2]: a scenario needs a name (text): say what it checks, e.g. "
        f"`name: E01, card expired` ({FILE}:14)",
        f"{where}/scenarios[3]: a scenario is a mapping with name, start and calls: write "
        f"`- name: ...` ({FILE}:15)",
        f"{where}/h/without: without is a node id: the node that must come first ({FILE}:20)",
        f"{where}/i: unknown key 'asked': allowed: name, every_stall_hands_over, own_text "
        f"({FILE}:24)",
        f"{where}/g/every_path_to: no end of small_refund has an outcome matching 'refundd', "
        f"so the guarantee would hold for nothing: did you mean 'refunded'? ({FILE}:18)",
        f"{where}/g/passes: small_refund has no node 'n_idenity': did you mean 'n_identity'? "
        f"({FILE}:19)",
    ]


def test_asked_on_an_end_node_reads_an_end_node() -> None:
    text = (
        "guarantees:\n"
        "  - name: g\n"
        "    every_path_to: refunded\n"
        "    passes: n_refund\n"
        "    asked: true\n"
    )
    assert findings(text) == [
        "error schema tests/small_refund/g/asked: n_refund is an end node, which is never "
        f"asked: asked: true applies to ask and collect nodes ({FILE}:5)"
    ]


def test_a_scenario_naming_what_the_flow_lacks_fails_with_did_you_mean() -> None:
    text = scenario(
        "      - answer: {values: {order: A100}}\n"
        "        expect: {node: n_reasn, tell: [n_polic], outcome: refundd, branches: [damagd]}\n"
        "      - back: n_ordr\n"
    )
    where = "error schema tests/small_refund/the one"
    assert run(text) == [
        f"{where}/call 1/expect/node: small_refund has no node 'n_reasn': did you mean "
        f"'n_reason'? ({FILE}:5)",
        f"{where}/call 1/expect/tell: small_refund has no node 'n_polic': did you mean "
        f"'n_policy'? ({FILE}:5)",
        f"{where}/call 1/expect/outcome: small_refund has no outcome 'refundd': did you mean "
        f"'refunded'? ({FILE}:5)",
        f"{where}/call 1/expect/branches: small_refund has no label 'damagd': did you mean "
        f"'damaged'? ({FILE}:5)",
        f"{where}/call 2/back: small_refund has no node 'n_ordr': did you mean 'n_order'? "
        f"({FILE}:6)",
    ]


def test_a_scenario_naming_what_the_flow_no_longer_has_lists_what_it_has() -> None:
    text = scenario(
        "      - answer: {values: {order: A100}}\n"
        "        expect: {node: n_wifi, outcome: resolved}\n"
    )
    where = "error schema tests/small_refund/the one"
    assert run(text) == [
        f"{where}/call 1/expect/node: small_refund has no node 'n_wifi' (nodes: n_order, "
        f"n_reason, n_identity, n_policy, n_refund, n_review) ({FILE}:5)",
        f"{where}/call 1/expect/outcome: small_refund has no outcome 'resolved' (outcomes: "
        f"escalated, refunded) ({FILE}:5)",
    ]


def test_duplicate_names_and_a_refused_start_with_calls_are_findings() -> None:
    text = (
        "scenarios:\n"
        "  - name: a\n"
        "  - name: a\n"
        "  - name: b\n"
        "    start: {values: {order: 3}, expect: {error: value is not a string}}\n"
        "    calls:\n"
        "      - answer: damaged\n"
        "guarantees:\n"
        "  - {name: g, every_stall_hands_over: true}\n"
        "  - {name: g, every_stall_hands_over: true}\n"
    )
    where = "error schema tests/small_refund"
    assert findings(text) == [
        f"{where}/a: another scenario has this name: give each scenario its own ({FILE}:3)",
        f"{where}/b/start: the start is expected to be refused, so no run exists for the calls "
        f"after it: move those calls to another scenario ({FILE}:5)",
        f"{where}/g: another guarantee has this name: give each guarantee its own ({FILE}:10)",
    ]


def test_a_key_given_twice_anywhere_is_a_finding() -> None:
    message = "appears twice in one mapping and YAML keeps only the last: remove or rename one"
    nested = (
        "scenarios:\n"
        "  - name: a\n"
        "    calls:\n"
        "      - answer: damaged\n"
        "        expect: {status: advanced}\n"
        "        expect: {status: stalled}\n"
    )
    assert findings(nested) == [
        f"error schema tests/small_refund: key 'expect' {message} of them ({FILE}:6)"
    ]
    assert findings("scenarios: []\nscenarios: []\n") == [
        f"error schema tests/small_refund: key 'scenarios' {message} of them ({FILE}:2)"
    ]


def test_a_file_that_is_not_a_mapping_or_not_yaml_is_one_finding() -> None:
    assert findings("- name: a\n") == [
        "error schema tests/small_refund: YAML refused: a tests file is a mapping with "
        "scenarios and guarantees, not a list or a single value: start the document with "
        f"scenarios: ({FILE}:1)"
    ]
    (line,) = findings("scenarios:\n  - name: [a\n")
    assert line.startswith("error schema tests/small_refund: the YAML does not parse")
    assert line.endswith(f"({FILE}:3)")


def test_an_empty_tests_file_states_nothing_and_passes() -> None:
    tests = parse_flow_tests("# nothing yet\n", flow_id="small_refund", file=FILE)
    report = check_flow_tests(small(), tests)
    assert report.ok and not report.scenarios and not report.findings


def test_shorthands_read_as_their_long_forms() -> None:
    text = (
        "scenarios:\n"
        "  - name: short\n"
        "    calls:\n"
        "      - answer: {values: {order: A100}}\n"
        "      - answer: damaged\n"
        "      - back: n_reason\n"
        "      - back: {}\n"
        "      - close: they left\n"
        "  - name: long\n"
        "    calls:\n"
        "      - answer: {values: {order: A100}}\n"
        "      - answer: {choice: damaged}\n"
        "      - back: {to: n_reason}\n"
        "      - back: null\n"
        "      - close: {reason: they left}\n"
    )
    tests = parse_flow_tests(text, flow_id="small_refund")
    short, long = tests.scenarios
    assert [(c.kind, c.choice, c.to, c.reason) for c in short.calls] == [
        (c.kind, c.choice, c.to, c.reason) for c in long.calls
    ]
    assert all(r.passed for r in check_flow_tests(small(), tests).scenarios)


def test_doctests_of_the_scenario_modules_pass() -> None:
    for module in (scenarios, capture, coverage, flow_tests):
        assert doctest.testmod(module).failed == 0, module.__name__


@pytest.mark.parametrize(
    "names",
    [
        ["a reason goes to a colleague", "not arrived, lost, store credit"],
        ["refunds and credits", "lost and found"],
        ['he said "fine"', "it's, well, late"],
    ],
)
def test_names_in_a_verdict_are_quoted_whole_and_never_joined_by_a_word(names: list[str]) -> None:
    summary = {"ok": False, "scenarios": 5, "guarantees": 0, "failed_scenarios": names}
    verdict = flow_tests.summary_verdict(summary, subject="the draft")
    listed = verdict[verdict.index("(") + 1 : verdict.rindex(")")]
    # Each name is a literal of its own: reading the list back gives the names, exactly.
    assert ast.literal_eval(f"[{listed}]") == names
    assert " and " not in listed.replace(repr(names[0]), "").replace(repr(names[1]), "")
