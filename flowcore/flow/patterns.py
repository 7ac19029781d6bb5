"""Slot patterns, run on RE2: matching takes time linear in the value, whatever the pattern.

Python's ``re`` backtracks: ``(A+)+[0-9]{5}`` against 29 characters froze a worker for
18 seconds. RE2 cannot freeze; in exchange it refuses backreferences and lookaround, which
lint reports as ``bad_pattern``, and its ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII-only.
"""

from __future__ import annotations

import re
from typing import Any

import re2  # type: ignore[import-untyped]

from flowcore.common.limits import MAX_PATTERN_LENGTH, MAX_PATTERN_MEMORY

ENGINE = "re2"


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported by lint, not on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    return options


_OPTIONS = _options()


def pattern_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a slot pattern (the end of a lint message), or None.

    >>> pattern_error("A[0-9]{5}") is None
    True
    >>> pattern_error("A[0-9")
    'it is not a valid regular expression (unterminated character set at position 1)'
    >>> pattern_error("(?=A)A[0-9]{5}")[:60]
    'the linear-time engine (RE2) refuses it (invalid perl operat'
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"it has {len(pattern)} characters; the limit is {MAX_PATTERN_LENGTH}"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"it is not a valid regular expression ({exc})"
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return (
            f"the linear-time engine (RE2) refuses it ({detail}): backreferences, lookahead, "
            "lookbehind and repetition counts over 1000 are not supported"
        )
    return None


def full_match(pattern: str, value: str) -> bool:
    """Whether ``value`` matches ``pattern`` whole (RE2, linear time).

    >>> full_match("(A+)+[0-9]{5}", "A" * 29), full_match("A[0-9]{5}", "A00118")
    (False, True)
    """
    return re2.compile(pattern, _OPTIONS).fullmatch(value) is not None
