"""Reading flows: safe YAML, Flow construction and the flows directory.

YAML comes from people and from agents (drafts), so parsing is defensive: the
text size, the nesting depth, the alias expansion and the tags are bounded or
refused before anything is built. Scalars follow the YAML 1.2 core schema:
only ``true``/``false`` are booleans (``yes``/``no``/``on``/``off`` stay text,
which matters for a decision tree whose labels are answers), and there are no
timestamps or merge keys. Every mapping remembers the 1-based line of itself
and of each key, so findings can point at the line to fix.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flows_app import lint
from flows_app.lint import Finding
from flows_app.model import (
    DEFAULT_BRANCH_DEPTH,
    DEFAULT_MAX_BRANCH_FANOUT,
    DEFAULT_MAX_UNMATCHED,
    DEFAULT_ON_UNKNOWN,
    AskNode,
    Category,
    CollectNode,
    EndNode,
    Flow,
    Slot,
    TellNode,
    frozen_mapping,
)
from flows_app.model import Node as FlowNode

MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
# Expanded node count (aliases counted every time they are used): a real flow
# stays far below it, a "billion laughs" document exceeds it after a few levels.
MAX_YAML_NODES = 20_000
CATEGORIES_FILE = "categories.yaml"
FLOW_SUFFIX = ".yaml"

NOT_A_MAPPING = (
    "a flow is a mapping of keys (id, title, nodes, ...), not a list or a single value: "
    "start the document with id: ..."
)

_TAG_PREFIX = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(
    _TAG_PREFIX + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_ID_LINE_RE = re.compile(r"^id:[ \t]*['\"]?([a-z0-9_]{1,64})['\"]?[ \t]*(?:#.*)?$", re.MULTILINE)


class YamlRefused(Exception):
    """YAML that is unsafe or pointless to load: too big, too deep, a bomb, a foreign tag."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"{message} (line {line})")
        self.message = message
        self.line = line


class YamlMap(dict[Any, Any]):
    """A YAML mapping that remembers its line, each key's line and any repeated key."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}
        self.duplicates: list[tuple[Any, int]] = []


class YamlList(list[Any]):
    """A YAML sequence that remembers its line and each item's line."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


@dataclass(frozen=True)
class LoadedDoc:
    """A parsed flow document; line numbers live on its YamlMap/YamlList values."""

    data: YamlMap


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class _Loader(yaml.SafeLoader):
    """Pure-Python SafeLoader with YAML 1.2 core scalars, a depth limit and line-aware mappings."""

    # A fresh table, so none of SafeLoader's YAML 1.1 resolvers (yes/no, 0o, dates, <<) apply.
    yaml_implicit_resolvers: dict[Any, Any] = {}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner looks ahead over every open "[" or "{" on a line, which is quadratic;
        # stop at the depth limit before that lookahead gets expensive.
        if self.flow_level >= MAX_YAML_DEPTH:
            line = self.get_mark().line + 1
            raise YamlRefused(
                f"nesting is deeper than {MAX_YAML_DEPTH} levels: flatten the document", line
            )
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # Counted here, while composing, so deep nesting is refused long before recursion limits.
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                raise YamlRefused(
                    f"nesting is deeper than {MAX_YAML_DEPTH} levels: flatten the document", line
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None and node.tag not in _ALLOWED_TAGS:
            shown = node.tag.replace(_TAG_PREFIX, "!!")
            raise YamlRefused(
                f"the tag {shown} is not allowed: a flow holds only text, numbers, "
                "true/false, lists and mappings: remove the tag",
                _line(node),
            )
        return node

    def construct_line_map(self, node: MappingNode) -> YamlMap:
        result = YamlMap(_line(node))
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                raise ConstructorError(
                    None,
                    None,
                    "a key is a list or a mapping: keys must be plain text",
                    key_node.start_mark,
                )
            if key in result:
                result.duplicates.append((key, _line(key_node)))
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = _line(key_node)
        return result

    def construct_line_list(self, node: SequenceNode) -> YamlList:
        result = YamlList(_line(node))
        for item in node.value:
            result.append(self.construct_object(item, deep=True))
            result.item_lines.append(_line(item))
        return result

    def construct_strict_bool(self, node: ScalarNode) -> bool:
        return _checked_scalar(self, node, _BOOL_RE, "true or false").lower() == "true"

    def construct_strict_int(self, node: ScalarNode) -> int:
        return int(_checked_scalar(self, node, _INT_RE, "a whole number"))

    def construct_strict_float(self, node: ScalarNode) -> float:
        text = _checked_scalar(self, node, _FLOAT_RE, "a number").lower()
        return float(text.replace(".inf", "inf").replace(".nan", "nan"))


def _checked_scalar(loader: _Loader, node: ScalarNode, pattern: re.Pattern[str], what: str) -> str:
    # Only an explicit tag (``!!int abc``) can reach a constructor with a value its resolver
    # would not have matched; refuse it as a parse error instead of crashing in int().
    value = loader.construct_scalar(node)
    if not pattern.match(value):
        raise ConstructorError(None, None, f"{value!r} is not {what}", node.start_mark)
    return value


_Loader.add_implicit_resolver(_TAG_PREFIX + "bool", _BOOL_RE, list("tTfF"))
_Loader.add_implicit_resolver(_TAG_PREFIX + "int", _INT_RE, list("-+0123456789"))
_Loader.add_implicit_resolver(_TAG_PREFIX + "float", _FLOAT_RE, list("-+0123456789."))
_Loader.add_implicit_resolver(_TAG_PREFIX + "null", _NULL_RE, ["~", "n", "N", ""])
_Loader.add_constructor(_TAG_PREFIX + "map", _Loader.construct_line_map)
_Loader.add_constructor(_TAG_PREFIX + "seq", _Loader.construct_line_list)
_Loader.add_constructor(_TAG_PREFIX + "bool", _Loader.construct_strict_bool)
_Loader.add_constructor(_TAG_PREFIX + "int", _Loader.construct_strict_int)
_Loader.add_constructor(_TAG_PREFIX + "float", _Loader.construct_strict_float)


def _children(node: Node) -> Iterable[Node]:
    if isinstance(node, SequenceNode):
        items: list[Node] = node.value
        return items
    if isinstance(node, MappingNode):
        return (child for pair in node.value for child in pair)
    return ()


def _check_expansion(root: Node) -> None:
    """Refuse a composed document whose aliases expand too far, too deep, or forever.

    Sizes are memoised per composed node, so the work is linear in the text even
    when the expanded document would have billions of nodes.
    """
    known: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded node count, height)
    active: set[int] = set()

    def visit(node: Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in active:
            raise YamlRefused(
                "an alias refers to a node that contains it: remove the alias", _line(node)
            )
        if key not in known:
            if depth > MAX_YAML_DEPTH:
                raise YamlRefused(
                    f"aliases nest the document deeper than {MAX_YAML_DEPTH} levels: write it out",
                    _line(node),
                )
            active.add(key)
            count, height = 1, 1
            for child in _children(node):
                child_count, child_height = visit(child, depth + 1)
                count += child_count
                height = max(height, child_height + 1)
                if count > MAX_YAML_NODES:
                    raise YamlRefused(
                        f"aliases expand the document beyond {MAX_YAML_NODES} values: write it out",
                        _line(node),
                    )
            active.discard(key)
            known[key] = (count, height)
        count, height = known[key]
        if depth + height - 1 > MAX_YAML_DEPTH:
            raise YamlRefused(
                f"aliases nest the document deeper than {MAX_YAML_DEPTH} levels: write it out",
                _line(node),
            )
        return count, height

    visit(root, 1)


def _check_size(text: str) -> None:
    # A str never has more characters than UTF-8 bytes: skip encoding huge texts.
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise YamlRefused(
            f"the text is larger than {MAX_YAML_BYTES // 1024} KiB: "
            "split the procedure into smaller flows"
        )


def parse_yaml(text: str) -> LoadedDoc:
    """Parse one flow document safely.

    Raises YamlRefused (too large, too deep, alias bomb, a non-standard tag such as
    ``!!python/...``, or not a mapping) and yaml.YAMLError (does not parse). Nothing
    is constructed before the size, depth, tag and expansion checks have passed.
    """
    _check_size(text)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if not isinstance(root, MappingNode):
            raise YamlRefused(NOT_A_MAPPING, None if root is None else _line(root))
        _check_expansion(root)
        data = loader.construct_document(root)
    finally:
        loader.dispose()
    assert isinstance(data, YamlMap)
    return LoadedDoc(data=data)


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 text: what runs are pinned to."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- building flows ------------------------------------------------------------------------


def build_flow(
    text: str,
    *,
    categories: Mapping[str, Category],
    file: str | None = None,
    expected_id: str | None = None,
) -> tuple[Flow | None, list[Finding]]:
    """Parse and lint one flow; return the Flow only when no finding is an error.

    Never raises for bad input: refused YAML (see parse_yaml) and YAML that does not
    parse become a ``schema`` finding. Callers that must refuse unsafe YAML outright
    (drafts) call parse_yaml first.
    """
    fallback = expected_id or _guess_id(text) or "?"
    try:
        doc = parse_yaml(text)
    except YamlRefused as exc:
        return None, [lint.refused_finding(exc.message, where=fallback, file=file, line=exc.line)]
    except yaml.YAMLError as exc:
        return None, [lint.yaml_error_finding(exc, where=fallback, file=file)]
    findings = lint.lint_data(doc.data, categories=categories, file=file, expected_id=expected_id)
    if lint.has_errors(findings):
        return None, findings
    flow = _flow_from_data(doc.data, text)
    findings += lint.lint_flow(flow, file=file, lines=_node_lines(doc.data))
    return flow, findings


def _guess_id(text: str) -> str | None:
    r"""The flow id as written on a top-level ``id:`` line, for findings on unparsable text.

    >>> _guess_id("title: x\nid: refund\n")
    'refund'
    """
    match = _ID_LINE_RE.search(text)
    return match.group(1) if match else None


def _node_lines(data: YamlMap) -> dict[str, int]:
    return {node["id"]: node.line for node in data["nodes"]}


def _flow_from_data(data: Mapping[str, Any], text: str) -> Flow:
    # Only called on lint-clean data, so every key has the type lint checked.
    nodes = {node["id"]: _node_from_data(node) for node in data["nodes"]}
    return Flow(
        id=data["id"],
        title=data["title"],
        category=data["category"],
        entry=data["entry"],
        nodes=frozen_mapping(nodes),
        summary=data.get("summary"),
        version=data.get("version"),
        max_unmatched=data.get("max_unmatched", DEFAULT_MAX_UNMATCHED),
        max_branch_fanout=data.get("max_branch_fanout", DEFAULT_MAX_BRANCH_FANOUT),
        branch_depth=data.get("branch_depth", DEFAULT_BRANCH_DEPTH),
        on_unknown=data.get("on_unknown", DEFAULT_ON_UNKNOWN),
        on_stuck=data.get("on_stuck"),
        source=text,
        content_hash=content_hash(text),
    )


def _node_from_data(data: Mapping[str, Any]) -> FlowNode:
    kind = data["kind"]
    if kind == "ask":
        return AskNode(
            id=data["id"],
            say=data["say"],
            accepts=frozen_mapping(data["accepts"]),
            next=frozen_mapping(data["next"]),
            on_unknown=data.get("on_unknown"),
            on_stuck=data.get("on_stuck"),
        )
    if kind == "tell":
        return TellNode(id=data["id"], say=data["say"], next=data["next"])
    if kind == "collect":
        return CollectNode(
            id=data["id"],
            say=data["say"],
            slots=tuple(_slot_from_data(name, spec) for name, spec in data["slots"].items()),
            next=data["next"],
            on_unknown=data.get("on_unknown"),
            on_stuck=data.get("on_stuck"),
        )
    return EndNode(id=data["id"], say=data["say"], outcome=data["outcome"])


def _slot_from_data(name: str, spec: str | Mapping[str, Any]) -> Slot:
    if isinstance(spec, str):
        return Slot(name=name, ask=spec)
    return Slot(
        name=name,
        ask=spec["ask"],
        required=spec.get("required", False),
        pattern=spec.get("pattern"),
        hint=spec.get("hint"),
    )


# --- files and directories -----------------------------------------------------------------


def _read_text(path: Path, *, where: str) -> tuple[str | None, list[Finding]]:
    file = str(path)
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            message = (
                f"the file is larger than {MAX_YAML_BYTES // 1024} KiB: "
                "split the procedure into smaller flows"
            )
            return None, [lint.refused_finding(message, where=where, file=file)]
        return path.read_text(encoding="utf-8"), []
    except UnicodeDecodeError as exc:
        message = f"the file is not UTF-8 (byte {exc.start}): save it as UTF-8"
        return None, [lint.finding("error", "schema", where, message, file=file)]
    except OSError as exc:
        message = f"the file cannot be read ({exc.strerror}): check that it exists and is readable"
        return None, [lint.finding("error", "schema", where, message, file=file)]


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
        return {}, [
            lint.refused_finding(message, where="categories", file=str(path), line=exc.line)
        ]
    except yaml.YAMLError as exc:
        return {}, [lint.yaml_error_finding(exc, where="categories", file=str(path))]
    categories: dict[str, Category] = {}
    for cat_id, spec in data.items():
        found = lint.lint_category(cat_id, spec, file=str(path), line=data.key_lines.get(cat_id))
        findings += found
        if not lint.has_errors(found):
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
