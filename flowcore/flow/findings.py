"""Lint findings: the one shape every check reports in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, TypedDict, cast, get_args

import yaml

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
    "bad_type",
    "bad_condition",
    "unset_value",
    "unchanged_version",
]
WarningCode = Literal[
    "unfoldable", "empty_say", "pattern_without_hint", "similar_labels", "shadowed_condition"
]
Code = ErrorCode | WarningCode
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)
# Codes only a draft gets, judged against the live flow of its id (lint/live.py).
AGAINST_LIVE_CODES: tuple[ErrorCode, ...] = ("unchanged_version",)
WARNING_CODES: tuple[WarningCode, ...] = get_args(WarningCode)


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


_KEY_ORDER = ("level", "code", "where", "message", "file", "line")


def in_key_order(stored: Iterable[Mapping[str, object]]) -> list[Finding]:
    """Findings read back from storage with their keys in the order agents are shown.

    PostgreSQL's jsonb returns object keys in its own order; a repeated answer must
    read exactly like the first one.

    >>> in_key_order([{"code": "cycle", "line": 4, "level": "error", "where": "f", "message": "m"}])
    [{'level': 'error', 'code': 'cycle', 'where': 'f', 'message': 'm', 'line': 4}]
    """
    return [
        cast(Finding, {key: found[key] for key in _KEY_ORDER if key in found}) for found in stored
    ]


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


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one.

    >>> counted(1, "error"), counted(0, "error"), counted(2, "lint error")
    ('1 error', '0 errors', '2 lint errors')
    """
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


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
