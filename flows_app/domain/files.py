"""Flow files on disk: a flows directory, its categories.yaml, linting paths, tests files.

The only module of the domain that reads files. Nothing here raises for bad
content: every problem becomes a finding with its file and line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from flows_app.domain import lint
from flows_app.domain.building import build_flow
from flows_app.domain.findings import (
    Finding,
    finding,
    has_errors,
    refused_finding,
    yaml_error_finding,
)
from flows_app.domain.flow_tests import (
    FlowTestReport,
    FlowTests,
    check_flow_tests,
    parse_flow_tests,
)
from flows_app.domain.limits import MAX_YAML_BYTES
from flows_app.domain.model import Category, Flow, frozen_mapping
from flows_app.domain.names import closest
from flows_app.domain.yaml_safe import YamlRefused, parse_yaml

CATEGORIES_FILE = "categories.yaml"
FLOW_SUFFIX = ".yaml"
TESTS_DIR = "tests"  # scenario and guarantee files, one per flow: never read as flows


def _read_text(path: Path, *, where: str) -> tuple[str | None, list[Finding]]:
    file = str(path)
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            message = (
                f"the file is larger than {MAX_YAML_BYTES // 1024} KiB: "
                "split the procedure into smaller flows"
            )
            return None, [refused_finding(message, where=where, file=file)]
        return path.read_text(encoding="utf-8"), []
    except UnicodeDecodeError as exc:
        message = f"the file is not UTF-8 (byte {exc.start}): save it as UTF-8"
        return None, [finding("error", "schema", where, message, file=file)]
    except OSError as exc:
        message = f"the file cannot be read ({exc.strerror}): check that it exists and is readable"
        return None, [finding("error", "schema", where, message, file=file)]


def load_categories(path: Path) -> tuple[dict[str, Category], list[Finding]]:
    """Read categories.yaml (``id: {title, description}``); bad entries are left out.

    Never raises: a missing or broken file is reported as ``schema`` findings.
    """
    text, findings = _read_text(path, where="categories")
    if text is None:
        return {}, findings
    try:
        data = parse_yaml(text).data
    except YamlRefused as exc:
        message = exc.message.replace("a flow is", "categories.yaml is")
        return {}, [refused_finding(message, where="categories", file=str(path), line=exc.line)]
    except yaml.YAMLError as exc:
        return {}, [yaml_error_finding(exc, where="categories", file=str(path))]
    categories: dict[str, Category] = {}
    for cat_id, spec in data.items():
        found = lint.lint_category(cat_id, spec, file=str(path), line=data.key_lines.get(cat_id))
        findings += found
        if not has_errors(found):
            categories[cat_id] = Category(
                id=cat_id, title=spec["title"], description=spec.get("description", "")
            )
    return categories, findings


def flow_files(directory: Path) -> list[Path]:
    """The flow files of a directory: ``*.yaml`` except categories.yaml and dotfiles, by name."""
    if not directory.is_dir():
        return []
    return sorted(
        (
            path
            for path in directory.iterdir()
            if path.suffix == FLOW_SUFFIX
            and path.name != CATEGORIES_FILE
            and not path.name.startswith(".")
            and path.is_file()
        ),
        key=lambda path: path.name,
    )


def lint_file(
    path: Path, *, categories: Mapping[str, Category]
) -> tuple[Flow | None, list[Finding]]:
    """Read and build one flow file; its stem is the expected flow id. Never raises."""
    text, findings = _read_text(path, where=path.stem)
    if text is None:
        return None, findings
    return build_flow(text, categories=categories, file=str(path), expected_id=path.stem)


@dataclass(frozen=True)
class FlowCatalog:
    """Every flow of a directory that lints without errors, plus all findings."""

    directory: Path
    categories: Mapping[str, Category]
    flows: Mapping[str, Flow]
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f["level"] == "error")


def load_catalog(directory: Path) -> FlowCatalog:
    """Load categories.yaml and every flow file of ``directory``.

    Never raises for bad content: flows with errors are left out of ``flows`` and
    their findings kept in ``findings``. A missing directory or categories.yaml is
    a ``schema`` finding.
    """
    categories, findings = load_categories(directory / CATEGORIES_FILE)
    flows: dict[str, Flow] = {}
    for path in flow_files(directory):
        flow, found = lint_file(path, categories=categories)
        findings += found
        if flow is not None:
            flows[flow.id] = flow
    return FlowCatalog(
        directory=directory,
        categories=frozen_mapping(categories),
        flows=frozen_mapping(flows),
        findings=tuple(findings),
    )


def catalog_fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of every ``*.yaml`` in ``directory``: poll it to notice edits.

    Cheap (one directory scan, no reads); an unreadable or missing directory gives ``()``.
    """
    entries: list[tuple[str, int, int]] = []
    try:
        with os.scandir(directory) as scan:
            for entry in scan:
                if not entry.name.endswith(FLOW_SUFFIX):
                    continue
                try:
                    stat = entry.stat()
                except OSError:
                    continue  # removed between listing and stat
                entries.append((entry.name, stat.st_size, stat.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(entries))


def lint_paths(paths: Sequence[Path]) -> tuple[int, list[Finding]]:
    """Lint directories and single files; return (flow files checked, findings).

    A flow file is checked against the categories.yaml of its own directory, whose
    findings are reported once. Raises FileNotFoundError for a path that does not exist.
    """
    categories_by_dir: dict[Path, dict[str, Category]] = {}
    findings: list[Finding] = []
    checked = 0

    def categories_of(directory: Path) -> dict[str, Category]:
        if directory not in categories_by_dir:
            categories, found = load_categories(directory / CATEGORIES_FILE)
            categories_by_dir[directory] = categories
            findings.extend(found)
        return categories_by_dir[directory]

    for path in paths:
        if path.is_dir():
            files = flow_files(path)
        elif path.is_file():
            files = [] if path.name == CATEGORIES_FILE else [path]
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
        categories = categories_of(path if path.is_dir() else path.parent)
        for file in files:
            findings += lint_file(file, categories=categories)[1]
            checked += 1
    return checked, findings


# --- tests files ---------------------------------------------------------------------------


def flow_tests_path(directory: Path, flow_id: str) -> Path:
    """Where the tests of flow ``flow_id`` live: ``<directory>/tests/<flow_id>.yaml``."""
    return directory / TESTS_DIR / f"{flow_id}{FLOW_SUFFIX}"


def flow_tests_files(directory: Path) -> list[Path]:
    """The tests files of a flows directory (``tests/*.yaml``, dotfiles left out), by name."""
    return flow_files(directory / TESTS_DIR)


def read_flow_tests(path: Path, flow_id: str) -> FlowTests:
    """Read one tests file. Never raises: an unreadable file is a ``schema`` finding."""
    text, findings = _read_text(path, where=f"{TESTS_DIR}/{flow_id}")
    if text is None:
        return FlowTests(flow_id, str(path), findings=tuple(findings))
    return parse_flow_tests(text, flow_id=flow_id, file=str(path))


def load_flow_tests(directory: Path, flow_id: str) -> FlowTests | None:
    """The tests of ``flow_id`` in the flows ``directory``, or None when it has no tests file.

    With ``check_flow_tests`` this is what a draft's page needs: the live flow's tests,
    checked against the draft's flow.
    """
    path = flow_tests_path(directory, flow_id)
    return read_flow_tests(path, flow_id) if path.is_file() else None


def report_flow_tests(flow: Flow, directory: Path) -> FlowTestReport | None:
    """``flow`` checked against the tests of its id in the flows ``directory``; None when
    there is no tests file.

    What a draft's review page calls: the draft's flow against the live flow's tests,
    so the reviewer sees which scenarios and guarantees the draft would break.
    """
    tests = load_flow_tests(directory, flow.id)
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
