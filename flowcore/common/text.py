"""Caller-supplied text: how an error quotes it, and which characters it may hold.

Every error and directive that quotes a name or a value the caller sent goes
through ``shown`` (cut short, control characters escaped), and every string a
caller sends is checked by ``refuse_controls`` before it can reach storage:
PostgreSQL cannot store NUL at all, and no id, label or name needs a control
character. Slot values, a close reason and draft YAML are text that may hold
line breaks and tabs; nothing else may.

A control character is one of Unicode's (general category Cc: C0, DEL and C1), or a
lone surrogate (Cs), which cannot be encoded as UTF-8 and so no database can store.
This one rule (``CONTROLS``) also cleans what the audit trail records.
"""

from __future__ import annotations

import re

from flowcore.common.errors import InvalidInput
from flowcore.common.limits import MAX_ECHO_LENGTH

# C0 controls, DEL, C1 controls, and lone surrogates.
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# The same, but tab, line feed and carriage return are allowed (multi-line text).
_CONTROLS_IN_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def shown(value: object, limit: int = MAX_ECHO_LENGTH) -> str:
    """``value`` quoted for an error or a directive: cut to ``limit`` characters (with
    "…"), control characters escaped.

    >>> shown("E01")
    "'E01'"
    >>> shown("x" * 100, limit=5)
    "'xxxxx…'"
    >>> shown("a\\x00b")
    "'a\\\\x00b'"
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    return repr(text)


def control_character(text: str, *, lines: bool = False) -> tuple[int, str] | None:
    """The position and code point (``U+0000``) of the first character ``text`` may not
    hold, or None. With ``lines``, tab, line feed and carriage return are allowed.

    >>> control_character("r_abc"), control_character("a\\x00"), control_character("a\\nb")
    (None, (1, 'U+0000'), (1, 'U+000A'))
    >>> control_character("a\\x85", lines=True)  # NEL (C1): some readers break lines at it
    (1, 'U+0085')
    >>> control_character("line one\\nline two", lines=True) is None
    True
    """
    found = (_CONTROLS_IN_TEXT if lines else CONTROLS).search(text)
    if found is None:
        return None
    return found.start(), f"U+{ord(found.group()):04X}"


def refuse_controls(what: str, text: str, *, lines: bool = False) -> None:
    """Raise InvalidInput ("control character") when ``text`` holds a character it may
    not (see ``control_character``); ``what`` names it in the error ("run_id", "the
    value of 'order_id'")."""
    found = control_character(text, lines=lines)
    if found is None:
        return
    position, code = found
    allowed = "only tabs and line breaks are allowed there" if lines else "none is allowed there"
    raise InvalidInput(
        "control character",
        f"{what} holds the control character {code} at position {position}",
        f"Send {what} again without control characters ({allowed}).",
    )


def a_kind(kind: str) -> str:
    """``kind`` with its article, as a node's kind reads in a sentence.

    >>> a_kind("end"), a_kind("ask"), a_kind("tell")
    ('an end', 'an ask', 'a tell')
    """
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"
