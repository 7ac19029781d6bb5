"""What every lint layer shares: the report, line lookups, names and key checks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowcore.common.names import closest
from flowcore.flow.findings import Code, Finding, Level, finding
from flowcore.flow.labels import LABEL_RE
from flowcore.flow.yaml_safe import key_line_of, line_of

NODE_ID_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
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
    "ask": (
        *("id", "kind", "say", "accepts", "next", "on_unknown", "on_stuck", "personal"),
        "type",
    ),
    "tell": ("id", "kind", "say", "next"),
    "collect": ("id", "kind", "say", "slots", "next", "on_unknown", "on_stuck"),
    "check": ("id", "kind", "say", "when", "else"),
    "lookup": (
        *("id", "kind", "say", "call", "send", "returns", "sets", "next", "on_stuck"),
        "personal",
    ),
    "end": ("id", "kind", "say", "outcome"),
}
WHEN_KEYS = ("if", "next")
SLOT_KEYS = ("ask", "required", "pattern", "hint", "personal", "type", "options")
CATEGORY_KEYS = ("title", "description")
ON_UNKNOWN_VALUES = ("broaden", "escalate")

KEY_OWNERS = {
    key: [kind for kind, keys in NODE_KEYS.items() if key in keys]
    for key in {k for keys in NODE_KEYS.values() for k in keys}
}
YAML11_BOOLS = frozenset({"yes", "no", "on", "off", "y", "n"})


@dataclass
class Report:
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


def key_line(mapping: object, key: object) -> int | None:
    """The line of ``key``, else of the mapping that should hold it."""
    return key_line_of(mapping, key) or line_of(mapping)


def item_line(items: object, index: int) -> int | None:
    item_lines = getattr(items, "item_lines", None)
    if isinstance(item_lines, list) and index < len(item_lines):
        line: int = item_lines[index]
        return line
    return line_of(items)


def as_text(value: object) -> str:
    """How a scalar was most likely written in the YAML.

    >>> as_text(True), as_text(None), as_text(3)
    ('true', 'null', '3')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def describe(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {as_text(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text '{value}'"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def text_fix(value: object) -> str:
    if value is None:
        return "give it a value"
    if isinstance(value, bool | int | float):
        return f"quote it: '{as_text(value)}'"
    return "write it as one line of text"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = closest(word, candidates, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def key_at(at: Sequence[str], key: object) -> tuple[str, ...]:
    # ``where`` is flow, flow/node or flow/node/key: only node-level keys get their own part.
    return (*at, as_text(key)) if len(at) == 1 else tuple(at)


def node_at(node: object, index: int) -> str:
    node_id = node.get("id") if isinstance(node, dict) else None
    return node_id if isinstance(node_id, str) and node_id else f"nodes[{index}]"


def text_value(
    report: Report,
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
            report.error("schema", f"{what} has no '{key}': add it", at=at, line=line_of(mapping))
        return None
    value = mapping[key]
    if isinstance(value, str):
        return value
    report.error(
        "schema",
        f"'{key}' must be text, not {describe(value)}: {text_fix(value)}",
        at=key_at(at, key),
        line=key_line(mapping, key),
    )
    return None


def check_keys(
    report: Report,
    mapping: Mapping[Any, Any],
    known: Sequence[str],
    *,
    at: Sequence[str],
    what: str,
    owners: Mapping[str, list[str]] | None = None,
) -> None:
    for key in mapping:
        if not isinstance(key, str):
            message = (
                f"the key {as_text(key)} in {what} is read as {describe(key)}, "
                f"not text: quote it ('{as_text(key)}')"
            )
        elif key in known:
            continue
        elif owners and key in owners:
            *others, last = owners[key]
            kinds = f"{', '.join(others)} and {last}" if others else last
            message = (
                f"'{key}' is not a key of {what}; only {kinds} nodes have it: "
                "remove it or change the kind"
            )
        else:
            close = closest(key, known, n=1)
            fix = (
                f"did you mean '{close[0]}'?"
                if close
                else f"remove it (known keys: {', '.join(known)})"
            )
            message = f"unknown key '{key}' in {what}: {fix}"
        report.error("schema", message, at=key_at(at, key), line=key_line(mapping, key))


def check_positive_int(
    report: Report, mapping: Mapping[Any, Any], key: str, at: Sequence[str]
) -> None:
    if key not in mapping:
        return
    value = mapping[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        report.error(
            "schema",
            f"'{key}' must be a whole number of at least 1, not {describe(value)}: "
            f"write e.g. {key}: 3",
            at=key_at(at, key),
            line=key_line(mapping, key),
        )


def check_on_unknown(report: Report, mapping: Mapping[Any, Any], at: Sequence[str]) -> None:
    if "on_unknown" in mapping and mapping["on_unknown"] not in ON_UNKNOWN_VALUES:
        report.error(
            "schema",
            f"'on_unknown' must be broaden or escalate, not {describe(mapping['on_unknown'])}",
            at=key_at(at, "on_unknown"),
            line=key_line(mapping, "on_unknown"),
        )
