"""A flow's tests file, and checking a flow against it: scenarios, guarantees, coverage.

``<flows dir>/tests/<flow_id>.yaml`` is a mapping with ``scenarios`` (see
``scenarios``) and ``guarantees`` (see ``guarantees``); ``docs/authoring.md``
describes it for authors. ``check_flow_tests`` is the one function that judges a
flow against its tests: the ``test`` command calls it for the live flows, and a
draft's review page calls it with the draft's flow and the live flow's tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from flowcore.checks.coverage import Coverage, coverage_of
from flowcore.checks.guarantees import (
    Guarantee,
    GuaranteeResult,
    check_guarantee,
    check_guarantee_names,
    guarantee_lines,
    read_guarantee,
)
from flowcore.checks.scenarios import (
    Reader,
    Scenario,
    ScenarioResult,
    check_scenario,
    read_scenario,
    run_scenario,
)
from flowcore.common.text import shown
from flowcore.flow.findings import (
    Finding,
    counted,
    format_finding,
    has_errors,
    yaml_error_finding,
)
from flowcore.flow.model import Flow
from flowcore.flow.yaml_safe import NOT_A_MAPPING, YamlMap, YamlRefused, parse_yaml
from flowcore.run.paths import FlowMoves

TESTS_KEYS = ("scenarios", "guarantees")
NOT_A_TESTS_MAPPING = (
    "a tests file is a mapping with scenarios and guarantees, not a list or a single value: "
    "start the document with scenarios:"
)


@dataclass(frozen=True)
class FlowTests:
    """What a tests file states about one flow, and the mistakes found reading it."""

    flow_id: str
    file: str | None = None
    scenarios: tuple[Scenario, ...] = ()
    guarantees: tuple[Guarantee, ...] = ()
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class FlowTestReport:
    """A flow checked against its tests. ``ok``: nothing failed and the file has no error."""

    flow_id: str
    file: str | None
    findings: tuple[Finding, ...]
    scenarios: tuple[ScenarioResult, ...]
    guarantees: tuple[GuaranteeResult, ...]
    coverage: Coverage

    @property
    def failed_scenarios(self) -> list[ScenarioResult]:
        return [r for r in self.scenarios if not r.passed]

    @property
    def broken_guarantees(self) -> list[GuaranteeResult]:
        return [r for r in self.guarantees if not r.held]

    @property
    def ok(self) -> bool:
        return not (has_errors(self.findings) or self.failed_scenarios or self.broken_guarantees)

    @property
    def all_findings(self) -> list[Finding]:
        """The file's findings, then those of scenarios and guarantees that did not run."""
        return [
            *self.findings,
            *(f for r in self.scenarios for f in r.problems),
            *(f for r in self.guarantees for f in r.problems),
        ]

    def summary(self) -> dict[str, object]:
        """What broke, as plain JSON data (to record with a decision, e.g. an approval)."""
        return {
            "flow_id": self.flow_id,
            "ok": self.ok,
            "findings": [format_finding(f) for f in self.all_findings],
            "failed_scenarios": [r.scenario.name for r in self.failed_scenarios],
            "broken_guarantees": [r.guarantee.name for r in self.broken_guarantees],
            "scenarios": len(self.scenarios),
            "guarantees": len(self.guarantees),
            "coverage": {
                "nodes": self.coverage.node_share.percent(),
                "edges": self.coverage.edge_share.percent(),
            },
        }


def parse_flow_tests(text: str, *, flow_id: str, file: str | None = None) -> FlowTests:
    """Read a tests file's text. Never raises: every mistake is a ``schema`` finding, and
    what could be read is kept (a broken scenario is left out, the others stay)."""
    reader = Reader(flow_id, file)
    try:
        data = parse_yaml(text).data
    except YamlRefused as exc:
        if exc.message == NOT_A_MAPPING and exc.line is None:
            return FlowTests(flow_id, file)  # no document at all (empty, or only comments)
        message = NOT_A_TESTS_MAPPING if exc.message == NOT_A_MAPPING else exc.message
        reader.error([], f"YAML refused: {message}", exc.line)
        return FlowTests(flow_id, file, findings=tuple(reader.findings))
    except yaml.YAMLError as exc:
        found = yaml_error_finding(exc, where=reader.where(), file=file)
        return FlowTests(flow_id, file, findings=(found,))
    reader.unknown_keys(data, TESTS_KEYS, [])
    _duplicate_keys(reader, data)
    scenarios: list[Scenario] = []
    raw = data.get("scenarios") or []
    if not isinstance(raw, list):
        reader.error(
            ["scenarios"],
            "scenarios is a list: write each as `- name: ...`",
            data.key_lines.get("scenarios"),
        )
        raw = []
    lines = getattr(raw, "item_lines", [])
    names: set[str] = set()
    for index, item in enumerate(raw):
        scenario = read_scenario(reader, item, index, lines[index] if lines else None)
        if scenario is None:
            continue
        if scenario.name in names:
            reader.error(
                [scenario.name],
                "another scenario has this name: give each scenario its own",
                scenario.line,
            )
            continue
        names.add(scenario.name)
        scenarios.append(scenario)
    guarantees: list[Guarantee] = []
    raw = data.get("guarantees") or []
    if not isinstance(raw, list):
        reader.error(
            ["guarantees"],
            "guarantees is a list: write each as `- name: ...`",
            data.key_lines.get("guarantees"),
        )
        raw = []
    lines = getattr(raw, "item_lines", [])
    names = set()
    for index, item in enumerate(raw):
        guarantee = read_guarantee(reader, item, index, lines[index] if lines else None)
        if guarantee is None:
            continue
        if guarantee.name in names:
            reader.error(
                [guarantee.name],
                "another guarantee has this name: give each guarantee its own",
                guarantee.line,
            )
            continue
        names.add(guarantee.name)
        guarantees.append(guarantee)
    return FlowTests(flow_id, file, tuple(scenarios), tuple(guarantees), tuple(reader.findings))


def _duplicate_keys(reader: Reader, data: YamlMap) -> None:
    """Report every key given twice in one mapping, anywhere in the file (YAML keeps the
    last, silently)."""
    found: list[tuple[int, str]] = []
    stack: list[object] = [data]
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        if not isinstance(value, dict | list) or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            found += [(line, str(key)) for key, line in getattr(value, "duplicates", ())]
            stack.extend(value.values())
        else:
            stack.extend(value)
    for line, key in sorted(found):
        reader.error(
            [],
            f"key {key!r} appears twice in one mapping and YAML keeps only the last: "
            "remove or rename one of them",
            line,
        )


def check_flow_tests(flow: Flow, tests: FlowTests) -> FlowTestReport:
    """Run every scenario of ``tests`` on ``flow``, check every guarantee on every path of
    ``flow``, and measure the scenarios' coverage. Pure and never raises.

    A scenario or guarantee that names what ``flow`` does not have (a node, an outcome, a
    label) is not run: it fails with its findings.
    """
    moves = FlowMoves(flow)
    reader = Reader(tests.flow_id, tests.file)
    scenario_results: list[ScenarioResult] = []
    for scenario in tests.scenarios:
        problems = check_scenario(flow, scenario, reader)
        if problems:
            scenario_results.append(ScenarioResult(scenario, problems=tuple(problems)))
        else:
            scenario_results.append(run_scenario(flow, scenario))
    guarantee_results: list[GuaranteeResult] = []
    for guarantee in tests.guarantees:
        problems = check_guarantee_names(flow, guarantee, reader)
        if problems:
            guarantee_results.append(GuaranteeResult(guarantee, problems=tuple(problems)))
        else:
            guarantee_results.append(check_guarantee(moves, guarantee))
    coverage = coverage_of(moves, (s for r in scenario_results for s in r.states))
    return FlowTestReport(
        flow_id=flow.id,
        file=tests.file,
        findings=tests.findings,
        scenarios=tuple(scenario_results),
        guarantees=tuple(guarantee_results),
        coverage=coverage,
    )


def report_lines(report: FlowTestReport, *, min_coverage: float | None = None) -> list[str]:
    """The runner's text for one flow: failures first (each with what was expected and what
    came back), then a summary line and the coverage with the edges never taken."""
    lines: list[str] = [format_finding(f) for f in report.findings]

    def place(line: int | None) -> str:
        if report.file is None:
            return ""
        return f" ({report.file}:{line})" if line else f" ({report.file})"

    for result in report.scenarios:
        for problem in result.problems:
            lines.append(format_finding(problem))
        failure = result.failure
        if failure is None:
            continue
        lines.append(
            f"FAIL {report.flow_id} › {result.scenario.name} › {failure.where}: "
            f"{failure.call.text()}{place(failure.call.line or result.scenario.line)}"
        )
        lines += [f"    {m.text()}" for m in failure.mismatches]
    for checked in report.guarantees:
        for problem in checked.problems:
            lines.append(format_finding(problem))
        if checked.counterexample is None:
            continue
        g = checked.guarantee
        lines.append(
            f"BROKEN {report.flow_id} › guarantee {g.name!r}: {g.statement()}{place(g.line)}"
        )
        lines += [f"    {text}" for text in guarantee_lines(checked)]
    passed = sum(1 for r in report.scenarios if r.passed)
    held = sum(1 for r in report.guarantees if r.held)
    summary = (
        f"{report.flow_id}: {passed}/{len(report.scenarios)} scenarios passed, "
        f"{held}/{len(report.guarantees)} guarantees held"
    )
    if report.file is None and not report.scenarios and not report.guarantees:
        summary = f"{report.flow_id}: no tests file"
    lines.append(summary)
    coverage = report.coverage
    lines.append(f"  coverage: nodes {coverage.node_share}, edges {coverage.edge_share}")
    missed = coverage.missed_edges
    if missed:
        lines.append("  edges never taken:")
        lines += [f"    {edge}" for edge in missed]
    if min_coverage is not None and not coverage.at_least(min_coverage):
        lines.append(f"FAIL {report.flow_id} coverage is under {min_coverage:g}%")
    return lines


# --- a summary in words: draft lists, the draft page, a refused approval ---------------------

# How many scenario or guarantee names a sentence lists before "and N more".
NAMES_LISTED = 3
# How many of them an agent's brief of the tests names.
BRIEF_NAMES = 5


def summary_status(summary: Mapping[str, object] | None) -> str:
    """A tests summary (``FlowTestReport.summary()``; None: no tests file) in a word or two.

    >>> summary_status(None)
    'none'
    >>> summary_status({"ok": True, "failed_scenarios": [], "broken_guarantees": []})
    'ok'
    >>> summary_status({"ok": False, "failed_scenarios": ["a", "b"], "broken_guarantees": ["c"]})
    '3 broken'
    >>> summary_status({"ok": False, "failed_scenarios": [], "broken_guarantees": []})
    'tests file has errors'
    """
    if summary is None:
        return "none"
    if summary.get("ok"):
        return "ok"
    broken = len(_names(summary, "failed_scenarios")) + len(_names(summary, "broken_guarantees"))
    return f"{broken} broken" if broken else "tests file has errors"


def summary_verdict(summary: Mapping[str, object], *, subject: str = "the flow") -> str:
    """What the tests say about a flow (``subject``), as one clause.

    >>> summary_verdict({"ok": True, "scenarios": 15, "guarantees": 4})
    'all 15 scenarios pass and all 4 guarantees hold'
    >>> summary_verdict({"ok": True, "scenarios": 1, "guarantees": 0})
    'its one scenario passes; the tests state no guarantees'
    >>> summary_verdict({"ok": False, "scenarios": 15, "guarantees": 4,
    ...     "failed_scenarios": ["a", "b", "c", "d"], "broken_guarantees": ["e"]},
    ...     subject="it")
    "it fails 4 of 15 scenarios ('a', 'b', 'c' and 1 more) and breaks 1 of 4 guarantees ('e')"
    >>> summary_verdict({"ok": False, "scenarios": 2, "guarantees": 0,
    ...     "failed_scenarios": [], "broken_guarantees": []})
    'the tests file has errors, so the flow cannot be checked'
    """
    scenarios, guarantees = _count(summary, "scenarios"), _count(summary, "guarantees")
    if summary.get("ok"):
        if not scenarios and not guarantees:
            return "the tests state no scenarios and no guarantees: nothing to check"
        parts = [
            "the tests state no scenarios"
            if not scenarios
            else "its one scenario passes"
            if scenarios == 1
            else f"all {scenarios} scenarios pass",
            "the tests state no guarantees"
            if not guarantees
            else "its one guarantee holds"
            if guarantees == 1
            else f"all {guarantees} guarantees hold",
        ]
        return f"{parts[0]} and {parts[1]}" if scenarios and guarantees else "; ".join(parts)
    failed = _names(summary, "failed_scenarios")
    broken = _names(summary, "broken_guarantees")
    parts = []
    if failed:
        parts.append(f"fails {len(failed)} of {counted(scenarios, 'scenario')} ({_listed(failed)})")
    if broken:
        parts.append(
            f"breaks {len(broken)} of {counted(guarantees, 'guarantee')} ({_listed(broken)})"
        )
    if not parts:
        return f"the tests file has errors, so {subject} cannot be checked"
    return f"{subject} {' and '.join(parts)}"


def brief_of_tests(summary: Mapping[str, object]) -> dict[str, object]:
    """A tests summary as an agent reads it (``guide_draft``'s and a draft resource's
    ``tests``): how many scenarios and guarantees, how many the flow fails or
    breaks, and the names of up to BRIEF_NAMES of them, failed scenarios first.

    >>> brief_of_tests({"ok": False, "scenarios": 15, "guarantees": 4,
    ...     "failed_scenarios": ["a", "b", "c", "d", "e"], "broken_guarantees": ["f"]})
    {'scenarios': 15, 'failed': 5, 'guarantees': 4, 'broken': 1, 'names': ['a', 'b', 'c', 'd', 'e']}
    >>> brief_of_tests({"ok": True, "scenarios": 2, "guarantees": 0})
    {'scenarios': 2, 'failed': 0, 'guarantees': 0, 'broken': 0, 'names': []}
    """
    failed = _names(summary, "failed_scenarios")
    broken = _names(summary, "broken_guarantees")
    return {
        "scenarios": _count(summary, "scenarios"),
        "failed": len(failed),
        "guarantees": _count(summary, "guarantees"),
        "broken": len(broken),
        "names": [*failed, *broken][:BRIEF_NAMES],
    }


def _names(summary: Mapping[str, object], key: str) -> list[str]:
    value = summary.get(key)
    return [str(name) for name in value] if isinstance(value, list) else []


def _count(summary: Mapping[str, object], key: str) -> int:
    value = summary.get(key)
    return value if isinstance(value, int) else 0


def _listed(names: list[str]) -> str:
    """Names as Python would quote them, separated by commas: a name may hold commas,
    "and" or quotes, so names are never joined by a word, and each is quoted so that
    where it ends is never in doubt.

    >>> print(_listed(["a", "not arrived, lost, store credit"]))
    'a', 'not arrived, lost, store credit'
    >>> print(_listed(["it's", "b", "c", "d"]))
    "it's", 'b', 'c' and 1 more
    """
    quoted = ", ".join(shown(name) for name in names[:NAMES_LISTED])
    more = len(names) - NAMES_LISTED
    return f"{quoted} and {more} more" if more > 0 else quoted
