"""Flow files on disk: a flows directory, its categories.yaml, linting paths, and writing
a flow (its tests files are read by ``flowcore.checks.tests_dir``).

The only module of the core that touches files. Nothing here raises for bad content:
every problem becomes a finding with its file and line. Each file is judged alone, so
one broken file never hides or holds back another. Files are written atomically.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from flowcore.common.limits import MAX_YAML_BYTES
from flowcore.flow import lint
from flowcore.flow.building import build_flow
from flowcore.flow.findings import (
    Finding,
    finding,
    has_errors,
    refused_finding,
    yaml_error_finding,
)
from flowcore.flow.flow_ids import FLOW_ID_RE, reserved_flow_id
from flowcore.flow.model import Category, Flow, frozen_mapping
from flowcore.flow.yaml_safe import YamlRefused, cycle_collector_held, parse_yaml

CATEGORIES_FILE = "categories.yaml"
FLOW_SUFFIX = ".yaml"
TESTS_DIR = "tests"  # scenario and guarantee files, one per flow: never read as flows


def read_text(
    path: Path, *, where: str, file: str | None = None
) -> tuple[str | None, list[Finding]]:
    file = str(path) if file is None else file
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


def load_categories(path: Path) -> tuple[dict[str, Category] | None, list[Finding]]:
    """Read categories.yaml (``id: {title, description}``); bad entries are left out.

    Never raises. A file that cannot be used at all (missing, unreadable, not YAML)
    gives ``None`` and one ``schema`` finding naming it; flows are then not also
    reported for their category (see ``AnyCategory``).
    """
    if not path.exists():
        message = (
            f"{CATEGORIES_FILE} is missing: create it with one `id: {{title, description}}` "
            "entry per category; each flow's category names one"
        )
        return None, [finding("error", "schema", "categories", message, file=str(path))]
    text, findings = read_text(path, where="categories")
    if text is None:
        return None, findings
    try:
        data = parse_yaml(text).data
    except YamlRefused as exc:
        message = exc.message.replace("a flow is", "categories.yaml is")
        return None, [refused_finding(message, where="categories", file=str(path), line=exc.line)]
    except yaml.YAMLError as exc:
        return None, [yaml_error_finding(exc, where="categories", file=str(path))]
    categories: dict[str, Category] = {}
    for cat_id, spec in data.items():
        found = lint.lint_category(cat_id, spec, file=str(path), line=data.key_lines.get(cat_id))
        findings += found
        if not has_errors(found):
            categories[cat_id] = Category(
                id=cat_id, title=spec["title"], description=spec.get("description", "")
            )
    return categories, findings


class AnyCategory(Mapping[str, Category]):
    """Stands in for a categories.yaml that cannot be read: every category exists.

    Flows are then judged on everything else, and the one missing or broken file
    is one finding, not one ``unknown_category`` per flow. Never served from.
    """

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __getitem__(self, key: str) -> Category:
        if not isinstance(key, str):
            raise KeyError(key)
        return Category(id=key, title=key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


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
    text, findings = read_text(path, where=path.stem)
    if text is None:
        return None, findings
    return build_flow(text, categories=categories, file=str(path), expected_id=path.stem)


@dataclass(frozen=True)
class FlowFile:
    """What one flow file gave: its flow when it lints without errors, and its findings."""

    path: Path
    flow: Flow | None
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f["level"] == "error")


@dataclass(frozen=True)
class FlowCatalog:
    """The flows of a directory that may be served, plus every finding.

    ``files`` holds each flow file's own result. On a reload, ``kept`` names the
    files whose new content has errors and whose last good flow is still in
    ``flows``, and ``categories_kept`` says categories.yaml could not be read and
    the last good categories are still in use.
    """

    directory: Path
    categories: Mapping[str, Category]
    flows: Mapping[str, Flow]
    findings: tuple[Finding, ...]
    files: Mapping[str, FlowFile] = field(default_factory=frozen_mapping)
    kept: tuple[str, ...] = ()
    categories_kept: bool = False

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f["level"] == "error")


def load_catalog(directory: Path, *, last_good: FlowCatalog | None = None) -> FlowCatalog:
    """Load categories.yaml and every flow file of ``directory``, each file judged alone.

    Never raises for bad content: flows with errors are left out of ``flows``, their
    findings kept. With ``last_good`` (a reload), a file whose new content has errors
    keeps the flow it had there, and an unreadable categories.yaml keeps its categories.
    """
    with cycle_collector_held():
        return _load_catalog(directory, last_good)


def _load_catalog(directory: Path, last_good: FlowCatalog | None) -> FlowCatalog:
    read, findings = load_categories(directory / CATEGORIES_FILE)
    categories_kept = read is None and last_good is not None
    categories: dict[str, Category] = dict(
        read if read is not None else last_good.categories if last_good is not None else {}
    )
    judge: Mapping[str, Category] = categories if read is not None or last_good else AnyCategory()
    servable = read is not None or last_good is not None
    flows: dict[str, Flow] = {}
    files: dict[str, FlowFile] = {}
    kept: list[str] = []
    for path in flow_files(directory):
        flow, found = lint_file(path, categories=judge)
        findings += found
        files[path.name] = FlowFile(path=path, flow=flow, findings=tuple(found))
        if flow is not None and servable:
            flows[flow.id] = flow
        elif last_good is not None and path.stem in last_good.flows:
            flows[path.stem] = last_good.flows[path.stem]
            kept.append(path.name)
    if last_good is not None:
        # A kept flow keeps its category listed, even if categories.yaml dropped it.
        for flow in flows.values():
            if flow.category not in categories and flow.category in last_good.categories:
                categories[flow.category] = last_good.categories[flow.category]
    return FlowCatalog(
        directory=directory,
        categories=frozen_mapping(categories),
        flows=frozen_mapping(flows),
        findings=tuple(findings),
        files=frozen_mapping(files),
        kept=tuple(kept),
        categories_kept=categories_kept,
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


def categories_file_for(
    path: Path, *, categories: Path | None = None, fallback_dir: Path | None = None
) -> Path:
    """The categories.yaml a flow file or directory is linted against.

    ``categories`` when given; else the one beside the file (or in the directory);
    else the one in ``fallback_dir`` (the configured flows directory) when it exists;
    else the one beside the file, which is then reported missing.
    """
    if categories is not None:
        return categories
    beside = (path if path.is_dir() else path.parent) / CATEGORIES_FILE
    if beside.exists() or fallback_dir is None:
        return beside
    configured = fallback_dir / CATEGORIES_FILE
    return configured if configured.exists() else beside


def lint_paths(
    paths: Sequence[Path], *, categories: Path | None = None, fallback_dir: Path | None = None
) -> tuple[int, list[Finding]]:
    """Lint directories and single files; return (flow files checked, findings).

    Each path is checked against ``categories_file_for`` it; each categories file's
    findings are reported once. Raises FileNotFoundError for a path that does not exist.
    """
    loaded: dict[Path, Mapping[str, Category]] = {}
    findings: list[Finding] = []
    checked = 0

    def categories_from(file: Path) -> Mapping[str, Category]:
        if file not in loaded:
            read, found = load_categories(file)
            loaded[file] = read if read is not None else AnyCategory()
            findings.extend(found)
        return loaded[file]

    with cycle_collector_held():
        for path in paths:
            if path.is_dir():
                files = flow_files(path)
            elif path.is_file():
                files = [] if path.name == CATEGORIES_FILE else [path]
            else:
                raise FileNotFoundError(f"no such file or directory: {path}")
            known = categories_from(
                categories_file_for(path, categories=categories, fallback_dir=fallback_dir)
            )
            for file in files:
                findings += lint_file(file, categories=known)[1]
                checked += 1
    return checked, findings


def write_flow_file(directory: Path, flow_id: str, text: str) -> Path:
    """Write ``<directory>/<flow_id>.yaml`` so no reader ever sees a half-written file,
    and the write survives a crash.

    Raises OSError when the directory cannot be written (nothing is left behind), and
    ValueError, writing nothing, for a ``flow_id`` that may not name a flow.
    """
    problem = (
        reserved_flow_id(flow_id)
        if FLOW_ID_RE.fullmatch(flow_id)
        else "a flow id is 1-64 lowercase letters, digits or _"
    )
    if problem is not None:
        raise ValueError(f"no flow file is written for {flow_id!r}: {problem}")
    return _write_atomically(directory, f"{flow_id}{FLOW_SUFFIX}", text)


def _write_atomically(directory: Path, name: str, text: str) -> Path:
    target = directory / name
    folder = target.parent
    stem = target.stem
    try:
        mode = target.stat().st_mode & 0o777  # a replaced file keeps its permissions
    except FileNotFoundError:
        mode = 0o644  # mkstemp's 0600 would hide the flow from a server run as another user
    # A dotfile not ending in .yaml: the catalog ignores it until the rename.
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{stem}.", suffix=".tmp")
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
    _fsync_directory(folder)  # so the rename survives a crash
    return target


def _fsync_directory(folder: Path) -> None:
    directory_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


# --- a flows directory as a copy of the catalog ----------------------------------------------


def catalog_file_name(name: str) -> bool:
    """Whether ``name`` names a file of a catalog: ``categories.yaml``, ``<flow_id>.yaml``
    or ``tests/<flow_id>.yaml`` (flow ids as lint allows them).

    >>> [catalog_file_name(n) for n in ("categories.yaml", "a.yaml", "tests/a.yaml", "../a.yaml")]
    [True, True, True, False]
    """
    if name == CATEGORIES_FILE:
        return True
    folder, _, file = name.rpartition("/")
    if folder not in ("", TESTS_DIR) or not file.endswith(FLOW_SUFFIX):
        return False
    stem = file.removesuffix(FLOW_SUFFIX)
    return bool(FLOW_ID_RE.fullmatch(stem)) and reserved_flow_id(stem) is None


def catalog_files(directory: Path) -> dict[str, Path]:
    """The catalog's files in a flows directory, by name (``catalog_file_name``): its
    categories.yaml, its flow files and its tests files."""
    found: dict[str, Path] = {}
    categories = directory / CATEGORIES_FILE
    if categories.is_file():
        found[CATEGORIES_FILE] = categories
    for path in flow_files(directory):
        if catalog_file_name(path.name):
            found[path.name] = path
    for path in flow_files(directory / TESTS_DIR):
        name = f"{TESTS_DIR}/{path.name}"
        if catalog_file_name(name):
            found[name] = path
    return found


def catalog_files_fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """``catalog_fingerprint`` of the directory and of its tests folder: poll it to notice
    any catalog file edited, added or removed."""
    tests = tuple(
        (f"{TESTS_DIR}/{n}", s, m) for n, s, m in catalog_fingerprint(directory / TESTS_DIR)
    )
    return catalog_fingerprint(directory) + tests


def read_catalog_file(path: Path) -> str | None:
    """A catalog file's text; None when it cannot be read as UTF-8 text within the size bound."""
    text, findings = read_text(path, where=path.stem)
    return None if findings else text


def write_catalog_file(directory: Path, name: str, text: str | None) -> None:
    """Write (``text`` None: remove) the catalog file ``name`` in ``directory``, atomically
    as ``write_flow_file`` does; the tests folder is made when needed. Raises OSError, and
    ValueError for a name that is not a catalog file's."""
    if not catalog_file_name(name):
        raise ValueError(f"{name!r} names no file of a catalog")
    target = directory / name
    if text is None:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
            _fsync_directory(target.parent)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(directory, name, text)
