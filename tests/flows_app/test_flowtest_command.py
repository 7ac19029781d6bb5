"""``manage.py flowtest`` (``guidepost-mcp test``) over a flows directory, and the tests/
folder left out of everything that reads flows."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from flowcore.checks.tests_dir import report_flow_tests
from flowcore.flow.building import build_flow
from flowcore.flow.files import (
    catalog_fingerprint,
    lint_paths,
    load_catalog,
)
from flows_app.selectors import flow_live, flow_tests_report
from tests.support.servers import BUNDLED_FLOWS, copy_flows

REFUND_TESTS = "tests/refund_request.yaml"


def flowtest(*args: str) -> tuple[list[str], CommandError | None]:
    out = StringIO()
    try:
        call_command("flowtest", *args, stdout=out, no_color=True)
    except CommandError as failed:
        return out.getvalue().splitlines(), failed
    return out.getvalue().splitlines(), None


def test_the_bundled_flows_pass_with_full_coverage() -> None:
    lines, failed = flowtest("--flows", str(BUNDLED_FLOWS), "--min-coverage", "100")
    assert failed is None, "\n".join(lines)
    assert lines[-1].startswith("6 flows, ")
    assert "scenarios (0 failed)" in lines[-1] and "guarantees (0 broken)" in lines[-1]
    summaries = [line.split(":")[0] for line in lines if line.endswith("guarantees held")]
    assert summaries == sorted(load_catalog(BUNDLED_FLOWS).flows)
    coverage = [line for line in lines if line.startswith("  coverage")]
    assert len(coverage) == 6
    assert all("nodes 100% (" in line and "edges 100% (" in line for line in coverage)


def test_every_bundled_flow_has_scenarios_and_guarantees() -> None:
    for flow_id in load_catalog(BUNDLED_FLOWS).flows:
        text = (BUNDLED_FLOWS / "tests" / f"{flow_id}.yaml").read_text(encoding="utf-8")
        assert "scenarios:" in text and "guarantees:" in text and "every_path_to" in text


def test_flow_ids_narrow_the_run_and_the_default_is_the_flows_setting() -> None:
    with override_settings(GUIDEPOST_FLOWS_DIR=BUNDLED_FLOWS):
        lines, failed = flowtest("refund_request")
    assert failed is None
    assert lines[0] == "refund_request: 17/17 scenarios passed, 5/5 guarantees held"
    assert lines[-1] == "1 flows, 17 scenarios (0 failed), 5 guarantees (0 broken)"


def test_a_failing_scenario_prints_the_call_expected_and_got_and_fails(flows_copy: Path) -> None:
    path = flows_copy / REFUND_TESTS
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace(
            "expect: {status: completed, node: n_credited, outcome: credited}",
            "expect: {status: completed, node: n_credited, outcome: refunded}",
            1,
        ),
        encoding="utf-8",
    )
    lines, failed = flowtest("refund_request", "--flows", str(flows_copy))
    assert failed is not None and str(failed) == "tests failed: refund_request"
    line = text[: text.index("      - answer: credit")].count("\n") + 1
    assert lines[:3] == [
        f"FAIL refund_request › wrong item, store credit › call 2: answer: credit ({path}:{line})",
        "    outcome: expected refunded, got credited",
        "refund_request: 16/17 scenarios passed, 5/5 guarantees held",
    ]
    assert lines[-1] == "1 flows, 17 scenarios (1 failed), 5 guarantees (0 broken)"


def test_a_broken_guarantee_prints_its_counterexample_and_fails(flows_copy: Path) -> None:
    path = flows_copy / REFUND_TESTS
    path.write_text(
        path.read_text(encoding="utf-8") + "  - name: the order is asked, never given in advance\n"
        "    every_path_to: refunded\n"
        "    passes: n_order\n"
        "    asked: true\n",
        encoding="utf-8",
    )
    lines, failed = flowtest("refund_request", "--flows", str(flows_copy))
    assert failed is not None
    start = next(i for i, line in enumerate(lines) if line.startswith("BROKEN"))
    assert lines[start].startswith(
        "BROKEN refund_request › guarantee 'the order is asked, never given in advance': "
        "every path to refunded passes n_order asked ("
    )
    assert lines[start + 1 : start + 10] == [
        "    the run reaches refunded without passing n_order asked; counterexample:",
        "      n_order            skipped (given in advance)",
        "      n_reason           asked: wrong_item",
        "      n_return_label     told",
        "      n_refund_method    asked: original",
        "      n_amount           asked",
        "      n_amount_check     checked: else",
        "      n_refund_timeline  told",
        "      n_refunded         completed: refunded",
    ]


def test_min_coverage_fails_a_flow_under_it(flows_copy: Path) -> None:
    (flows_copy / REFUND_TESTS).write_text("scenarios:\n  - name: just started\n", encoding="utf-8")
    lines, failed = flowtest("refund_request", "--flows", str(flows_copy), "--min-coverage", "50")
    assert failed is not None
    assert "  coverage: nodes 5.2% (1/19), edges 0% (0/25)" in lines
    assert "FAIL refund_request coverage is under 50%" in lines
    _, failed = flowtest("refund_request", "--flows", str(flows_copy))
    assert failed is None  # without --min-coverage, coverage only informs


def test_a_flow_without_tests_reports_no_coverage(flows_copy: Path) -> None:
    (flows_copy / REFUND_TESTS).unlink()
    lines, failed = flowtest("refund_request", "--flows", str(flows_copy))
    assert failed is None
    assert lines[:2] == [
        "refund_request: no tests file",
        "  coverage: nodes 0% (0/19), edges 0% (0/25)",
    ]


def test_tests_for_a_missing_or_broken_flow_and_an_unknown_id_are_errors(flows_copy: Path) -> None:
    shutil.copy(flows_copy / REFUND_TESTS, flows_copy / "tests" / "refund_requets.yaml")
    broken = flows_copy / "vpn_cannot_connect.yaml"
    broken.write_text(
        broken.read_text(encoding="utf-8").replace("entry: n_error_message", "entry: n_nope")
    )
    lines, failed = flowtest("--flows", str(flows_copy))
    assert failed is not None
    assert lines[:2] == [
        "error schema tests/refund_requets: no flow 'refund_requets' in "
        f"{flows_copy}: closest: refund_request ({flows_copy / 'tests' / 'refund_requets.yaml'})",
        "error schema tests/vpn_cannot_connect: flow vpn_cannot_connect has lint errors, so it "
        f"cannot be tested: run lint on {broken} "
        f"({flows_copy / 'tests' / 'vpn_cannot_connect.yaml'})",
    ]
    lines, failed = flowtest("refund_reqest", "--flows", str(flows_copy))
    assert failed is not None and lines[0] == (
        f"error schema tests/refund_reqest: no flow 'refund_reqest' in {flows_copy}: "
        "closest: refund_request"
    )


def test_a_flow_that_does_not_lint_fails_even_without_tests(flows_copy: Path) -> None:
    (flows_copy / "tests" / "vpn_cannot_connect.yaml").unlink()
    broken = flows_copy / "vpn_cannot_connect.yaml"
    broken.write_text(
        broken.read_text(encoding="utf-8").replace("entry: n_error_message", "entry: x")
    )
    lines, failed = flowtest("--flows", str(flows_copy))
    assert failed is not None and "vpn_cannot_connect" in str(failed)
    assert lines[0] == (
        "error schema tests/vpn_cannot_connect: flow vpn_cannot_connect has lint errors, so it "
        f"cannot be tested: run lint on {broken} ({broken})"
    )


def test_flowtest_refuses_a_missing_directory_and_a_bad_percentage(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such directory"):
        call_command("flowtest", "--flows", str(tmp_path / "nope"))
    with pytest.raises(CommandError, match="from 0 to 100"):
        call_command("flowtest", "--flows", str(BUNDLED_FLOWS), "--min-coverage", "120")


def test_the_tests_folder_is_never_read_as_flows(tmp_path: Path) -> None:
    flows = copy_flows(tmp_path / "flows")
    before = load_catalog(flows)
    fingerprint = catalog_fingerprint(flows)
    # A tests file that would be a broken flow if anything read it as one.
    (flows / "tests" / "extra.yaml").write_text("id: extra\nnodes: nope\n", encoding="utf-8")
    after = load_catalog(flows)
    assert after.flows == before.flows and after.findings == before.findings
    assert catalog_fingerprint(flows) == fingerprint
    assert lint_paths([flows]) == lint_paths([BUNDLED_FLOWS]) == (6, [])


def test_a_draft_flow_is_checked_against_the_live_flows_tests(tmp_path: Path) -> None:
    """What the draft review page calls: the draft's Flow against the live tests file."""
    live = load_catalog(BUNDLED_FLOWS)
    assert report_flow_tests(live.flows["refund_request"], BUNDLED_FLOWS).ok
    text = (BUNDLED_FLOWS / "refund_request.yaml").read_text(encoding="utf-8")
    draft, _ = build_flow(
        text.replace("outcome: credited", "outcome: store_credit"),
        categories=live.categories,
    )
    assert draft is not None
    report = report_flow_tests(draft, BUNDLED_FLOWS)
    assert report is not None and not report.ok
    summary = report.summary()
    assert summary["failed_scenarios"] == [
        "wrong item, store credit",
        "not arrived, lost, store credit",
    ]
    # Both refund guarantees name the outcome credited, which the draft no longer has.
    assert summary["broken_guarantees"] == [
        "money leaves only once the order is identified",
        "money leaves only for a stated reason",
    ]
    where = "error schema tests/refund_request"
    no_end = (
        "no end of refund_request has an outcome matching 'credited', so the guarantee would "
        "hold for nothing: did you mean 'refunded'?"
    )
    no_outcome = "refund_request has no outcome 'credited': did you mean 'refunded'?"
    assert [str(f).rsplit(" (", 1)[0] for f in summary["findings"]] == [
        f"{where}/wrong item, store credit/call 2/expect/outcome: {no_outcome}",
        f"{where}/not arrived, lost, store credit/call 2/expect/outcome: {no_outcome}",
        f"{where}/money leaves only once the order is identified/every_path_to: {no_end}",
        f"{where}/money leaves only for a stated reason/every_path_to: {no_end}",
    ]
    assert report_flow_tests(draft, tmp_path) is None  # no tests file: nothing to check


def test_the_flow_tests_selector_checks_a_flow_against_the_live_tests(
    settings: Any, flows_copy: Path
) -> None:
    settings.GUIDEPOST_FLOWS_DIR = flows_copy
    live = flow_live("refund_request")
    report = flow_tests_report(live)
    assert report is not None and report.ok
    (flows_copy / REFUND_TESTS).unlink()
    assert flow_tests_report(live) is None
