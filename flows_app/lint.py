"""Lint: every check of contract section 6, shared by the CLI, drafts and approval.

Checks run in layers, so one mistake gives one finding instead of a cascade:
structure (``schema``: keys, types, id syntax), then references (ids, targets,
labels, category, patterns), then the graph (``cycle``, ``unreachable``,
``dead_end``; only when no structure or reference error could distort it), then
the warnings that need a built Flow (``unfoldable``). Every message says what is
wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

import yaml

from flows_app.graph import Unfoldable
from flows_app.model import RESERVED_NEXT_KEYS, UNKNOWN, AskNode, Category, CollectNode, Flow

Level = Literal["error", "warning"]
ErrorCode = Literal[
    "schema",
    "id_mismatch",
    "duplicate_id",
    "bad_entry",
    "bad_target",
    "label_without_next",
    "next_without_label",
    "unreachable",
    "cycle",
    "dead_end",
    "unknown_category",
    "bad_pattern",
]
WarningCode = Literal["unfoldable", "empty_say"]
Code = ErrorCode | WarningCode
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)
WARNING_CODES: tuple[WarningCode, ...] = get_args(WarningCode)

FLOW_ID_RE = re.compile(r"[a-z0-9_]{1,64}")
NODE_ID_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
LABEL_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
OUTCOME_RE = LABEL_RE
CATEGORY_ID_RE = NODE_ID_RE

FLOW_REQUIRED = ("id", "title", "category", "entry", "nodes")
FLOW_OPTIONAL = (
    "summary",
    "version",
    "max_unmatched",
    "max_branch_fanout",
    "branch_depth",
    "on_unknown",
    "on_stuck",
)
NODE_KEYS: dict[str, tuple[str, ...]] = {
    "ask": ("id", "kind", "say", "accepts", "next", "on_unknown", "on_stuck"),
    "tell": ("id", "kind", "say", "next"),
    "collect": ("id", "kind", "say", "slots", "next", "on_unknown", "on_stuck"),
    "end": ("id", "kind", "say", "outcome"),
}
SLOT_KEYS = ("ask", "required", "pattern", "hint")
CATEGORY_KEYS = ("title", "description")
ON_UNKNOWN_VALUES = ("broaden", "escalate")

# Errors that would make the graph checks report consequences instead of causes.
_GRAPH_BLOCKERS = frozenset(
    {"schema", "duplicate_id", "bad_entry", "bad_target", "label_without_next"}
)
_KEY_OWNERS = {
    key: [kind for kind, keys in NODE_KEYS.items() if key in keys]
    for key in {k for keys in NODE_KEYS.values() for k in keys}
}
_YAML11_BOOLS = frozenset({"yes", "no", "on", "off", "y", "n"})


class _FindingRequired(TypedDict):
    level: Level
    code: Code
    where: str
    message: str


class Finding(_FindingRequired, total=False):
    """One lint result; ``file`` and ``line`` are present when known."""

    file: str
    line: int


def finding(
    level: Level,
    code: Code,
    where: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
) -> Finding:
    result: Finding = {"level": level, "code": code, "where": where, "message": message}
    if file is not None:
        result["file"] = file
    if line is not None:
        result["line"] = line
    return result


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f["level"] == "error" for f in findings)


def format_finding(f: Finding) -> str:
    """One line: ``level code where: message (file:line)``.

    >>> format_finding(finding("error", "cycle", "pay/n_a", "loops", file="pay.yaml", line=4))
    'error cycle pay/n_a: loops (pay.yaml:4)'
    """
    text = f"{f['level']} {f['code']} {f['where']}: {f['message']}"
    if "file" in f:
        return f"{text} ({f['file']}:{f['line']})" if "line" in f else f"{text} ({f['file']})"
    return f"{text} (line {f['line']})" if "line" in f else text


def lint_text(
    text: str,
    *,
    categories: Mapping[str, Category],
    file: str | None = None,
    expected_id: str | None = None,
) -> list[Finding]:
    """Every finding for one flow's YAML text (the same as build_flow's). Never raises."""
    from flows_app.loader import build_flow  # loader imports this module

    return build_flow(text, categories=categories, file=file, expected_id=expected_id)[1]


def refused_finding(
    message: str, *, where: str, file: str | None = None, line: int | None = None
) -> Finding:
    return finding("error", "schema", where, f"YAML refused: {message}", file=file, line=line)


def yaml_error_finding(exc: yaml.YAMLError, *, where: str, file: str | None = None) -> Finding:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    detail = f"{context}: {problem}" if context else problem
    message = (
        f"the YAML does not parse ({detail}): fix the syntax at that line; "
        "quote text that contains ': ' or starts with a special character"
    )
    line = mark.line + 1 if mark is not None else None
    return finding("error", "schema", where, message, file=file, line=line)


# --- helpers ---------------------------------------------------------------------------------


@dataclass
class _Report:
    flow: str
    file: str | None
    findings: list[Finding] = field(default_factory=list)

    def error(self, code: Code, message: str, *, at: Sequence[str] = (), line: int | None) -> None:
        self._add("error", code, message, at, line)

    def warning(
        self, code: Code, message: str, *, at: Sequence[str] = (), line: int | None
    ) -> None:
        self._add("warning", code, message, at, line)

    def _add(
        self, level: Level, code: Code, message: str, at: Sequence[str], line: int | None
    ) -> None:
        where = "/".join((self.flow, *at))
        self.findings.append(finding(level, code, where, message, file=self.file, line=line))

    def blocked(self) -> bool:
        return any(f["level"] == "error" and f["code"] in _GRAPH_BLOCKERS for f in self.findings)


def _line_of(value: object) -> int | None:
    line = getattr(value, "line", None)
    return line if isinstance(line, int) else None


def _key_line(mapping: object, key: object) -> int | None:
    key_lines = getattr(mapping, "key_lines", None)
    if isinstance(key_lines, dict) and isinstance(key_lines.get(key), int):
        line: int = key_lines[key]
        return line
    return _line_of(mapping)


def _item_line(items: object, index: int) -> int | None:
    item_lines = getattr(items, "item_lines", None)
    if isinstance(item_lines, list) and index < len(item_lines):
        line: int = item_lines[index]
        return line
    return _line_of(items)


def _as_text(value: object) -> str:
    """How a scalar was most likely written in the YAML.

    >>> _as_text(True), _as_text(None), _as_text(3)
    ('true', 'null', '3')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _describe(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {_as_text(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text '{value}'"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _text_fix(value: object) -> str:
    if value is None:
        return "give it a value"
    if isinstance(value, bool | int | float):
        return f"quote it: '{_as_text(value)}'"
    return "write it as one line of text"


def _closest(word: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = _closest(word, candidates)
    return f" (did you mean '{close}'?)" if close else ""


def _key_at(at: Sequence[str], key: object) -> tuple[str, ...]:
    # ``where`` is flow, flow/node or flow/node/key: only node-level keys get their own part.
    return (*at, _as_text(key)) if len(at) == 1 else tuple(at)


def _node_at(node: object, index: int) -> str:
    node_id = node.get("id") if isinstance(node, dict) else None
    return node_id if isinstance(node_id, str) and node_id else f"nodes[{index}]"


def _text(
    report: _Report,
    mapping: Mapping[Any, Any],
    key: str,
    *,
    at: Sequence[str],
    what: str,
    required: bool = False,
) -> str | None:
    """The text at mapping[key]; reports it missing (when required) or not text."""
    if key not in mapping:
        if required:
            report.error("schema", f"{what} has no '{key}': add it", at=at, line=_line_of(mapping))
        return None
    value = mapping[key]
    if isinstance(value, str):
        return value
    report.error(
        "schema",
        f"'{key}' must be text, not {_describe(value)}: {_text_fix(value)}",
        at=_key_at(at, key),
        line=_key_line(mapping, key),
    )
    return None


def _check_keys(
    report: _Report,
    mapping: Mapping[Any, Any],
    known: Sequence[str],
    *,
    at: Sequence[str],
    what: str,
    owners: Mapping[str, list[str]] | None = None,
) -> None:
    for key in mapping:
        line = _key_line(mapping, key)
        if not isinstance(key, str):
            message = (
                f"the key {_as_text(key)} in {what} is read as {_describe(key)}, "
                f"not text: quote it ('{_as_text(key)}')"
            )
        elif key in known:
            continue
        elif owners and key in owners:
            kinds = " and ".join(owners[key])
            message = (
                f"'{key}' is not a key of {what}; only {kinds} nodes have it: "
                "remove it or change the kind"
            )
        else:
            close = _closest(key, known)
            fix = (
                f"did you mean '{close}'?"
                if close
                else f"remove it (known keys: {', '.join(known)})"
            )
            message = f"unknown key '{key}' in {what}: {fix}"
        report.error("schema", message, at=_key_at(at, key), line=line)


def _check_positive_int(
    report: _Report, mapping: Mapping[Any, Any], key: str, at: Sequence[str]
) -> None:
    if key not in mapping:
        return
    value = mapping[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        report.error(
            "schema",
            f"'{key}' must be a whole number of at least 1, not {_describe(value)}: "
            f"write e.g. {key}: 3",
            at=_key_at(at, key),
            line=_key_line(mapping, key),
        )


def _check_on_unknown(report: _Report, mapping: Mapping[Any, Any], at: Sequence[str]) -> None:
    if "on_unknown" in mapping and mapping["on_unknown"] not in ON_UNKNOWN_VALUES:
        report.error(
            "schema",
            f"'on_unknown' must be broaden or escalate, not {_describe(mapping['on_unknown'])}",
            at=_key_at(at, "on_unknown"),
            line=_key_line(mapping, "on_unknown"),
        )


# --- structure -------------------------------------------------------------------------------


def lint_data(
    data: Mapping[Any, Any],
    *,
    categories: Mapping[str, Category],
    file: str | None = None,
    expected_id: str | None = None,
) -> list[Finding]:
    """Structure, reference and graph findings for a parsed flow document.

    ``data`` is what loader.parse_yaml returns (lines are read from it when present).
    Never raises.
    """
    flow_id = data.get("id")
    report = _Report(
        flow_id if isinstance(flow_id, str) and flow_id else (expected_id or "?"), file
    )
    _check_duplicate_keys(report, data)
    _check_flow(report, data, expected_id)
    nodes = _check_nodes(report, data)
    _check_references(report, data, nodes, categories)
    if not report.blocked():
        _check_graph(report, data, nodes)
    return report.findings


def _check_duplicate_keys(report: _Report, data: Mapping[Any, Any]) -> None:
    found: list[tuple[int, tuple[str, ...], object]] = []
    seen: set[int] = set()
    stack: list[tuple[object, tuple[object, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:  # an alias: the same object again
                continue
            seen.add(id(value))
        if isinstance(value, dict):
            for key, line in getattr(value, "duplicates", ()):
                found.append((line, _path_at(data, (*path, key)), key))
            stack.extend((child, (*path, key)) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(value))
    for line, at, key in sorted(found, key=lambda item: item[0]):
        report.error(
            "schema",
            f"key '{_as_text(key)}' appears twice in one mapping and YAML keeps only the last: "
            "remove or rename one of them",
            at=at,
            line=line,
        )


def _path_at(data: Mapping[Any, Any], path: tuple[object, ...]) -> tuple[str, ...]:
    nodes = data.get("nodes")
    if (
        len(path) >= 2
        and path[0] == "nodes"
        and isinstance(nodes, list)
        and isinstance(path[1], int)
    ):
        node_at = _node_at(nodes[path[1]], path[1])
        return (node_at,) if len(path) == 2 else (node_at, _as_text(path[2]))
    return ()


def _check_flow(report: _Report, data: Mapping[Any, Any], expected_id: str | None) -> None:
    _check_keys(report, data, FLOW_REQUIRED + FLOW_OPTIONAL, at=(), what="the flow")
    flow_id = _text(report, data, "id", at=(), what="the flow", required=True)
    if flow_id is not None:
        if not FLOW_ID_RE.fullmatch(flow_id):
            report.error(
                "schema",
                f"flow id '{flow_id}' must be 1-64 lowercase letters, digits or _ "
                "(like payment_failed): rename it and the file",
                line=_key_line(data, "id"),
            )
        if expected_id is not None and flow_id != expected_id:
            report.error(
                "id_mismatch",
                f"id '{flow_id}' differs from the file name '{expected_id}.yaml': "
                f"rename the file to {flow_id}.yaml or set id: {expected_id}",
                line=_key_line(data, "id"),
            )
    title = _text(report, data, "title", at=(), what="the flow", required=True)
    if title is not None and not title.strip():
        report.error(
            "schema",
            "'title' is empty: give the flow a one-line title",
            line=_key_line(data, "title"),
        )
    for key in ("category", "entry"):
        _text(report, data, key, at=(), what="the flow", required=True)
    for key in ("summary", "on_stuck"):
        _text(report, data, key, at=(), what="the flow")
    version = data.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int)):
        report.error(
            "schema",
            f"'version' must be text or a whole number, not {_describe(version)}: "
            f"{_text_fix(version)}",
            line=_key_line(data, "version"),
        )
    for key in ("max_unmatched", "max_branch_fanout", "branch_depth"):
        _check_positive_int(report, data, key, ())
    _check_on_unknown(report, data, ())
    nodes = data.get("nodes")
    if "nodes" not in data:
        report.error(
            "schema", "the flow has no 'nodes': add the list of nodes", line=_line_of(data)
        )
    elif isinstance(nodes, list) and not nodes:
        report.error(
            "schema",
            "'nodes' is empty: add at least the entry node and an end node",
            line=_key_line(data, "nodes"),
        )
    elif not isinstance(nodes, list):
        report.error(
            "schema",
            f"'nodes' must be a list of nodes, not {_describe(nodes)}: "
            "write each node as '- id: ...'",
            line=_key_line(data, "nodes"),
        )


def _check_nodes(report: _Report, data: Mapping[Any, Any]) -> list[tuple[int, Mapping[Any, Any]]]:
    """Check every node's structure; return the nodes that are mappings, with their index."""
    raw = data.get("nodes")
    if not isinstance(raw, list):
        return []
    nodes: list[tuple[int, Mapping[Any, Any]]] = []
    for index, node in enumerate(raw):
        if not isinstance(node, dict):
            report.error(
                "schema",
                f"node #{index + 1} is {_describe(node)}, not a mapping: "
                "write it as '- id: ...' followed by kind and say",
                at=(f"nodes[{index}]",),
                line=_item_line(raw, index),
            )
            continue
        nodes.append((index, node))
        _check_node(report, node, index)
    return nodes


def _check_node(report: _Report, node: Mapping[Any, Any], index: int) -> None:
    at = (_node_at(node, index),)
    node_id = _text(report, node, "id", at=at, what=f"node #{index + 1}", required=True)
    if node_id is not None and not NODE_ID_RE.fullmatch(node_id):
        report.error(
            "schema",
            f"node id '{node_id}' must be 1-64 letters, digits or _ (like n_card_age): rename it",
            at=at,
            line=_key_line(node, "id"),
        )
    kind = node.get("kind")
    if "kind" not in node:
        report.error(
            "schema",
            "the node has no 'kind': add kind: ask, tell, collect or end",
            at=at,
            line=_line_of(node),
        )
        return
    if not isinstance(kind, str) or kind not in NODE_KEYS:
        shown = (
            f"'{kind}'{_did_you_mean(kind, NODE_KEYS)}"
            if isinstance(kind, str)
            else _describe(kind)
        )
        report.error(
            "schema",
            f"unknown kind {shown}: use ask, tell, collect or end",
            at=_key_at(at, "kind"),
            line=_key_line(node, "kind"),
        )
        return
    what = f"an {kind} node" if kind in ("ask", "end") else f"a {kind} node"
    _check_keys(report, node, NODE_KEYS[kind], at=at, what=what, owners=_KEY_OWNERS)
    say = _text(report, node, "say", at=at, what=f"this {kind} node", required=True)
    if say is not None and not say.strip():
        report.warning(
            "empty_say",
            "'say' is empty: write what this node must convey (the agent chooses the words)",
            at=at,
            line=_key_line(node, "say"),
        )
    if kind in ("ask", "collect"):
        _check_on_unknown(report, node, at)
        _text(report, node, "on_stuck", at=at, what=what)
    if kind == "ask":
        _check_ask(report, node, at)
    elif kind == "collect":
        _check_collect(report, node, at)
        _check_single_next(report, node, at, kind)
    elif kind == "tell":
        _check_single_next(report, node, at, kind)
    else:
        outcome = _text(report, node, "outcome", at=at, what="this end node", required=True)
        if outcome is not None and not OUTCOME_RE.fullmatch(outcome):
            report.error(
                "schema",
                f"outcome '{outcome}' must be a short machine word (letters, digits, _ . -), "
                "like resolved or escalated",
                at=_key_at(at, "outcome"),
                line=_key_line(node, "outcome"),
            )


def _check_label(report: _Report, label: object, at: Sequence[str], line: int | None) -> None:
    label_at = (at[0], _as_text(label))
    if not isinstance(label, str):
        message = (
            f"label {_as_text(label)} is read as {_describe(label)}, not text: "
            f"quote it ('{_as_text(label)}')"
        )
    elif label.startswith("__"):
        message = (
            f"label '{label}' starts with __, which is reserved: rename it "
            "(__other__ and __unknown__ go in next only)"
        )
    elif not LABEL_RE.fullmatch(label):
        message = (
            f"label '{label}' must be 1-64 letters, digits, _ . or -: use a short code "
            "and put the prose in the condition"
        )
    else:
        return
    report.error("schema", message, at=label_at, line=line)


def _check_ask(report: _Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    accepts = node.get("accepts")
    if "accepts" not in node:
        report.error(
            "schema",
            "an ask node needs 'accepts': label → when it applies",
            at=at,
            line=_line_of(node),
        )
    elif not isinstance(accepts, dict) or not accepts:
        report.error(
            "schema",
            "'accepts' is empty: add at least one label: condition"
            if isinstance(accepts, dict)
            else f"'accepts' must be a mapping label → condition, not {_describe(accepts)}",
            at=_key_at(at, "accepts"),
            line=_key_line(node, "accepts"),
        )
    else:
        for label, condition in accepts.items():
            _check_label(report, label, at, _key_line(accepts, label))
            if isinstance(label, str) and not isinstance(condition, str):
                report.error(
                    "schema",
                    f"the condition of label '{label}' must be text telling when it applies, "
                    f"not {_describe(condition)}: {_text_fix(condition)}",
                    at=(at[0], label),
                    line=_key_line(accepts, label),
                )
    targets = node.get("next")
    if "next" not in node:
        report.error(
            "schema", "an ask node needs 'next': label → node id", at=at, line=_line_of(node)
        )
        return
    if not isinstance(targets, dict):
        report.error(
            "schema",
            f"'next' of an ask node must be a mapping label → node id, not {_describe(targets)}",
            at=_key_at(at, "next"),
            line=_key_line(node, "next"),
        )
        return
    for label, target in targets.items():
        line = _key_line(targets, label)
        if not isinstance(label, str):
            _check_label(report, label, at, line)
        elif not isinstance(target, str):
            report.error(
                "schema",
                f"next '{label}' must be a node id, not {_describe(target)}: "
                f"write {label}: <node id>",
                at=(at[0], label),
                line=line,
            )


def _check_single_next(
    report: _Report, node: Mapping[Any, Any], at: Sequence[str], kind: str
) -> None:
    if "next" not in node:
        report.error(
            "schema",
            f"a {kind} node needs 'next': the id of the node that follows",
            at=at,
            line=_line_of(node),
        )
        return
    target = node["next"]
    if not isinstance(target, str):
        fix = " (only ask nodes branch)" if isinstance(target, dict) else ""
        report.error(
            "schema",
            f"'next' of a {kind} node must be one node id, not {_describe(target)}{fix}: "
            "write next: <node id>",
            at=_key_at(at, "next"),
            line=_key_line(node, "next"),
        )


def _check_collect(report: _Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    slots = node.get("slots")
    if "slots" not in node:
        report.error(
            "schema",
            "a collect node needs 'slots': slot name → what to ask",
            at=at,
            line=_line_of(node),
        )
        return
    if not isinstance(slots, dict) or not slots:
        report.error(
            "schema",
            "'slots' is empty: add at least one slot: what to ask"
            if isinstance(slots, dict)
            else f"'slots' must be a mapping slot name → what to ask, not {_describe(slots)}",
            at=_key_at(at, "slots"),
            line=_key_line(node, "slots"),
        )
        return
    for name, spec in slots.items():
        _check_slot(report, name, spec, at=(at[0], _as_text(name)), line=_key_line(slots, name))


def _check_slot(
    report: _Report, name: object, spec: object, *, at: Sequence[str], line: int | None
) -> None:
    if not isinstance(name, str):
        report.error(
            "schema",
            f"slot name {_as_text(name)} is read as {_describe(name)}, not text: rename it",
            at=at,
            line=line,
        )
        return
    if not NODE_ID_RE.fullmatch(name):
        report.error(
            "schema",
            f"slot name '{name}' must be 1-64 letters, digits or _: rename it",
            at=at,
            line=line,
        )
    if isinstance(spec, str):
        if not spec.strip():
            report.error(
                "schema", f"slot '{name}' asks nothing: write what to ask", at=at, line=line
            )
        return
    if not isinstance(spec, dict):
        report.error(
            "schema",
            f"slot '{name}' must be what to ask (text) or a mapping "
            f"{{ask, required, pattern, hint}}, not {_describe(spec)}",
            at=at,
            line=line,
        )
        return
    _check_keys(report, spec, SLOT_KEYS, at=at, what=f"slot '{name}'")
    _text(report, spec, "ask", at=at, what=f"slot '{name}'", required=True)
    for key in ("pattern", "hint"):
        _text(report, spec, key, at=at, what=f"slot '{name}'")
    required = spec.get("required", False)
    if not isinstance(required, bool):
        note = (
            " (yes/no/on/off are text here, as in YAML 1.2)"
            if isinstance(required, str) and required.lower() in _YAML11_BOOLS
            else ""
        )
        report.error(
            "schema",
            f"'required' of slot '{name}' must be true or false, not {_describe(required)}{note}",
            at=at,
            line=_key_line(spec, "required"),
        )


# --- references ------------------------------------------------------------------------------


def _check_references(
    report: _Report,
    data: Mapping[Any, Any],
    nodes: Sequence[tuple[int, Mapping[Any, Any]]],
    categories: Mapping[str, Category],
) -> None:
    ids = _check_node_ids(report, nodes)
    _check_slot_names(report, nodes, ids)
    entry = data.get("entry")
    if isinstance(entry, str) and entry not in ids:
        report.error(
            "bad_entry",
            f"entry '{entry}' names no node{_did_you_mean(entry, ids)}: "
            "set entry to the id of the first node",
            line=_key_line(data, "entry"),
        )
    category = data.get("category")
    if isinstance(category, str) and category not in categories:
        known = ", ".join(categories) or "none defined"
        report.error(
            "unknown_category",
            f"category '{category}' is not in categories.yaml"
            f"{_did_you_mean(category, categories)}: use one of {known}, "
            "or add it to categories.yaml",
            line=_key_line(data, "category"),
        )
    for index, node in nodes:
        at = (_node_at(node, index),)
        kind = node.get("kind")
        if kind == "ask":
            _check_ask_references(report, node, at, ids)
        elif kind in ("tell", "collect"):
            target = node.get("next")
            if isinstance(target, str) and target not in ids:
                report.error(
                    "bad_target",
                    f"next '{target}' names no node{_did_you_mean(target, ids)}: "
                    "point it at an existing node id",
                    at=(*at, "next"),
                    line=_key_line(node, "next"),
                )
        if kind == "collect":
            _check_patterns(report, node, at)


def _check_node_ids(
    report: _Report, nodes: Sequence[tuple[int, Mapping[Any, Any]]]
) -> dict[str, int]:
    ids: dict[str, int] = {}
    for index, node in nodes:
        node_id = node.get("id")
        if not isinstance(node_id, str):
            continue
        if node_id in ids:
            report.error(
                "duplicate_id",
                f"node id '{node_id}' is already used by node #{ids[node_id] + 1}: "
                "give each node its own id",
                at=(node_id,),
                line=_key_line(node, "id"),
            )
        else:
            ids[node_id] = index
    return ids


def _check_slot_names(
    report: _Report, nodes: Sequence[tuple[int, Mapping[Any, Any]]], ids: Mapping[str, int]
) -> None:
    owners: dict[str, str] = {}
    for index, node in nodes:
        slots = node.get("slots")
        if node.get("kind") != "collect" or not isinstance(slots, dict):
            continue
        node_at = _node_at(node, index)
        for name in slots:
            if not isinstance(name, str):
                continue
            line = _key_line(slots, name)
            if name in ids:
                message = (
                    f"slot '{name}' has the same name as a node; values are addressed by name: "
                    "rename the slot"
                )
            elif name in owners:
                message = (
                    f"slot '{name}' is also a slot of {owners[name]}; "
                    "slot names are unique in a flow: rename one of them"
                )
            else:
                owners[name] = node_at
                continue
            report.error("duplicate_id", message, at=(node_at, name), line=line)


def _check_ask_references(
    report: _Report, node: Mapping[Any, Any], at: Sequence[str], ids: Mapping[str, int]
) -> None:
    accepts = node.get("accepts")
    targets = node.get("next")
    if not isinstance(targets, dict):
        return
    labels = (
        [label for label in accepts if isinstance(label, str)]
        if isinstance(accepts, dict)
        else None
    )
    if labels is not None:
        for label in labels:
            if label not in targets:
                report.error(
                    "label_without_next",
                    f"label '{label}' has no next: add {label}: <node id> under next",
                    at=(at[0], label),
                    line=_key_line(accepts, label),
                )
    for key, target in targets.items():
        if not isinstance(key, str):
            continue
        line = _key_line(targets, key)
        if labels is not None and key not in labels and key not in RESERVED_NEXT_KEYS:
            report.error(
                "next_without_label",
                f"next '{key}' is neither a label of accepts nor __other__/__unknown__"
                f"{_did_you_mean(key, [*labels, *RESERVED_NEXT_KEYS])}: "
                "add it to accepts or fix the spelling",
                at=(at[0], key),
                line=line,
            )
        if isinstance(target, str) and target not in ids:
            report.error(
                "bad_target",
                f"next '{key}' goes to '{target}', which names no node"
                f"{_did_you_mean(target, ids)}: point it at an existing node id",
                at=(at[0], key),
                line=line,
            )


def _check_patterns(report: _Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    slots = node.get("slots")
    if not isinstance(slots, dict):
        return
    for name, spec in slots.items():
        pattern = spec.get("pattern") if isinstance(spec, dict) else None
        if not isinstance(pattern, str):
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            report.error(
                "bad_pattern",
                f"pattern {pattern!r} of slot '{name}' is not a valid regular expression ({exc}): "
                "fix it (it must match the whole value)",
                at=(at[0], _as_text(name)),
                line=_key_line(spec, "pattern"),
            )


# --- graph -----------------------------------------------------------------------------------


def _successors(node: Mapping[Any, Any]) -> list[str]:
    targets = node.get("next")
    if node.get("kind") == "ask" and isinstance(targets, dict):
        return list(dict.fromkeys(t for t in targets.values() if isinstance(t, str)))
    if node.get("kind") in ("tell", "collect") and isinstance(targets, str):
        return [targets]
    return []


def _check_graph(
    report: _Report, data: Mapping[Any, Any], nodes: Sequence[tuple[int, Mapping[Any, Any]]]
) -> None:
    # No blockers: every node is a mapping with a unique str id and every target exists.
    order = [node["id"] for _, node in nodes]
    lines = {node["id"]: _line_of(node) for _, node in nodes}
    succ = {node["id"]: _successors(node) for _, node in nodes}
    in_cycle: set[str] = set()
    for component in strongly_connected(succ, order):
        first = component[0]
        if len(component) == 1 and first not in succ[first]:
            continue
        in_cycle.update(component)
        path = _cycle_path(succ, set(component), first)
        others = [n for n in component if n not in path]
        extra = f" ({', '.join(others)} loop with them)" if others else ""
        report.error(
            "cycle",
            f"{' → '.join(path)} returns to {first}{extra}, and a run never enters a node twice: "
            "point one of these next at a later node or an end",
            at=(first,),
            line=lines[first],
        )
    entry = data["entry"]
    reached = _reachable(succ, [entry])
    for node_id in order:
        if node_id not in reached:
            report.error(
                "unreachable",
                f"{node_id} cannot be reached from entry {entry}: point a next at it, or delete it",
                at=(node_id,),
                line=lines[node_id],
            )
    preds: dict[str, list[str]] = {node_id: [] for node_id in order}
    for node_id, children in succ.items():
        for child in children:
            preds[child].append(node_id)
    ends = [node["id"] for _, node in nodes if node.get("kind") == "end"]
    finishing = _reachable(preds, ends)
    for node_id in order:
        if node_id not in finishing and node_id not in in_cycle:
            report.error(
                "dead_end",
                f"no end can be reached from {node_id}: every path from it runs into a loop; "
                "route it to an end node",
                at=(node_id,),
                line=lines[node_id],
            )


def _reachable(succ: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    seen = set(starts)
    stack = list(seen)
    while stack:
        for child in succ.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def strongly_connected(succ: Mapping[str, Sequence[str]], order: Sequence[str]) -> list[list[str]]:
    """Strongly connected components (iterative Tarjan), each sorted in ``order``.

    >>> strongly_connected({"a": ["b"], "b": ["a", "c"], "c": []}, ["a", "b", "c"])
    [['c'], ['a', 'b']]
    """
    position = {node: i for i, node in enumerate(order)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def open_node(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in order:
        if root in index:
            continue
        open_node(root)
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work[-1]
            children = succ.get(node, ())
            if i < len(children):
                work[-1] = (node, i + 1)
                child = children[i]
                if child not in index:
                    open_node(child)
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component, key=position.__getitem__))
    return components


def _cycle_path(succ: Mapping[str, Sequence[str]], component: set[str], start: str) -> list[str]:
    """The shortest path start → ... → start inside one cyclic component."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in succ[node]:
            if child == start:
                path = [node]
                while (previous := parent[path[-1]]) is not None:
                    path.append(previous)
                return [*reversed(path), start]
            if child in component and child not in parent:
                parent[child] = node
                queue.append(child)
    return [start, start]


# --- warnings on a built flow ----------------------------------------------------------------


def lint_flow(
    flow: Flow, *, file: str | None = None, lines: Mapping[str, int] | None = None
) -> list[Finding]:
    """``unfoldable`` warnings for a lint-clean Flow, using the engine's own fold planner.

    ``lines`` maps node ids to their line. Never raises.
    """
    report = _Report(flow.id, file)
    lines = lines or {}
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            if UNKNOWN in node.next or flow.on_unknown_at(node) != "broaden":
                continue
            try:
                flow.graph.plan_fold(node.id)
            except Unfoldable as exc:
                report.warning(
                    "unfoldable",
                    _unfoldable_message(flow, node, exc),
                    at=(node.id,),
                    line=lines.get(node.id),
                )
        elif (
            isinstance(node, CollectNode)
            and node.required_slots
            and flow.on_unknown_at(node) == "broaden"
        ):
            report.warning(
                "unfoldable",
                f"under on_unknown: broaden, an unknown required slot at {node.id} stalls the run, "
                "because a collect is never folded: set on_unknown: escalate on it "
                "(or make its slots optional)",
                at=(node.id,),
                line=lines.get(node.id),
            )
    return report.findings


def _unfoldable_message(flow: Flow, node: AskNode, exc: Unfoldable) -> str:
    if exc.reason == "fanout":
        folded = flow.nodes[exc.at]
        count = len(folded.accepts) if isinstance(folded, AskNode) else 0
        why = f"{exc.at} has {count} labels, more than max_branch_fanout ({flow.max_branch_fanout})"
    elif exc.reason == "depth":
        why = f"a branch needs more than branch_depth ({flow.branch_depth}) steps (at {exc.at})"
    else:
        why = f"a branch reaches collect node {exc.at}, which is never folded"
    return (
        f"under on_unknown: broaden, an unknown answer at {node.id} stalls the run: {why}. "
        "Add a __unknown__ route to next, or set on_unknown: escalate"
    )


# --- categories ------------------------------------------------------------------------------


def lint_category(
    cat_id: object, spec: object, *, file: str | None = None, line: int | None = None
) -> list[Finding]:
    """Findings for one entry of categories.yaml (``id: {title, description}``). Never raises."""
    report = _Report("categories", file)
    at = (_as_text(cat_id),)
    if not isinstance(cat_id, str):
        report.error(
            "schema",
            f"category id {_as_text(cat_id)} is read as {_describe(cat_id)}, not text: quote it",
            at=at,
            line=line,
        )
        return report.findings
    if not CATEGORY_ID_RE.fullmatch(cat_id):
        report.error(
            "schema",
            f"category id '{cat_id}' must be 1-64 letters, digits or _: rename it",
            at=at,
            line=line,
        )
    if not isinstance(spec, dict):
        report.error(
            "schema",
            f"category '{cat_id}' must be a mapping with title and description, "
            f"not {_describe(spec)}",
            at=at,
            line=line,
        )
        return report.findings
    _check_keys(report, spec, CATEGORY_KEYS, at=at, what=f"category '{cat_id}'")
    _text(report, spec, "title", at=at, what=f"category '{cat_id}'", required=True)
    _text(report, spec, "description", at=at, what=f"category '{cat_id}'")
    return report.findings
