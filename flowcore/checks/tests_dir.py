"""A flows directory's tests files (``tests/<flow_id>.yaml``): where each lives, reading
them, and checking flows and drafts against them. Never raises for bad content: an
unreadable file is a ``schema`` finding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flowcore.checks.flow_tests import (
    FlowTestReport,
    FlowTests,
    check_flow_tests,
    parse_flow_tests,
)
from flowcore.common.errors import Refusal
from flowcore.common.names import closest
from flowcore.flow.drafts import DraftCheck, check_draft
from flowcore.flow.files import (
    FLOW_SUFFIX,
    TESTS_DIR,
    FlowCatalog,
    flow_files,
    load_catalog,
    read_text,
)
from flowcore.flow.findings import Finding, finding, has_errors
from flowcore.flow.lint.live import LiveRevision
from flowcore.flow.model import Category, Flow


def flow_tests_path(directory: Path, flow_id: str) -> Path:
    return directory / TESTS_DIR / f"{flow_id}{FLOW_SUFFIX}"


def flow_tests_files(directory: Path) -> list[Path]:
    return flow_files(directory / TESTS_DIR)


def read_flow_tests(path: Path, flow_id: str, *, name: str | None = None) -> FlowTests:
    """Read one tests file. Never raises: an unreadable file is a ``schema`` finding.
    ``name`` is what findings and reports call the file (default: ``path``)."""
    file = str(path) if name is None else name
    text, findings = read_text(path, where=f"{TESTS_DIR}/{flow_id}", file=file)
    if text is None:
        return FlowTests(flow_id, file, findings=tuple(findings))
    return parse_flow_tests(text, flow_id=flow_id, file=file)


def load_flow_tests(directory: Path, flow_id: str, *, relative: bool = False) -> FlowTests | None:
    """The tests of ``flow_id`` in the flows ``directory``, or None when it has no tests file.
    ``relative``: findings and reports name the file ``tests/<flow_id>.yaml``."""
    path = flow_tests_path(directory, flow_id)
    if not path.is_file():
        return None
    name = path.relative_to(directory).as_posix() if relative else None
    return read_flow_tests(path, flow_id, name=name)


def report_flow_tests(
    flow: Flow, directory: Path, *, relative: bool = False
) -> FlowTestReport | None:
    """``flow`` checked against the tests of its id in the flows ``directory``; None when
    there is no tests file. ``relative``: the file is named ``tests/<flow_id>.yaml``."""
    tests = load_flow_tests(directory, flow.id, relative=relative)
    return None if tests is None else check_flow_tests(flow, tests)


@dataclass(frozen=True)
class DirectoryReport:
    """The flows of a directory checked against their tests (``guidepost-mcp test``)."""

    reports: tuple[FlowTestReport, ...]
    # Tests files that name no loadable flow, and flows that do not lint.
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not has_errors(self.findings) and all(r.ok for r in self.reports)


def check_flows_dir(directory: Path, flow_ids: Sequence[str] = ()) -> DirectoryReport:
    """Check the flows of ``directory`` (all, or ``flow_ids``) against their tests files.

    A flow without a tests file gets an empty report (no coverage). A flow file that does
    not lint, a tests file whose flow is missing, and a flow id that is not a flow are
    findings.
    """
    catalog = load_catalog(directory)
    findings: list[Finding] = []
    files = (*flow_files(directory), *flow_tests_files(directory))
    wanted = list(flow_ids) or sorted({*catalog.flows, *(p.stem for p in files)})
    reports: list[FlowTestReport] = []
    for flow_id in wanted:
        flow = catalog.flows.get(flow_id)
        tests = load_flow_tests(directory, flow_id)
        if flow is None:
            findings.append(_no_flow(catalog, flow_id, tests))
            continue
        reports.append(check_flow_tests(flow, tests or FlowTests(flow_id)))
    return DirectoryReport(tuple(reports), tuple(findings))


def _no_flow(catalog: FlowCatalog, flow_id: str, tests: FlowTests | None) -> Finding:
    path = catalog.directory / f"{flow_id}{FLOW_SUFFIX}"
    file = tests.file if tests is not None else None
    where = f"{TESTS_DIR}/{flow_id}"
    if path.is_file():
        file = file or str(path)
        message = f"flow {flow_id} has lint errors, so it cannot be tested: run lint on {path}"
    else:
        near = closest(flow_id, catalog.flows, n=3)
        known = f"closest: {', '.join(near)}" if near else f"no flow is named {flow_id}"
        message = f"no flow {flow_id!r} in {catalog.directory}: {known}"
    return finding("error", "schema", where, message, file=file)


def judge_draft(
    text: str,
    categories: Mapping[str, Category],
    tests_in: Path | None = None,
    live: Mapping[str, LiveRevision] | None = None,
) -> DraftCheck | Refusal:
    """``check_draft`` for a process of its own (``flows_app.judging``): its check
    without the flow (compiled patterns do not pickle) but with the tests of its flow id
    in the flows directory ``tests_in`` checked on it, or the refusal it raised."""
    try:
        check = check_draft(text, categories=categories, live=live)
    except Refusal as refused:
        return refused
    report = (
        report_flow_tests(check.flow, tests_in, relative=True)
        if check.flow is not None and tests_in is not None
        else None
    )
    return replace(check, flow=None, tests=report.summary() if report else None)
