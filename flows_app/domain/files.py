"""Flow files on disk: a flows directory, its categories.yaml, linting paths, and writing a flow.

The only module of the domain that touches files. Nothing here raises for bad
content: every problem becomes a finding with its file and line. A flow file is
written only by ``write_flow_file`` (approval), atomically.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
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
from flows_app.domain.limits import MAX_YAML_BYTES
from flows_app.domain.model import Category, Flow, frozen_mapping
from flows_app.domain.yaml_safe import YamlRefused, parse_yaml

CATEGORIES_FILE = "categories.yaml"
FLOW_SUFFIX = ".yaml"


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


def write_flow_file(directory: Path, flow_id: str, text: str) -> Path:
    """Write ``<directory>/<flow_id>.yaml`` so no reader ever sees a half-written file.

    The text goes to a temporary file in the same directory (a dotfile not ending in
    .yaml, which the catalog ignores), is flushed and fsynced, and replaces the flow
    file in one rename; the directory is fsynced so the rename survives a crash.
    Raises OSError when the directory cannot be written (nothing is left behind).
    """
    target = directory / f"{flow_id}{FLOW_SUFFIX}"
    try:
        mode = target.stat().st_mode & 0o777  # a replaced file keeps its permissions
    except FileNotFoundError:
        mode = 0o644  # mkstemp's 0600 would hide the flow from a server run as another user
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{flow_id}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)
    return target
